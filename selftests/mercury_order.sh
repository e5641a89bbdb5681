#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Mercury's ordering contract, observed at the receiver.
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | mercury_traffic.py send            |      | ... recv         |
#   |   sockets = flows, SO_MARK = tag   |      |  arrival order   |
#   | veth0: tbf (stalled) -> mercury    |------| veth1            |
#   +------------------------------------+      +------------------+
#
# Each case sends a burst of less urgent packets and then urgent ones
# while tbf holds the link (all but its first burst of two packets stays
# queued, whatever the load on the machine), then raises the link and
# checks the order in which they arrive (run_stalled in lib.sh).
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/order.json

# case NAME QDISC-ARGS -- SEND-ARGS -- CHECK-ARGS
case_run() {
	local name=$1 qargs=() sargs=() cargs=() total
	shift
	while [ "$1" != "--" ]; do qargs+=("$1"); shift; done
	shift
	while [ "$1" != "--" ]; do sargs+=("$1"); shift; done
	shift
	cargs=("$@")
	log "$name: qdisc ${qargs[*]}; send ${sargs[*]}"
	if ! setup_tbf $STALL_RATE "${qargs[@]}"; then
		ktap_fail "$name (qdisc setup)"
		return
	fi
	if stalled_fill $R "${sargs[@]}" &&
	   check "${cargs[@]}" --rec $R --expect $total &&
	   wait_backlog_zero veth0 10: &&
	   [ "$(qdisc_stat veth0 10: packets)" = "$total" ] &&
	   [ "$(qdisc_stat veth0 10: drops)" = 0 ]; then
		ktap_ok "$name"
	else
		log "$name: qdisc sent $(qdisc_stat veth0 10: packets) dropped $(qdisc_stat veth0 10: drops) qlen $(qdisc_stat veth0 10: qlen)"
		ktap_fail "$name"
	fi
	[ "${KEEP:-0}" = 1 ] || teardown_qdisc
}

case_run "control: pfifo sends the urgent flow last" \
	pfifo limit 10000 -- \
	--burst lo:10:150 --burst hi:1:30 -- \
	urgent-last --urgent hi

case_run "urgent flow overtakes queued less urgent flow" \
	mercury -- \
	--burst lo:10:150 --burst hi:1:30 -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 100

case_run "most urgent of three flows first" \
	mercury levels 64 -- \
	--burst c:30:100 --burst b:20:40 --burst a:2:20 -- \
	urgent-first --urgent a --max-before 3 --min-overtaken 130

case_run "order inside one flow kept" \
	mercury -- \
	--burst f:10:100 --burst f:1:30 -- \
	in-flow-order

case_run "flow_order off lets urgent packets of a flow overtake" \
	mercury flow_order off -- \
	--burst f:10:100 --burst f:1:30 -- \
	reordered --min-overtaken 20

case_run "tag from skb->priority" \
	mercury tag priority -- \
	--source priority --burst lo:6:150 --burst hi:1:30 -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 100

case_run "tag from mark with shift and mask" \
	mercury levels 255 shift 8 mask 0xff -- \
	--shift 8 --burst lo:9:150 --burst hi:3:30 -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 100

# untagged first is served first but capped at half the bytes while tagged
# packets wait: it overtakes (half the link at once), and an untagged bulk
# no longer starves the gradients (they keep the other half)
case_run "untagged first overtakes tagged, up to half the link" \
	mercury untagged first -- \
	--burst t:5:150 --burst u:0:60 -- \
	share --urgent u --share 45 --slack 30

case_run "untagged first bulk leaves tagged half the link" \
	mercury untagged first -- \
	--burst u:0:150 --burst t:5:60 -- \
	share --urgent t --share 45 --slack 30

# A plan wider than the qdisc: tag 9 of 8 levels is a gradient at the
# least urgent level, not untagged traffic served first.
KEEP=1 case_run "tags above levels go to the least urgent tagged level" \
	mercury levels 8 untagged first -- \
	--burst x:9:150 --burst t:3:30 -- \
	urgent-first --urgent t --max-before 3 --min-overtaken 140
ktap_check "tags above levels: counted at level 8, not untagged" \
	test "$(class_stat packets 8)" = 150 -a "$(class_stat packets 0)" = none
teardown_qdisc

case_run "untagged last waits behind tagged" \
	mercury untagged last -- \
	--burst u:0:60 --burst t:5:150 -- \
	urgent-first --urgent t --max-before 3 --min-overtaken 55

case_run "untagged last keeps a 20% share" \
	mercury untagged last untagged_share 20 -- \
	--burst u:0:60 --burst t:5:300 -- \
	share --urgent u --share 20 --slack 12

ktap_finish
