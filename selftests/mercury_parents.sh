#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Mercury as the child of tbf, htb and mq.
#
#   +-------------- ns mrc-s ---------------+      +---- ns mrc-r ----+
#   | veth0: tbf (stalled) -> mercury       |      |                  |
#   |        tbf (stalled) -> htb 2:1       |------| veth1 recv       |
#   |                         -> mercury    |      |                  |
#   |        mq (4 txq) -> mercury per txq  |      |                  |
#   +---------------------------------------+      +------------------+
#
# The tbf and htb cases queue everything behind tbf stalled at
# $STALL_RATE before the link is raised (run_stalled in lib.sh): htb does
# not restart a throttled class when its rate changes, so it sits under
# the stalled tbf, with a rate that never throttles it. htb has no real
# peek: tbf's peeks make it dequeue one packet from mercury and hold it,
# so one less urgent packet may leave before the urgent ones.
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair 4 || { echo "not ok 1 setup"; exit 1; }

R=/tmp/parents.json

# tbf: peek() must hand out the packet dequeue() will return.
setup_tbf $STALL_RATE mercury
run_stalled $R 181 hi:1:1 --burst lo:10:150 --burst hi:1:30
ktap_check "tbf: urgent flow overtakes" check urgent-first --rec $R --urgent hi \
	--max-before 2 --min-overtaken 140 --expect 181
ktap_check "tbf: drained, packets exact" drained_with veth0 10: 181
teardown_qdisc

# htb
tcs qdisc replace dev veth0 root handle 1: tbf rate $STALL_RATE burst 3000 limit 10000000 &&
tcs qdisc add dev veth0 parent 1:1 handle 2: htb default 1 &&
tcs class add dev veth0 parent 2: classid 2:1 htb rate 1gbit burst 100000 &&
tcs qdisc add dev veth0 parent 2:1 handle 10: mercury
run_stalled $R 181 hi:1:1 --burst lo:10:150 --burst hi:1:30
ktap_check "htb: urgent flow overtakes" check urgent-first --rec $R --urgent hi \
	--max-before 3 --min-overtaken 140 --expect 181
wait_backlog_zero veth0 10:
ktap_check "htb: class and leaf counters agree" \
	test "$(qdisc_stat veth0 10: packets)" = 181 -a "$(qdisc_stat veth0 2: packets)" = 181
teardown_qdisc

# mq: one mercury per tx queue; the sum of their counters is what arrived.
tcs qdisc add dev veth0 root handle 1: mq
for i in 1 2 3 4; do
	tcs qdisc add dev veth0 parent 1:$i handle $((10 + i)): mercury levels 64
done
ktap_check "mq: four mercury children" \
	test "$(tcs qdisc show dev veth0 | grep -c 'qdisc mercury')" = 4
run_traffic $R 400 --burst a:3:100 --burst b:1:100 --burst c:7:100 --burst d:2:100
total=0
for i in 1 2 3 4; do
	n=$(qdisc_stat veth0 $((10 + i)): packets)
	log "mq child $((10 + i)): $n packets"
	total=$((total + n))
done
ktap_check "mq: all 400 packets arrive" check count --rec $R --urgent a --count 100
ktap_check "mq: children's counters sum to what arrived" test "$total" = 400
ktap_check "mq: order inside each flow kept" check in-flow-order --rec $R
teardown_qdisc

ktap_finish
