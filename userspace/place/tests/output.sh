#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# What mercury-place writes when its inputs, its outputs or gnuplot fail:
# nothing from a profile or a file name runs as a command, a missing or
# failing gnuplot is a one-line error with exit 1 and no PNG, a bad
# cluster file is refused at once, a failed -o write keeps the previous
# file, and options a command does not use are usage errors (exit 2).
# KTAP out; MP_BIN runs another build (an older one, to see what it fails).
set -u

here=$(cd "$(dirname "$0")" && pwd)
bin=${MP_BIN:-$here/../mercury-place}
data=${MP_TESTDATA:-$here/data}
profiles=${MP_PROFILES:-$here/../../../profiles}
cluster=$here/../clusters/h100x4.json
vit=$profiles/h200/vit_b_16.json
prefix=mp-output
. "$here/../../common/tests/output-lib.sh"

echo "TAP version 13"

# ---- 1. nothing from data becomes a gnuplot command ----------------------
# A profile is a file anyone may hand over: its model name must reach
# gnuplot as text only.
hostile_plots "$data/small_h200.json" --png "$bin" compare \
	-c "$data/two_1MBps.json"
# bench's plot carries the model name in its labels
mkdir -p "$tmp/prof/h200"
cp "$tmp/evil1.json" "$tmp/prof/h200/evil1.json"
cp "$tmp/evil3.json" "$tmp/prof/h200/evil3.json"
run 0 "$bin" bench --profiles "$tmp/prof" --out "$tmp/run/bench" \
	--synthetic 20 && no_pwned && [ -s "$tmp/run/bench/bench.png" ] &&
	[ "$(grep -c . "$tmp/run/bench/bench.dat")" -eq 13 ]
result $? "bench with hostile model names runs nothing; bench.dat keeps one line per case"

# gnuplot reads an output name "|cmd" as a command: it never gets ours
run 0 "$bin" compare -p "$data/small_h200.json" -c "$data/two_1MBps.json" \
	--png '|touch PWNED6' && no_pwned && [ -s "$tmp/run/|touch PWNED6" ]
result $? "compare --png '|cmd' writes a file of that name and runs nothing"

# ---- 2. gnuplot missing or failing ----------------------------------------
gnuplot_faults --png '^mercury ' "$bin" compare -p "$data/small_h200.json" \
	-c "$data/two_1MBps.json"

# ---- 3. cluster files ------------------------------------------------------
: >"$tmp/empty.json"
for c in /dev/zero "$tmp" "$tmp/empty.json" "$data/cluster_truncated.json" \
	 "$data/cluster_nan_latency.json" "$data/cluster_inf_bandwidth.json"; do
	start=$(date +%s)
	(cd "$tmp/run" && timeout 5 "$bin" -p "$data/small_h200.json" -c "$c") \
		>"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] && one_line "$c" && [ ! -s "$tmp/out" ] &&
		[ $(($(date +%s) - start)) -lt 5 ]
	result $? "--cluster $(basename "$c"): exit 1 within 5 s, one line naming it (exit $rc)"
done

# ---- 4. -o replaces the previous plan only when complete -------------------
run 0 "$bin" -p "$vit" -c "$cluster" -o plan.json
cp "$tmp/run/plan.json" "$tmp/good.json"
# a write that fails half way: a file size limit, its signal ignored
run 1 sh -c "trap '' XFSZ; ulimit -f 8; exec \"\$0\" \"\$@\"" \
	"$bin" -p "$vit" -c "$cluster" --levels 4 -o plan.json &&
	cmp -s "$tmp/run/plan.json" "$tmp/good.json" &&
	[ "$(ls -A "$tmp/run" | grep -c '^\.')" -eq 0 ]
result $? "-o: a failed write keeps the previous plan and leaves no temporary"

run 1 "$bin" -p "$vit" -c "$cluster" -o "$tmp/nodir/plan.json" &&
	one_line "nodir/plan.json"
result $? "-o into a missing directory: exit 1, one line"

# ---- 5. output options ----------------------------------------------------
run 1 "$bin" compare -p "$data/small_h200.json" -c "$data/two_1MBps.json" \
	--png "$tmp/run" && one_line "is a directory" &&
	! od -c "$tmp/out" | grep -q 'P   N   G'
result $? "compare --png DIR: exit 1, no PNG on stdout"

run 1 "$bin" compare -p "$data/small_h200.json" -c "$data/two_1MBps.json" \
	--png "$tmp/nodir/x.png" && one_line "nodir/x.png" &&
	! od -c "$tmp/out" | grep -q 'P   N   G'
result $? "compare --png into a missing directory: exit 1, no PNG on stdout"

