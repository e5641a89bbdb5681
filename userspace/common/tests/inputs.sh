#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# Every tool's file readers and option parsers against bad input (issue
# 30): mercury-place, mercury-sim, mercury-ps, mercuryctl (the paths that
# need no netlink: option words, plan files) and, where PyTorch is
# installed, python3 -m mercury.torch profile. Each file option gets a
# missing file, an empty one, truncated JSON, /dev/zero, a directory, NaN,
# Infinity, 1e400, 2^64 and negative sizes; each number option NaN,
# Infinity, 1e400, 2^64, -1 and nothing. Every case must:
#  - exit 1 (bad data) or 2 (usage), never 0 and never by a signal;
#  - print exactly one line on stderr, "TOOL: ..." naming the file or the
#    option;
#  - leave no output file behind where -o/--out was given;
#  - end within a bound (30 s; 120 s for the 1,000,000-node profile).
# Cases other tests already hold are not repeated here: --cluster with
# /dev/zero, a directory, empty, truncated, NaN latency and infinite
# bandwidth (userspace/place/tests/output.sh), libmercury's JSON and
# PipeDream parsers byte by byte (userspace/lib/fuzz).
# KTAP out. MT_TOP: another tree's tools (an older build, to see what it
# fails).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=${MT_TOP:-$(cd "$here/../../.." && pwd)}
place=$top/userspace/place/mercury-place
sim=$top/userspace/sim/mercury-sim
psb=$top/userspace/ps/mercury-ps
ctl=$top/userspace/ctl/mercuryctl
profile=$top/profiles/h200/resnet50.json
graph=$top/profiles/pipedream/alexnet.graph.txt
cluster=$top/userspace/place/clusters/h100x2.json
prefix=mt-inputs
. "$here/output-lib.sh"

echo "TAP version 13"

# refuse WANT TOOL NEEDLE CMD...: run CMD in $tmp/run under $bound
# seconds; it must exit WANT (1 or 2; 12: either), with one stderr line
# "TOOL: ..." that contains NEEDLE, and leave $tmp/run/out* absent.
bound=30
refuse() {
	want=$1 tool=$2 needle=$3
	shift 3
	rm -rf "$tmp/run/out"*
	(cd "$tmp/run" && timeout "$bound" "$@") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	case $rc in
	1 | 2) case $want in *$rc*) ;; *)
		echo "# exit $rc, expected $want: $*"; return 1 ;; esac ;;
	124) echo "# ran past ${bound} s: $*"; return 1 ;;
	*) echo "# exit $rc: $*"; return 1 ;;
	esac
	if [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
	   ! head -n 1 "$tmp/err" | grep -q "^$tool: .*$needle"; then
		echo "# stderr is not one line '$tool: ...$needle...':"
		sed 's/^/#   /' "$tmp/err" | head -5
		return 1
	fi
	if ls "$tmp/run" | grep -q '^out'; then
		echo "# left an output file: $(ls "$tmp/run")"
		return 1
	fi
}

# ---- bad files -------------------------------------------------------------
bad=$tmp/bad
mkdir -p "$bad/dir"
: >"$bad/empty.json"
head -c 3000 "$profile" >"$bad/truncated.json"
# variants of good files with one value broken: NaN and Infinity as
# json-c reads them, numbers past a double (1e400) and past 64 bits (2^64)
python3 - "$profile" "$graph" "$bad" <<'EOF'
import json, re, sys
prof, graph, out = sys.argv[1:]
SUB = {'"@NaN"': 'NaN', '"@Inf"': 'Infinity', '"@1e400"': '1e400',
       '"@2^64"': '18446744073709551616'}

def put(name, doc, path, value):
    d = json.loads(json.dumps(doc))
    o = d
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    s = json.dumps(d)
    for k, v in SUB.items():
        s = s.replace(k, v)
    open(f"{out}/{name}", "w").write(s)

p = json.load(open(prof))
put("nan_ready.json", p, ["grad_ready", 0, "ready_ms"], "@NaN")
put("inf_fwd.json", p, ["forward_calls", 0, "fwd_ms"], "@Inf")
put("huge_bwd.json", p, ["iteration_ms", "bwd_ms"], "@1e400")
put("u64_numel.json", p, ["grad_ready", 0, "numel"], "@2^64")
put("neg_numel.json", p, ["grad_ready", 0, "numel"], -4)

