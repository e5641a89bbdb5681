#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# make bench-shared: issue 34's shared-NIC scenarios, on the training
# job of bench/torch (2 host ranks in network namespaces, the link in the
# guest). This script only chooses each scenario's settings;
# bench/torch/run.sh (its BT_BULK blocks) and bench/torch/guest.sh (its
# BT_BULK schemes, shared_scheme) run it, and bench/shared/report.py
# prints one table per scenario.
#
#   bulk     scenario 1, background bulk (the default): under each
#            scheme, training alone and then beside an untagged bulk TCP
#            transfer (a checkpoint upload, bench/shared/bulk.py) from
#            rank 0's namespace to rank 1's over the same guest egress.
#   shallow  scenario 2, shallow shared buffer: training alone (no bulk)
#            while every scheme holds the same total bytes, BS_BYTES
#            (default: one bandwidth-delay product of the link at
#            BS_RTT_MS plus the initial windows, 10 frames each, of
#            mercury.torch's BT_CHANNELS (8) channels: 124870 bytes at
#            30 Mbit/s and 1 ms, the idle round trip measured here);
#            pfifo, sch_mercury: one limit of that many frames; prio and
#            ets: split equally over the bands the job uses (its channels
#            and the untagged band); fq: a third on each of its 3 bands.
#            The ranks send, and the guest queues, single frames (no
#            GSO/GRO aggregates), so packet limits are byte limits. Drops
#            are counted per channel (DSCP = tag = channel). Its own
#            schemes and output directory (OUTDIR/shallow). Run time on
#            this 2-core host (load 1-3.5): about 95 s a repetition of
#            its 6 schemes and 1.5 min a boot; BS_BOOTS=3 BS_REPEAT=6
#            took 29 minutes.
#   twojobs  scenario 3, two jobs on one link: two independent jobs of
#            the same model (2 ranks each, one in each namespace) train
#            at once over the same guest egress. mercury.torch runs each
#            with 7 channels and tags job J's channel c with
#            job_tag(J, 7, c) = J << 3 | c (DSCP 1..7 and 9..15); stock
#            DDP does not tag. Schemes: stock DDP on pfifo; mercury.torch
#            on pfifo (the reference), on prio 16 with u32 DSCP filters
#            (DSCP t in band t: job 0 and the untagged in bands 0-7, job
#            1 in 8-15), on 16 strict ets bands (the same filters, t in
#            band t-1, untagged last), on fq (its default bands) and on
#            sch_mercury (tag dscp: job 0's channels before job 1's).
#            Each job at the size whose step computes twice as long as
#            its gradients take on the link (the size rule at half the
#            rate, BT_BALANCE_RATE), 60 iterations; each job's it/s is
#            taken while both train. Its own output directory
#            (OUTDIR/twojobs). On a 2-core host the four ranks are then
#            CPU-bound (Documentation/results/bench-shared.md, scenario
#            3); BS_TINY_SIZE=64 (the rule's own balance at 30 Mbit/s
#            here) measures the link, saturated by the two jobs.
#            About 13 minutes a boot at 160 px (2 repetitions).
#
#   bench/shared/run.sh [-o OUTDIR]    (default OUTDIR: out/bench-shared)
#       the three scenarios, one after the other, each in 3 boots (bulk:
#       1 repetition a boot; shallow: 2; twojobs: 1), then their three
#       tables together and the total time; make bench-shared runs this.
#       Within the hour on this 2-core host (Documentation/results/
#       bench-shared.md gives each run's time and load).
#   BS_SCENARIO=shallow bench/shared/run.sh           one scenario
#   BS_QUICK=1 bench/shared/run.sh     every scheme once: a plumbing check
#
# Settings (environment): BS_SCENARIO ("bulk shallow twojobs"; any of
# them), BS_SCHEMES (bulk: "fifo prio prio-last ets-strict ets-quanta
# mercury-share fq"; "ddp", stock DDP on pfifo, and "mercury", sch_mercury
# untagged first, also run; shallow: "fifo prio-last ets-strict
# mercury-share mercury-fl fq", "ddp" also runs; mercury-fl is
# sch_mercury with flow_limit, BS_FLOW_LIMIT packets, by default prio's
# per-band split of the buffer), BS_SHARE (sch_mercury's untagged_share
# and ets-quanta's split, in %: 5 in bulk, where it met both of scenario
# 1's targets, while 10 left training at 0.895x alone; 0 (none) in
# shallow),
# BS_BYTES and BS_RTT_MS (shallow), BS_MODELS (tiny), BS_TINY_SIZE /
# BS_TINY_BATCH, BS_ITERS, BS_REPEAT (per scenario, as above), BS_BOOTS
# (3; 1 with BS_QUICK=1), BS_RATE (30mbit), BS_TRAIN_TIMEOUT (seconds of
# training beside the bulk before a starved job is stopped, counted from
# its first barrier: 30, time for 40 iterations at 0.6x of alone; 45
# quick), BS_RUN_TIMEOUT (seconds any run may take, start-up included:
# 300), BS_DEADLINE (a date: no repetition or boot starts that would end
# after it); any other BT_ setting of
# bench/torch/run.sh passes through.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/out/bench-shared
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift ;;
	-h|--help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "bench-shared: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
