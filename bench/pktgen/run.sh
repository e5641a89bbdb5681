#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host half of the qdisc cost benchmark: build, boot the VM once for the
# pktgen measurements (bench/pktgen/guest.sh), then render the tables, the
# plots and Documentation/results/performance.md from the results.
#
#   bench/pktgen/run.sh [-o OUTDIR] [-n] [-q]
#     -o OUTDIR  results (default out/perf)
#     -n         no VM: re-render from the results already in OUTDIR
#     -q         quick guest run (a few configurations, 1 repetition);
#                the document goes to OUTDIR, not Documentation/results/
#
# Environment passed to the guest: PERF_PKTS, PERF_REPS, PERF_PROFILE.
# The userspace microbenchmark (bench/core) writes OUTDIR/core.json first;
# `make perf` at the top runs both.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/out/perf
novm=""
quick=""
while getopts "o:nq" opt; do
	case $opt in
	o) out=$OPTARG ;;
	n) novm=1 ;;
	q) quick=1 ;;
	*) echo "usage: $0 [-o OUTDIR] [-n] [-q]" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$top"

if [ -z "$novm" ]; then
	make -s module tc-plugin
	{
		echo "PERF_PKTS=${PERF_PKTS:-100000}"
		echo "PERF_REPS=${PERF_REPS:-5}"
		echo "PERF_PROFILE=${PERF_PROFILE:-1}"
		[ -n "$quick" ] && echo "PERF_QUICK=1" && echo "PERF_REPS=1"
	} > "$out/perf.env"
	rm -f "$out/pktgen.json"
	rc=0
	# The TSC, not the emulated HPET, as the guest's clock: pktgen reads
	# it for every packet (see Documentation/results/performance.md).
	VM_APPEND="clocksource=tsc tsc=reliable" \
		scripts/vm-run.sh -o "$out" bench/pktgen/guest.sh || rc=$?
	[ -s "$out/pktgen.json" ] || { echo "perf: the guest wrote no results (see $out/guest.log)" >&2; exit 1; }
	[ $rc = 0 ] || echo "perf: some guest measurements failed (see $out/guest.log); rendering the rest" >&2
fi

[ -s "$out/core.json" ] || { echo "perf: no $out/core.json: run 'make -C bench/core run OUT=$out' first" >&2; exit 1; }
# A quick run is no result to publish: its document stays in OUTDIR.
doc=(--doc Documentation/results/performance.md --images Documentation/images)
[ -n "$quick" ] && doc=(--doc "$out/performance.md")
python3 bench/pktgen/report.py --out "$out" "${doc[@]}"
