#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Mercury as the child of tbf, htb and mq.
#
#   +-------------- ns mrc-s ---------------+      +---- ns mrc-r ----+
#   | veth0: tbf  -> mercury                |      |                  |
#   |        htb 1:1 (2mbit) -> mercury     |------| veth1 recv       |
#   |        mq (4 txq) -> mercury per txq  |      |                  |
#   +---------------------------------------+      +------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair 4 || { echo "not ok 1 setup"; exit 1; }

R=/tmp/parents.json

# tbf: peek() must hand out the packet dequeue() will return.
setup_tbf 2mbit mercury
run_traffic $R 180 --burst lo:10:150 --burst hi:1:30
ktap_check "tbf: urgent flow overtakes" check urgent-first --rec $R --urgent hi --min-overtaken 30 --expect 180
ktap_check "tbf: drained, packets exact" drained_with veth0 10: 180
teardown_qdisc

# htb
tcs qdisc add dev veth0 root handle 1: htb default 1 &&
tcs class add dev veth0 parent 1: classid 1:1 htb rate 2mbit burst 3000 &&
tcs qdisc add dev veth0 parent 1:1 handle 10: mercury
run_traffic $R 180 --burst lo:10:150 --burst hi:1:30
ktap_check "htb: urgent flow overtakes" check urgent-first --rec $R --urgent hi --min-overtaken 30 --expect 180
wait_backlog_zero veth0 10:
ktap_check "htb: class and leaf counters agree" test "$(qdisc_stat veth0 10: packets)" = 180 -a "$(qdisc_stat veth0 1: packets)" = 180
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
