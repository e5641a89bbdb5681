#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# make bench-shared: issue 34's scenario 1, background bulk. The training
# job of bench/torch (2 host ranks in network namespaces, the link in the
# guest) under each scheme, alone and then beside an untagged bulk TCP
# transfer (a checkpoint upload, bench/shared/bulk.py) from rank 0's
# namespace to rank 1's over the same guest egress. This script only
# chooses the scenario's settings; bench/torch/run.sh (its BT_BULK block)
# and bench/torch/guest.sh (its BT_BULK schemes) run it, and
# bench/shared/report.py prints the table.
#
#   bench/shared/run.sh [-o OUTDIR]    (default OUTDIR: out/bench-shared)
#   BS_QUICK=1 bench/shared/run.sh     every scheme once: a plumbing check
#
# Settings (environment): BS_SCHEMES (default "ddp fifo prio prio-last
# ets-strict ets-quanta mercury-share fq"; "mercury", sch_mercury untagged
# first, also runs), BS_SHARE (10: sch_mercury's untagged_share and
# ets-quanta's split, in %), BS_MODELS (tiny), BS_TINY_SIZE / BS_TINY_BATCH,
# BS_ITERS, BS_REPEAT (3), BS_RATE (30mbit), BS_TRAIN_TIMEOUT (seconds of
# training beside the bulk before a starved job is stopped, counted from
# its first barrier: 60; 45 quick), BS_RUN_TIMEOUT (seconds any run may
# take, start-up included: 300), BS_DEADLINE (a date: no repetition starts
# that would end after it); any other BT_ setting of bench/torch/run.sh
# passes through.
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
export BT_BULK=1
export BT_SHARE=${BS_SHARE:-10}
export BT_SCHEMES=${BS_SCHEMES:-ddp fifo prio prio-last ets-strict ets-quanta mercury-share fq}
export BT_MODELS=${BS_MODELS:-tiny}
export BT_RATE=${BS_RATE:-30mbit}
if [ "${BS_QUICK:-0}" = 1 ]; then
	export BT_QUICK=1
	export BT_REPEAT=${BS_REPEAT:-1}
	export BT_ITERS=${BS_ITERS:-40}
	export BT_TINY_SIZE=${BS_TINY_SIZE:-32} BT_TINY_BATCH=${BS_TINY_BATCH:-8}
	export BT_BULK_TIMEOUT=${BS_TRAIN_TIMEOUT:-45}
else
	export BT_REPEAT=${BS_REPEAT:-3}
	export BT_ITERS=${BS_ITERS:-40}
	export BT_TINY_SIZE=${BS_TINY_SIZE:-32} BT_TINY_BATCH=${BS_TINY_BATCH:-8}
	export BT_BULK_TIMEOUT=${BS_TRAIN_TIMEOUT:-60}
fi
export BT_RUN_TIMEOUT=${BS_RUN_TIMEOUT:-300}
[ -n "${BS_DEADLINE:-}" ] && export BT_DEADLINE=$BS_DEADLINE
echo "bench-shared: schemes $BT_SCHEMES; untagged_share $BT_SHARE; $BT_MODELS" \
	"(${BT_TINY_SIZE} px, batch ${BT_TINY_BATCH}), $BT_ITERS iterations, $BT_REPEAT repetition(s)," \
	"link $BT_RATE, training stopped after ${BT_BULK_TIMEOUT}s beside the bulk"
exec "$top/bench/torch/run.sh" -o "$out"