g = open(graph).read().split("\n")
def gput(name, key, value):
    lines = list(g)
    lines[1] = re.sub(key + r"=[-0-9.e]+", f"{key}={value}", lines[1])
    open(f"{out}/{name}", "w").write("\n".join(lines))
gput("nan_fwd.graph.txt", "forward_compute_time", "nan")
gput("inf_fwd.graph.txt", "forward_compute_time", "inf")
gput("huge_fwd.graph.txt", "forward_compute_time", "1e400")
gput("neg_param.graph.txt", "parameter_size", "-4.0")
gput("u64_param.graph.txt", "parameter_size", "18446744073709551616")
open(f"{out}/truncated.graph.txt", "w").write(open(graph).read()[:700])
EOF

profiles="/nonexistent/p.json $bad/empty.json $bad/truncated.json /dev/zero
	$bad/dir $bad/nan_ready.json $bad/inf_fwd.json $bad/huge_bwd.json
	$bad/u64_numel.json $bad/neg_numel.json $bad/nan_fwd.graph.txt
	$bad/inf_fwd.graph.txt $bad/huge_fwd.graph.txt $bad/neg_param.graph.txt
	$bad/u64_param.graph.txt $bad/truncated.graph.txt"

# ---- 1. --profile: every tool, through libmercury's one reader --------------
for f in $profiles; do
	b=$(basename "$f")
	refuse 1 mercury-place "$b" "$place" -p "$f" -c "$cluster" -o out.json
	result $? "mercury-place --profile $b -o: exit 1, one line, no plan"
	refuse 1 mercury-place "$b" "$place" compare -p "$f" -c "$cluster"
	result $? "mercury-place compare --profile $b: exit 1, one line"
	refuse 1 mercury-place "$b" "$place" pipe -p "$f" -c "$cluster" -o out.json
	result $? "mercury-place pipe --profile $b -o: exit 1, one line, no plan"
	refuse 1 mercury-sim "$b" "$sim" --profile "$f"
	result $? "mercury-sim --profile $b: exit 1, one line"
	refuse 1 mercury-ps "$b" "$psb" worker --print-priorities --profile "$f"
	result $? "mercury-ps worker --profile $b: exit 1, one line"
	refuse 1 mercury-ps "$b" "$psb" profile --profile "$f" --bytes-scale 0.5 \
		--out out.json
	result $? "mercury-ps profile --profile $b --out: exit 1, one line, no file"
done

# ---- 2. plan files: --plan and mercuryctl check ------------------------------
"$place" -p "$profile" -c "$cluster" --levels 8 -o "$tmp/plan.json" >/dev/null
python3 - "$tmp/plan.json" "$bad" <<'EOF'
import json, sys
plan, out = sys.argv[1:]
SUB = {'"@NaN"': 'NaN', '"@Inf"': 'Infinity', '"@1e400"': '1e400',
       '"@2^64"': '18446744073709551616'}
p = json.load(open(plan))
for name, where, key, value in (
        ("plan_tag_nan.json", "entry", "tag", "@NaN"),
        ("plan_tag_huge.json", "entry", "tag", "@1e400"),
        ("plan_tag_u64.json", "entry", "tag", "@2^64"),
        ("plan_tag_neg.json", "entry", "tag", -1),
        ("plan_bytes_u64.json", "entry", "bytes", "@2^64"),
        ("plan_bytes_neg.json", "entry", "bytes", -1),
        ("plan_levels_inf.json", "top", "levels", "@Inf"),
        ("plan_levels_neg.json", "top", "levels", -8),
        ("plan_shift_u64.json", "top", "shift", "@2^64")):
    d = json.loads(json.dumps(p))
    (d["priorities"][0] if where == "entry" else d)[key] = value
    s = json.dumps(d)
    for k, v in SUB.items():
        s = s.replace(k, v)
    open(f"{out}/{name}", "w").write(s)
EOF
plans="/nonexistent/plan.json $bad/empty.json $bad/truncated.json /dev/zero
	$bad/dir $(ls "$bad"/plan_*.json)"
for f in $plans; do
	b=$(basename "$f")
	refuse 1 mercury-sim "$b" "$sim" --profile "$profile" --plan "$f"
	result $? "mercury-sim --plan $b: exit 1, one line"
	refuse 1 mercury-ps "$b" "$psb" worker --print-priorities \
		--profile "$profile" --plan "$f"
	result $? "mercury-ps --plan $b: exit 1, one line"
	# the plan is read before any netlink: no module needed
	refuse 1 mercuryctl "$b" "$ctl" check lo plan "$f"
	result $? "mercuryctl check lo plan $b: exit 1, one line"
