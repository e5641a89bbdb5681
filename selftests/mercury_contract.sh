#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The drop contract and the real peek, with queues filled deterministically.
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | mercury_traffic.py send            |      | ... recv         |
#   | veth0: tbf (stalled) -> mercury 10:|------| veth1            |
#   +------------------------------------+      +------------------+
#
# tbf starts at 8 bit/s: one "plug" packet spends its bucket, and every
# packet after it waits in mercury, whose queue is then filled exactly as
# the test says. Raising the rate releases the queue; tbf_change() neither
# cancels the watchdog (due in minutes at 8 bit/s) nor reschedules the
# device, so one more packet (the "kick", least urgent, with mercury's
# limits raised first so that it drops nothing) starts the drain. The
# receiver records the order in which packets left. Counters are read once the qdisc is
# empty again. Under tbf, mercury is peeked whenever tbf waits for tokens:
# a peek that held a packet (qdisc_peek_dequeued) would send that packet
# first, before more urgent arrivals.
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/contract.json

# tbf's bucket, and the plug that empties it (bytes)
BURST=1600
PLUG_SIZE=1000

# stalled MERCURY-OPTIONS...: tbf at 8 bit/s over mercury 10:.
stalled() {
	tcs qdisc replace dev veth0 root handle 1: tbf rate 8bit burst $BURST limit 10000000 &&
	tcs qdisc add dev veth0 parent 1:1 handle 10: mercury "$@"
}

release() {
	tcs qdisc change dev veth0 parent 1:1 handle 10: mercury limit 100000 memory_limit 32Mb &&
	tcs qdisc change dev veth0 root handle 1: tbf rate 100mbit burst $((BURST + 3000)) limit 10000000 &&
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --burst kick:1000:1
}

# fill_release QUEUED SEND-ARGS... [++ SEND-ARGS...]: start the receiver,
# send the plug, then each group of SEND-ARGS (one sender each) into the
# stalled queue, check that QUEUED packets wait in mercury, release, and
# wait for the queue to drain and the receiver to stop. Sets $queued to
# what waited. $BEFORE_SEND, if set, runs after the plug left.
fill_release() {
	local want=$1 i pid args=()
	shift
	# the receiver stops once the queue drained, never on a timer: a
	# busy machine can take many seconds between the plug and the drain
	start_receiver "$R" 1000 600
	pid=$recv_pid
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size $PLUG_SIZE --burst plug:20:1
	# the plug leaves at once; wait until tbf has sent it
	for ((i = 0; i < 100; i++)); do
		[ "$(qdisc_stat veth0 1: packets)" = 1 ] && break
		sleep 0.1
	done
	[ -z "$BEFORE_SEND" ] || $BEFORE_SEND
	for a in "$@" ++; do
		if [ "$a" = ++ ]; then
			$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R "${args[@]}"
			args=()
		else
			args+=("$a")
		fi
	done
	queued=$(qdisc_stat veth0 10: qlen)
	log "queued in mercury before release: $queued (want $want)"
	release
	wait_backlog_zero veth0 10:
	wait_backlog_zero veth0 1:
	touch "$R.stop"
	wait $pid
	log "after the drain: mercury sent $(qdisc_stat veth0 10: packets) dropped $(qdisc_stat veth0 10: drops) qlen $(qdisc_stat veth0 10: qlen)"
	tcs -s class show dev veth0 | grep -E "^class|Sent|tag" | sed 's/^/# /'
}

# arrived EXPECTED: the packets between the plug and the kick (which,
# least urgent, must come last), as "name:tag:seq" words, are exactly
# EXPECTED, in that order.
arrived() {
	python3 - "$R" "$1" <<'EOF'
import json, sys
got = ["%s:%d:%d" % tuple(p) for p in json.load(open(sys.argv[1]))]
want = ["plug:20:0"] + sys.argv[2].split() + ["kick:1000:0"]
print("# arrived: " + " ".join(got))
sys.exit(0 if got == want else 1)
EOF
}