scenarios=${BS_SCENARIO:-bulk shallow twojobs}
for sc in $scenarios; do
	case $sc in bulk|shallow|twojobs) ;; *) echo "bench-shared: unknown scenario $sc (bulk, shallow, twojobs)" >&2; exit 2 ;; esac
done
if [ "$(echo $scenarios | wc -w)" -gt 1 ]; then
	# bulk writes OUTDIR itself, the others a directory in it: bulk first,
	# so that its clean-up of OUTDIR leaves theirs alone
	rc=0 t0=$(date +%s) ordered=""
	for sc in bulk shallow twojobs; do
		case " $scenarios " in *" $sc "*) ordered="$ordered $sc" ;; esac
	done
	for sc in $ordered; do
		BS_SCENARIO=$sc "$0" -o "$out" || rc=1
	done
	echo
	echo "bench-shared: the scenarios' tables together; all in $(( ($(date +%s) - t0) / 60 )) min"
	for sc in $ordered; do
		d=$out
		[ $sc = bulk ] || d=$out/$sc
		echo
		echo "== scenario $sc =="
		cat "$d/bench-shared.txt" 2>/dev/null || { echo "bench-shared: no table for $sc"; rc=1; }
	done
	exit $rc
fi
export BT_BULK=1 BT_SCENARIO=$scenarios
[ "$scenarios" = bulk ] || out=$out/$scenarios
if [ "$scenarios" = shallow ]; then
	export BT_SHARE=${BS_SHARE:-0}
	export BT_SCHEMES=${BS_SCHEMES:-fifo prio-last ets-strict mercury-share mercury-fl fq}
	[ -n "${BS_FLOW_LIMIT:-}" ] && export BT_FLOW_LIMIT=$BS_FLOW_LIMIT
	# one bandwidth-delay product (the idle link's round trip, measured:
	# runs/rtt.txt, in the report) plus every channel's initial window
	# (10 frames of MTU + 14 bytes)
	frame=$(( ${BT_MTU:-1500} + 14 )) ch=${BT_CHANNELS:-8} rtt=${BS_RTT_MS:-1}
	bdp=$(awk -v r="${BS_RATE:-30mbit}" -v t="$rtt" 'BEGIN {
		m = r ~ /gbit$/ ? 1e9 : r ~ /mbit$/ ? 1e6 : r ~ /kbit$/ ? 1e3 : 1
		sub(/[a-z]+$/, "", r); printf "%d", r * m / 8 * t / 1000 }')
	export BT_BYTES=${BS_BYTES:-$(( bdp + ch * 10 * frame ))}
	n=$(( BT_BYTES / frame ))
	echo "bench-shared: shallow buffer $BT_BYTES bytes (BDP $bdp at ${rtt} ms + $ch channels x 10 x $frame):" \
		"$n frames; pfifo limit $n, sch_mercury limit $n, fq limit $(( n / 3 )) per band (3 bands, Linux 6.7+; else $n);" \
		"prio and ets: $(( n / (ch + 1) )) on each of 16 bands ($((ch + 1)) used: untagged and $ch channels)"