done

# ---- 3. --cluster: what output.sh does not hold -----------------------------
python3 - "$cluster" "$bad" <<'EOF'
import json, sys
cluster, out = sys.argv[1:]
SUB = {'"@NaN"': 'NaN', '"@Inf"': 'Infinity', '"@1e400"': '1e400'}
c = json.load(open(cluster))
for name, sect, key, value in (
        ("cl_mem_nan.json", "dev", "memory_bytes", "@NaN"),
        ("cl_mem_neg.json", "dev", "memory_bytes", -1),
        ("cl_mem_huge.json", "dev", "memory_bytes", "@1e400"),
        ("cl_speed_inf.json", "dev", "speed", "@Inf"),
        ("cl_speed_zero.json", "dev", "speed", 0),
        ("cl_bw_neg.json", "net", "bandwidth_Bps", -1),
        ("cl_lat_neg.json", "net", "latency_s", -1)):
    d = json.loads(json.dumps(c))
    (d["devices"][0] if sect == "dev" else d["network"])[key] = value
    s = json.dumps(d)
    for k, v in SUB.items():
        s = s.replace(k, v)
    open(f"{out}/{name}", "w").write(s)
EOF
for f in /nonexistent/c.json "$bad"/cl_*.json; do
	b=$(basename "$f")
	refuse 1 mercury-place "$b" "$place" -p "$profile" -c "$f" -o out.json
	result $? "mercury-place --cluster $b -o: exit 1, one line, no plan"
done

# ---- 4. directories of profiles, output paths -------------------------------
mkdir -p "$tmp/emptydir" "$tmp/baddir/h200"
cp "$bad/truncated.json" "$tmp/baddir/h200/"
refuse 1 mercury-place "p.json" "$place" pipedream --profiles "$profile/p.json"
result $? "mercury-place pipedream --profiles FILE/p.json: exit 1, one line"
refuse 1 mercury-place "emptydir" "$place" bench --profiles "$tmp/emptydir" \
	--out out
result $? "mercury-place bench --profiles EMPTY: exit 1, one line, no --out"
refuse 1 mercury-place "baddir" "$place" bench --profiles "$tmp/baddir" \
	--out out
result $? "mercury-place bench where no profile loads: exit 1, one line, no --out"
mkdir -p "$tmp/run/dir.json"
refuse 1 mercury-place "dir.json" "$place" -p "$profile" -c "$cluster" \
	-o dir.json
result $? "mercury-place -o DIR: exit 1, one line"
refuse 1 mercury-ps "dir.json" "$psb" profile --profile "$profile" \
	--bytes-scale 0.5 --out dir.json
result $? "mercury-ps profile --out DIR: exit 1, one line"
refuse 1 mercury-ps "nodir" "$psb" profile --profile "$profile" \
	--bytes-scale 0.5 --out nodir/out.json
result $? "mercury-ps profile --out MISSING/x: exit 1, one line"

# ---- 5. number options: NaN, Infinity, past a double, past 64 bits ----------
values="NaN Infinity 1e400 18446744073709551616 -1"
for v in $values ""; do
	for o in levels replicas bandwidth mask shift; do
		refuse 2 mercury-place "$o" "$place" -p "$profile" -c "$cluster" \
			--replicas 2 --"$o" "$v" -o out.json
		result $? "mercury-place --$o '$v': exit 2, one line, no plan"
	done
	for o in workers servers bandwidth latency partition credit \
		 msg-overhead frame-cost frame-header slice chunk mtu header \
		 iterations time-scale sweep-range; do
		refuse 2 mercury-sim "$o" "$sim" --profile "$profile" --"$o" "$v"
		result $? "mercury-sim --$o '$v': exit 2, one line"
	done
	for o in iterations time-scale bytes-scale chunk partition credit \
		 channels levels inflight sndbuf timeout worker-id workers; do
		refuse 2 mercury-ps "$o" "$psb" worker --print-priorities \
			--profile "$profile" --"$o" "$v"
		result $? "mercury-ps --$o '$v': exit 2, one line"
	done
	# option words are parsed before netlink is opened
	for o in levels quantum memory_limit limit flows shift mask \
		 untagged_share; do
		refuse 2 mercuryctl "$o" "$ctl" add lo "$o" "$v"
		result $? "mercuryctl add lo $o '$v': exit 2, one line"
	done
done