run 2 "$bin" compare -p "$data/small_h200.json" -c "$data/two_1MBps.json" \
	-o x.json && one_line "--output" && [ ! -e "$tmp/run/x.json" ]
result $? "compare -o: a usage error"

run 2 "$bin" pipe -p "$vit" -c "$cluster" --png x.png && one_line "--png"
result $? "pipe --png: a usage error"

run 2 "$bin" pipedream -j --profiles "$profiles" &&
	python3 -c 'import json,sys; assert "error" in json.load(sys.stdin)' <"$tmp/out"
result $? "pipedream -j: a usage error, as JSON"

run 1 "$bin" pipedream --profiles "$tmp/nonexistent" && one_line nonexistent
result $? "pipedream --profiles /nonexistent: exit 1"

mkdir -p "$tmp/run/q\"x"
run 0 "$bin" -j -p "$vit" -c "$cluster" -o 'q"x/plan.json' &&
	python3 -c 'import json,sys; assert json.load(sys.stdin)["written"] == "q\"x/plan.json"' <"$tmp/out"
result $? "-j -o 'q\"x/plan.json': valid JSON naming the file"

# a latency of 1e308 s makes a step across devices infinite
printf '%s\n' '{"devices": [{"name": "a", "memory_bytes": 1e12}, {"name": "b", "memory_bytes": 1e12}], "network": {"bandwidth_Bps": 1e9, "latency_s": 1e308}}' \
	>"$tmp/slow.json"
run 1 "$bin" -p "$vit" -c "$tmp/slow.json" --algo even -o inf.json &&
	one_line "not a finite number" && [ ! -e "$tmp/run/inf.json" ]
result $? "a step time of Infinity: exit 1, no plan"
run 1 "$bin" -p "$vit" -c "$tmp/slow.json" --algo even &&
	! grep -q Infinity "$tmp/out"
result $? "the same plan to stdout: exit 1, no Infinity"
run 0 "$bin" compare -j -p "$vit" -c "$tmp/slow.json" &&
	python3 -c 'import json,sys; r = json.load(sys.stdin)["results"]; assert "error" in [x for x in r if x["algorithm"] == "even"][0]' <"$tmp/out"
result $? "compare -j with an infinite step time: valid JSON, that row an error"

# ---- 6. one meaning of a bare rate ----------------------------------------
run 2 "$bin" -p "$vit" -c "$cluster" --replicas 2 --bandwidth 1.25e9 &&
	one_line "needs a unit"
result $? "--bandwidth 1.25e9 (bytes/s here once, bit/s in tc): refused, the units named"
run 0 "$bin" -p "$vit" -c "$cluster" --replicas 2 --bandwidth 10gbit -o a.json &&
	run 0 "$bin" -p "$vit" -c "$cluster" --replicas 2 --bandwidth 1.25gbps -o b.json &&
	python3 -c 'import json,sys
a, b = (json.load(open(f))["data_parallel"]["bandwidth_Bps"] for f in sys.argv[1:])
assert a == b == 1.25e9, (a, b)' "$tmp/run/a.json" "$tmp/run/b.json"
result $? "--bandwidth 10gbit and 1.25gbps: the same 1.25e9 B/s"

# ---- 7. a long compare says how far it is ----------------------------------
# Past 10,000 nodes the baselines take seconds to minutes each (70,000:
# 77 s in all): a line on stderr before each, the table on stdout.
python3 -c 'import json, sys
n = 10001
json.dump({"model": "chain", "iteration_ms": {"fwd_ms": n * 0.05, "bwd_ms": n * 0.1},
  "modules": [{"module": "m%d" % i, "params": 64} for i in range(n)],
  "forward_calls": [{"call": i, "module": "m%d" % i, "start_ms": i * 0.05, "fwd_ms": 0.05, "out_bytes": 65536} for i in range(n)],
  "grad_ready": [{"param": "m%d.w" % i, "module": "m%d" % i, "numel": 64, "ready_ms": (n - i) * 0.1} for i in reversed(range(n))],
  "edges": [["m%d" % i, "m%d" % (i + 1)] for i in range(n - 1)]}, sys.stdout)' >"$tmp/chain.json"
run 0 "$bin" compare -p "$tmp/chain.json" -c "$cluster" &&
	[ "$(wc -l <"$tmp/err")" -eq 7 ] &&
	grep -q '^mercury-place: compare: even (7 of 7) on 10001 nodes' "$tmp/err" &&
	grep -q '^even ' "$tmp/out"
result $? "compare on 10,001 nodes: a progress line per algorithm on stderr, the table on stdout"

finish