elif [ "$scenarios" = twojobs ]; then
	export BT_SHARE=${BS_SHARE:-0}
	export BT_SCHEMES=${BS_SCHEMES:-ddp fifo prio ets-strict fq mercury}
	export BT_CHANNELS=${BT_CHANNELS:-7}
	# each job at the size whose step computes twice as long as its
	# gradients take on the link (the bench's rule at half the rate): alone
	# it leaves about half the link idle, so two jobs fit if their
	# communication interleaves. At the bench's own balance (compute =
	# wire) two jobs saturate the link, and no order of them can beat
	# sharing it: the iterations a second both jobs make together stay
	# what pfifo gives, only who gets them changes.
	BS_TINY_SIZE=${BS_TINY_SIZE:-auto}
	rate=${BS_RATE:-30mbit}
	export BT_BALANCE_RATE=${BT_BALANCE_RATE:-$(awk -v r="$rate" 'BEGIN {
		u = r; sub(/^[0-9.]+/, "", u); sub(/[a-z]+$/, "", r); printf "%g%s", r / 2, u }')}
	BS_ITERS=${BS_ITERS:-60}
else
	export BT_SHARE=${BS_SHARE:-5}
	export BT_SCHEMES=${BS_SCHEMES:-fifo prio prio-last ets-strict ets-quanta mercury-share fq}
fi
export BT_MODELS=${BS_MODELS:-tiny}
export BT_RATE=${BS_RATE:-30mbit}
if [ "${BS_QUICK:-0}" = 1 ]; then
	export BT_BOOTS=${BS_BOOTS:-1}
	export BT_QUICK=1
	export BT_REPEAT=${BS_REPEAT:-1}
	export BT_ITERS=${BS_ITERS:-40}
	export BT_TINY_SIZE=${BS_TINY_SIZE:-32} BT_TINY_BATCH=${BS_TINY_BATCH:-8}
	export BT_BULK_TIMEOUT=${BS_TRAIN_TIMEOUT:-45}
else
	# repetitions a boot, so that the three scenarios' 3 boots each fit
	# the hour (shallow's runs are the shortest)
	[ "$BT_SCENARIO" = shallow ] && rep=2 || rep=1
	export BT_BOOTS=${BS_BOOTS:-3}
	export BT_REPEAT=${BS_REPEAT:-$rep}
	export BT_ITERS=${BS_ITERS:-40}
	export BT_TINY_SIZE=${BS_TINY_SIZE:-32} BT_TINY_BATCH=${BS_TINY_BATCH:-8}
	export BT_BULK_TIMEOUT=${BS_TRAIN_TIMEOUT:-30}
fi
export BT_RUN_TIMEOUT=${BS_RUN_TIMEOUT:-300}
[ -n "${BS_DEADLINE:-}" ] && export BT_DEADLINE=$BS_DEADLINE
echo "bench-shared: scenario $BT_SCENARIO; schemes $BT_SCHEMES; untagged_share $BT_SHARE; $BT_MODELS" \
	"(${BT_TINY_SIZE} px, batch ${BT_TINY_BATCH}), $BT_ITERS iterations, $BT_REPEAT repetition(s)," \
	"link $BT_RATE$([ "$BT_SCENARIO" = bulk ] && echo ", training stopped after ${BT_BULK_TIMEOUT}s beside the bulk")"
exec "$top/bench/torch/run.sh" -o "$out"