# ---- 6. a 1,000,000-node profile: a bound, not a hang ------------------------
# A million modules in the h200 format are 209 MB, past the readers'
# 64 MiB bound: refused at once, by the one reader. The largest model under
# the bound (150,000 tensors, more than the wire's 65,535 tags) is planned,
# simulated and laid out whole.
python3 - "$tmp" <<'EOF'
import sys
out = sys.argv[1]

def profile(path, n):
    with open(path, "w") as f:
        f.write('{"model": "m%d", "iteration_ms": {"fwd_ms": %g, "bwd_ms": %g},\n"modules": [' % (n, n * 1e-3, n * 2e-3))
        f.write(", ".join('{"module": "m%d", "params": 16}' % i for i in range(n)))
        f.write('],\n"forward_calls": [')
        f.write(", ".join('{"call": %d, "module": "m%d", "start_ms": %g, "fwd_ms": 0.001, "out_bytes": 64}' % (i, i, i * 1e-3) for i in range(n)))
        f.write('],\n"grad_ready": [')
        f.write(", ".join('{"param": "m%d.w", "module": "m%d", "numel": 16, "ready_ms": %g}' % (i, i, (n - i) * 2e-3) for i in range(n - 1, -1, -1)))
        f.write('],\n"edges": null}\n')

profile(out + "/million.json", 1000000)
profile(out + "/large.json", 150000)
EOF
bound=120
m=$tmp/million.json
refuse 1 mercury-place "64 MiB" "$place" -p "$m" -c "$cluster" -o out.json
result $? "mercury-place: a 1,000,000-node profile: exit 1 within 120 s, the bound named"
refuse 1 mercury-sim "64 MiB" "$sim" --profile "$m"
result $? "mercury-sim: a 1,000,000-node profile: exit 1 within 120 s, the bound named"
refuse 1 mercury-ps "64 MiB" "$psb" worker --print-priorities --profile "$m"
result $? "mercury-ps: a 1,000,000-node profile: exit 1 within 120 s, the bound named"

# works(TOOL CMD...): exit 0 within the bound, stderr empty
works() {
	start=$(date +%s)
	(cd "$tmp/run" && timeout "$bound" "$@") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	echo "# $(basename "$1"): exit $rc in $(($(date +%s) - start)) s"
	[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] ||
		{ sed 's/^/# stderr: /' "$tmp/err" | head -3; return 1; }
}
l=$tmp/large.json
works "$place" -p "$l" -c "$cluster" -o out.json &&
	python3 -c 'import json,sys; d = json.load(open(sys.argv[1]))
assert len(d["priorities"]) == 150000 and d["levels"] == 65535' "$tmp/run/out.json"
result $? "mercury-place: 150,000 tensors planned within 120 s in 65,535 tags"
works "$sim" --profile "$l" --scheme mercury
result $? "mercury-sim: 150,000 tensors simulated within 120 s"
works "$psb" worker --print-priorities --profile "$l" &&
	[ "$(wc -l <"$tmp/out")" -eq 150000 ]
result $? "mercury-ps: 150,000 tensors laid out within 120 s"
bound=30

# ---- 7. python3 -m mercury.torch profile -------------------------------------
# It needs PyTorch to start at all; without it there is nothing to feed.
# PyTorch is Debian's, for Debian's interpreter (as userspace/python's
# tests run it), whatever python3 comes first on PATH.
tpy=${TORCH_PYTHON:-/usr/bin/python3}
py="env PYTHONPATH=$top/userspace/python $tpy -m mercury.torch"
if $tpy -c 'import torch' 2>/dev/null; then
	for args in "--model /nonexistent/m.py:Net" "--model torchvision.models:resnet18 --input NaN" \
		    "--model torchvision.models:resnet18 --classes 1e400" \
		    "--model torchvision.models:resnet18 --iters -1"; do
		# argparse prints its usage line before the error: the last
		# line names the problem, no traceback
		rm -f "$tmp/run/out.json"
		(cd "$tmp/run" && timeout 120 $py profile $args -o out.json) \
			>"$tmp/out" 2>"$tmp/err"
		rc=$?
		[ "$rc" -eq 1 ] || [ "$rc" -eq 2 ]
		ok=$?
		! grep -q Traceback "$tmp/err" && [ ! -e "$tmp/run/out.json" ] &&
			[ $ok -eq 0 ]
		result $? "mercury.torch profile $args: exit 1 or 2, no traceback, no file"
	done
else
	n=$((n + 1))
	echo "ok $n mercury.torch profile # SKIP PyTorch is not installed"
fi

finish