# --- flow_order off: the least urgent packets go, the newest first --------
# The issue's example: 10 10 9 9 8 8 queued (limit 6), 7 7 7 6 6 6 arrive.
stalled flow_order off limit 6
fill_release 6 --burst a:10:2 --burst a:9:2 --burst a:8:2 --burst b:7:3 --burst b:6:3
ktap_check "flow_order off: the six more urgent arrivals stay, in rank order" \
	arrived "b:6:3 b:6:4 b:6:5 b:7:0 b:7:1 b:7:2"
ktap_check "flow_order off: queue was full before the release" test "$queued" = 6
ktap_check "flow_order off: six limit drops, two per old level" \
	test "$(qdisc_stat veth0 10: drops_limit)" = 6 -a "$(qdisc_stat veth0 10: drops)" = 6 \
	-a "$(class_stat drops 10)" = 2 -a "$(class_stat drops 9)" = 2 -a "$(class_stat drops 8)" = 2
ktap_check "flow_order off: the arrivals were never dropped" \
	test "$(class_stat drops 7)" = 0 -a "$(class_stat drops 6)" = 0
teardown_qdisc

# --- flow_order on: the victim is the least urgent newest packet ----------
# Flow a queues 5 x tag 5 then 5 x tag 60 (limit 10); flow b sends 10 x tag
# 10. a's tag-60 tail goes first; then b's own newest tag 10 is the least
# urgent tail, so the rest of b's arrivals are dropped.
stalled limit 10
fill_release 10 --burst a:5:5 --burst a:60:5 --burst b:10:10
ktap_check "flow_order on: a's tag-5 packets, then the first five of b" \
	arrived "a:5:0 a:5:1 a:5:2 a:5:3 a:5:4 b:10:0 b:10:1 b:10:2 b:10:3 b:10:4"
ktap_check "flow_order on: a's five tag-60 packets and five of b's dropped" \
	test "$(class_stat drops 60)" = 5 -a "$(class_stat drops 10)" = 5 \
	-a "$(class_stat drops 5)" = 0 -a "$(qdisc_stat veth0 10: drops_limit)" = 10
ktap_check "flow_order on: per-level sent counters" \
	test "$(class_stat packets 5)" = 5 -a "$(class_stat packets 10)" = 5
teardown_qdisc

# --- a real peek: urgent arrivals overtake while tbf waits ----------------
stalled limit 100
fill_release 6 --burst lo:10:3 --burst hi:1:3
ktap_check "peek holds nothing: the urgent packets leave first" \
	arrived "hi:1:0 hi:1:1 hi:1:2 lo:10:0 lo:10:1 lo:10:2"
ktap_check "peek: nothing dropped, counters at dequeue" \
	test "$(qdisc_stat veth0 10: drops)" = 0 -a "$(class_stat packets 1)" = 3 \
	-a "$(class_stat packets 10)" = 3 -a "$(qdisc_stat veth0 10: packets)" = 8
teardown_qdisc

# --- a packet larger than memory_limit drops alone -------------------------
# An 8000-byte datagram in one skb (MTU 9000) does not fit memory_limit
# 6000; the two small less urgent packets queued before it must stay. The
# plug is as large (tbf's bucket must pass it), so the limit is lowered
# only once the plug has left.
$IP -n $NS_S link set veth0 mtu 9000
$IP -n $NS_R link set veth1 mtu 9000
BURST=9000 PLUG_SIZE=8900
lower_memory() { tcs qdisc change dev veth0 parent 1:1 handle 10: mercury memory_limit 6000; }
BEFORE_SEND=lower_memory
stalled
fill_release 2 --burst lo:10:2 ++ --size 8000 --burst big:1:1
BEFORE_SEND=
ktap_check "oversize: the small packets arrive, the big one does not" \
	arrived "lo:10:0 lo:10:1"
ktap_check "oversize: one memory drop, at the big packet's level only" \
	test "$(qdisc_stat veth0 10: drops_memory)" = 1 -a "$(qdisc_stat veth0 10: drops)" = 1 \
	-a "$(class_stat drops 1)" = 1 -a "$(class_stat drops 10)" = 0
teardown_qdisc

ktap_finish
