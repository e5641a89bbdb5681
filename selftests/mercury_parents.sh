#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Mercury as the child of tbf, htb and mq.
#
#   +-------------- ns mrc-s ---------------+      +---- ns mrc-r ----+
#   | veth0: tbf -> mercury                 |      |                  |
#   |        tbf -> htb 2:1 (2mbit) -> mrc  |------| veth1 recv       |
#   |        mq (4 txq) -> mercury per txq  |      |                  |
#   +---------------------------------------+      +------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair 4 || { echo "not ok 1 setup"; exit 1; }

R=/tmp/parents.json

# Both cases fill the queue behind a stalled link (run_stalled in lib.sh)
# and then drain it at 2 Mbit/s, so that the parent throttles while every
# packet is already queued: the order checked is the qdisc's, whatever the
# load on the machine.
#
# tbf: peek() must hand out the packet dequeue() will return, while tbf
# waits for tokens between peeks.
setup_tbf $STALL_RATE mercury
RELEASE_RATE=2mbit run_stalled $R 181 hi:1:1 --burst lo:10:150 --burst hi:1:30
ktap_check "tbf: urgent flow overtakes" check urgent-first --rec $R --urgent hi --max-before 3 --min-overtaken 100 --expect 181
ktap_check "tbf: drained, packets exact" drained_with veth0 10: 181
teardown_qdisc

# htb: mercury as the leaf of a 2 Mbit/s class. The stalled tbf above htb
# is only there to fill the queue; htb dequeues from mercury directly.
tcs qdisc add dev veth0 root handle 1: tbf rate $STALL_RATE burst 3000 limit 10000000 &&
tcs qdisc add dev veth0 parent 1:1 handle 2: htb default 1 &&
tcs class add dev veth0 parent 2: classid 2:1 htb rate 2mbit burst 3000 &&
tcs qdisc add dev veth0 parent 2:1 handle 10: mercury
run_stalled $R 181 hi:1:1 --burst lo:10:150 --burst hi:1:30
ktap_check "htb: urgent flow overtakes" check urgent-first --rec $R --urgent hi --max-before 3 --min-overtaken 100 --expect 181
wait_backlog_zero veth0 10:
ktap_check "htb: class and leaf counters agree" test "$(qdisc_stat veth0 10: packets)" = 181 -a "$(qdisc_stat veth0 2: packets)" = 181
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
