#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Operation-sequence fuzzing: FUZZ_SEQS (default 20) random sequences from
# selftests/fuzz/mercury-opfuzz (opfuzz.c): add, change, replace, graft,
# delete, class and qdisc dumps, link down/up and rmmod/insmod, under
# tagged TCP and UDP traffic, with mercury as root and as the child of tbf,
# htb and mq. Each sequence ends with the accounting check (sent + dropped
# + queued = enqueued, the levels sum to the qdisc, nothing left queued in
# mercury or its parent) and the skb-leak check. FUZZ_SEED replays a run.
#
#   +------------ ns mrc-s --------------+      +---- ns mrc-r -----+
#   | mercury-blast send: TCP + UDP at   |      | mercury-blast sink|
#   |   random tags (0..70000)           |      |                   |
#   | veth0 (4 tx queues): mercury, or   |------| veth1             |
#   |   tbf/htb/mq -> mercury            |      |                   |
#   | mercury-opfuzz: netlink, rmmod     |      |                   |
#   +------------------------------------+      +-------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
FZ=$MERCURY_ROOT/selftests/fuzz
seqs=${FUZZ_SEQS:-20}
# make test replays one fixed seed, so a red run is always the same run;
# FUZZ_SEED=random explores (make test-debug, the soak). opfuzz.py's seed
# 1417820550 no longer replays its htb delete under traffic that showed
# the checker's own false alarm (Documentation/safety.md): mercury-opfuzz
# draws other sequences from it (mq, mq, tbf, root; no htb, no rmmod).
# Seeds 1417820634 and up draw, in their first 4 sequences, every placement and
# operation: mq with rmmod; root with rmmod; tbf with a delete; htb with
# two deletes under traffic.
seed=${FUZZ_SEED:-1417820634}
[ "$seed" = random ] && seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
SINK_PID=""
trap '[ -n "$SINK_PID" ] && kill $SINK_PID 2>/dev/null; cleanup_pair' EXIT
[ -x $FZ/mercury-blast ] && [ -x $FZ/mercury-opfuzz ] ||
	{ echo "not ok 1 selftests/fuzz not built (make -C selftests/fuzz)"; exit 1; }
setup_pair 4 || { echo "not ok 1 setup"; exit 1; }
lladdr_r=$(lladdr $NS_R veth1)
lladdr_s=$(lladdr $NS_S veth0)
$IP netns exec $NS_R $FZ/mercury-blast sink -p 9000 > /dev/null &
SINK_PID=$!

ktap_check "$seqs random operation sequences under traffic: accounting adds up, no skb leaked (seed $seed)" \
	$FZ/mercury-opfuzz --ns-s $NS_S --ns-r $NS_R --dst $ADDR_R --src $ADDR_S \
	--lladdr "$lladdr_r" --lladdr-s "$lladdr_s" \
	--ko "$MERCURY_ROOT/sch_mercury.ko" --blast $FZ/mercury-blast --seqs "$seqs" --seed "$seed" --skb-slack "$(skb_slack)"
kill $SINK_PID 2>/dev/null
wait $SINK_PID 2>/dev/null
SINK_PID=""
cleanup_pair
ktap_check "rmmod after the sequences" rmmod sch_mercury
ktap_finish
