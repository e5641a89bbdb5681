#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# change, replace, delete and rmmod with packets queued and under traffic.
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | veth0: tbf 1mbit -> mercury (10:)  |------| veth1 recv       |
#   |   tc qdisc change/replace/del      |      |  counts arrivals |
#   |   rmmod sch_mercury                |      |                  |
#   +------------------------------------+      +------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/life.json

# queued_burst COUNT SEND-ARGS...: queue a burst behind the stalled link
# (setup_tbf $STALL_RATE) so it stays queued whatever the machine's load,
# act on the qdisc, then release_burst: the link is raised and one kick
# packet restarts tbf (it does not restart on change). The receiver
# expects COUNT + 1 packets, the kick included; it has no short idle
# timer (what a case does while the link is stalled may take long on a
# busy machine), and stops once the link drained.
queued_burst() {
	local count=$1 i
	shift
	rm -f $R.queued $R.release
	start_receiver $R $((count + 1)) 600
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R "$@" \
		--queued $R.queued --release $R.release --kick kick:1:1 &
	SENDER=$!
	for ((i = 0; i < 3000; i++)); do
		[ -e $R.queued ] && break
		sleep 0.1
	done
}

release_burst() {
	# fails harmlessly where the case deleted the root qdisc
	tcs qdisc change dev veth0 root handle 1: tbf rate $RELEASE_RATE \
		burst 3000 limit 10000000 2>/dev/null
	touch $R.release
	wait $SENDER
	stop_receiver $R
	rm -f $R.queued $R.release
}

opt() { tcs -j qdisc show dev veth0 | jq -r --arg k "$1" '.[] | select(.handle == "10:") | .options[$k]'; }

# change: options that re-rank queued packets and options that do not
setup_tbf $STALL_RATE mercury
queued_burst 300 --burst lo:10:200 --burst hi:2:100
q0=$(qdisc_stat veth0 10: qlen)
log "queued before change: $q0"
tcs qdisc change dev veth0 parent 1:1 handle 10: mercury levels 64 flows 256 limit 5000 untagged last
rc=$?
q1=$(qdisc_stat veth0 10: qlen)
log "queued after change: $q1"
release_burst
ktap_check "change with packets queued succeeds" test $rc = 0 -a "$q0" -gt 50
ktap_check "change loses no packet" check count --rec $R --urgent lo --count 200
ktap_check "change keeps order inside flows" check in-flow-order --rec $R
ktap_check "change applied the options" test "$(opt levels)" = 64 -a "$(opt flows)" = 256 -a "$(opt untagged)" = last
ktap_check "change: counters exact" drained_with veth0 10: 301
teardown_qdisc

# replace with the same kind and handle keeps the queue too
setup_tbf $STALL_RATE mercury
queued_burst 300 --burst lo:10:200 --burst hi:2:100
tcs qdisc replace dev veth0 parent 1:1 handle 10: mercury levels 2048 mask 0xfff quantum 6000
rc=$?
release_burst
ktap_check "replace with packets queued succeeds" test $rc = 0
ktap_check "replace loses no packet" check count --rec $R --urgent hi --count 100
ktap_check "replace applied the options" test "$(opt levels)" = 2048 -a "$(opt quantum)" = 6000
teardown_qdisc

# change to a smaller limit drops the least urgent queued packets
setup_tbf $STALL_RATE mercury
queued_burst 210 --burst lo:10:200 --burst hi:2:10
tcs qdisc change dev veth0 parent 1:1 handle 10: mercury limit 20
ktap_check "lower limit: queue cut to the limit at once" test "$(qdisc_stat veth0 10: qlen)" -le 20
release_burst
ktap_check "lower limit keeps every urgent packet" check count --rec $R --urgent hi --count 10
ktap_check "lower limit: queue within limit, backlog 0 at the end" wait_backlog_zero veth0 10:
ktap_check "lower limit: drops counted" test "$(qdisc_stat veth0 10: drops)" -gt 0
teardown_qdisc

# delete with packets queued
setup_tbf $STALL_RATE mercury
queued_burst 300 --burst lo:10:300
ktap_check "delete with packets queued" tcs qdisc del dev veth0 root
release_burst

# rmmod: refused while in use, clean after delete under traffic
setup_tbf 1mbit mercury
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --gap 0.01 \
	$(for i in $(seq 40); do echo --burst "f$((i % 4)):$((i % 9)):20"; done) &
SENDER=$!
sleep 1
ktap_check "rmmod refused while a qdisc uses the module" bash -c '! rmmod sch_mercury 2>/dev/null'
tcs qdisc del dev veth0 root
ktap_check "rmmod under traffic after delete" rmmod sch_mercury
wait $SENDER
ktap_check "module gone" bash -c '! grep -q "^sch_mercury " /proc/modules'
mercury_load
ktap_check "reload and add again" setup_tbf 1mbit mercury
teardown_qdisc

# reset: deactivating the device with packets queued frees them
setup_tbf $STALL_RATE mercury
queued_burst 300 --burst lo:10:300
$IP -n $NS_S link set veth0 down
ktap_check "reset on link down empties the queue" test "$(qdisc_stat veth0 10: qlen)" = 0 -a "$(qdisc_stat veth0 10: memory_usage)" = 0
$IP -n $NS_S link set veth0 up
release_burst
teardown_qdisc

ktap_finish
