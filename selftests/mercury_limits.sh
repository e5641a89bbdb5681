#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Overflow policy and exact counters.
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | mercury_traffic.py send            |      | ... recv         |
#   | veth0: tbf (stalled) -> mercury 10:|------| veth1            |
#   |        limit / memory_limit small  |      |                  |
#   +------------------------------------+      +------------------+
#
# A burst larger than the queue, then urgent packets, all queued behind
# the stalled link (run_stalled in lib.sh: tbf passes its first burst of
# two packets, holds the rest until released, and one more urgent "kick"
# packet restarts it): the urgent ones must all arrive, the drops must
# come from the least urgent level, and every counter of tc -s (qdisc and
# per level) must add up to what arrived.
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/limits.json

counters_add_up() {
	local sent=$1 got=$2 pk dr
	pk=$(qdisc_stat veth0 10: packets)
	dr=$(qdisc_stat veth0 10: drops)
	log "sent $sent, received $got, qdisc packets $pk drops $dr"
	[ "$pk" = "$got" ] && [ "$dr" = $((sent - got)) ] &&
	[ "$(qdisc_stat veth0 10: backlog)" = 0 ] &&
	[ "$(qdisc_stat veth0 10: qlen)" = 0 ]
}

received() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' $R; }

# overflow TOTAL KICK MERCURY-OPTIONS... -- SEND-ARGS...: queue SEND-ARGS
# behind the stalled link, release it with the KICK packet (NAME:TAG:1,
# counted in TOTAL) and wait until it drained; $got is the number that
# arrived.
overflow() {
	local total=$1 kick=$2 opts=()
	shift 2
	while [ "$1" != "--" ]; do opts+=("$1"); shift; done
	shift
	setup_tbf $STALL_RATE mercury "${opts[@]}"
	run_stalled $R "$total" "$kick" "$@" || log "run_stalled failed"
	wait_backlog_zero veth0 10:
	got=$(received)
}

# --- packet limit ---------------------------------------------------------
# Two lo packets pass tbf, 40 queue, the other 98 find the queue full of
# their own level and are dropped; each of the 21 hi packets (the kick
# included) evicts the newest lo packet: 2 + 19 lo and 21 hi arrive.
overflow 161 hi:1:1 limit 40 -- --burst lo:10:140 --burst hi:1:20
ktap_check "limit: every urgent packet arrives" check count --rec $R --urgent hi --count 21
ktap_check "limit: exactly the packets the policy keeps arrive" test "$got" = 42
ktap_check "limit: drops happened and only less urgent" \
	test "$(class_stat drops 10)" -gt 0 -a "$(class_stat drops 1)" = 0
ktap_check "limit: tc -s packets, drops, backlog exact" counters_add_up 161 "$got"
ktap_check "limit: drops counted as limit drops" \
	test "$(qdisc_stat veth0 10: drops_limit)" = "$((161 - got))" -a "$(qdisc_stat veth0 10: drops_memory)" = 0
ktap_check "limit: per-level sent counters add up" \
	test "$(class_stat packets 1)" = 21 -a "$(($(class_stat packets 10) + 21))" = "$got"
ktap_check "limit: most urgent level seen is 1" test "$(qdisc_stat veth0 10: most_urgent)" = 1
# every tag-1 packet left while tag-10 packets were still queued
ktap_check "limit: inversions_avoided counts the urgent packets" \
	test "$(qdisc_stat veth0 10: inversions_avoided)" -ge 21
teardown_qdisc

# --- memory limit ---------------------------------------------------------
overflow 161 hi:1:1 memory_limit 100kb -- --burst lo:10:140 --burst hi:1:20
ktap_check "memory_limit: every urgent packet arrives" check count --rec $R --urgent hi --count 21
ktap_check "memory_limit: drops counted as memory drops" \
	test "$(qdisc_stat veth0 10: drops_memory)" -gt 0 -a "$(qdisc_stat veth0 10: drops_limit)" = 0
ktap_check "memory_limit: tc -s packets, drops, backlog exact" counters_add_up 161 "$got"
ktap_check "memory_limit: memory_usage back to 0" test "$(qdisc_stat veth0 10: memory_usage)" = 0
teardown_qdisc

# --- a more urgent packet is never dropped for a less urgent one ----------
# Two hi packets pass tbf, 23 hi and 7 lo fill the queue, the other 63 lo
# are dropped on arrival; the hi kick evicts one lo: 2 + 24 hi, 6 lo.
overflow 96 hi:1:1 limit 30 -- --burst hi:1:25 --burst lo:10:70
ktap_check "full of urgent: arriving less urgent packets are the ones dropped" \
	test "$(class_stat drops 1)" = 0 -a "$(class_stat drops 10)" = 64
ktap_check "full of urgent: every urgent packet arrives" check count --rec $R --urgent hi --count 26
ktap_check "full of urgent: counters exact" counters_add_up 96 "$got"
teardown_qdisc

# --- tail drop inside a mixed flow rebuilds its urgency -------------------
# One flow queues tag 5 packets then one tag 2 packet per round; the
# limit drops the flow's tail, which has to restore the flow's level.
overflow 176 o:1:1 limit 20 -- --burst m:5:30 --burst m:2:1 --burst m:5:30 --burst m:2:1 \
	--burst o:1:15 --burst m:6:98
ktap_check "mixed flow drops: order inside the flow kept" check in-flow-order --rec $R
ktap_check "mixed flow drops: counters exact" counters_add_up 176 "$got"
ktap_check "mixed flow drops: urgent flow complete" check count --rec $R --urgent o --count 16
teardown_qdisc

ktap_finish
