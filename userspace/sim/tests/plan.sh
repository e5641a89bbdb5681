#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# --plan: mercury-sim, mercury-ps and the tagger (libmercury's lookup)
# give every tensor of every shipped h200 profile the same priority from
# the same plan; without a plan the simulator's gates order tensors as
# libmercury's default plan does; a hybrid plan from mercury-place runs
# through the simulator. TAP on stdout. Run from userspace/sim/tests.
set -u
TOP=../../..
SIM=../mercury-sim
PS=../../ps/mercury-ps
PLACE=../../place/mercury-place
TOOL=./plan_tool
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0
fails=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@" >"$T/out" 2>&1; then ok "$d"; else not_ok "$d"; sed 's/^/# /' "$T/out"; fi
}

for x in "$SIM" "$PS" "$PLACE" "$TOOL"; do
	[ -x "$x" ] || { echo "Bail out! $x is not built"; exit 1; }
done
for x in python3 paste awk; do
	command -v "$x" >/dev/null || { echo "Bail out! $x is missing"; exit 1; }
done

# same_prio FILE...: the second column agrees line by line (and names too).
same_prio() {
	first=$1; shift
	for f in "$@"; do
		paste "$first" "$f" | awk -F'\t' -v nf="$(awk -F'\t' '{print NF; exit}' "$first")" '
			{ if ($1 != $(nf + 1) || $2 != $(nf + 2)) { print "differ: " $0; bad = 1 } }
			END { if (NR == 0) { print "no tensors"; bad = 1 } exit bad }' || return 1
	done
}

# refines ORDER_COL KEY_COL FILE: sorted by KEY_COL (the plan's tag), the
# values of ORDER_COL never go down: a smaller tag is never sent later.
refines() {
	sort -t "$(printf '\t')" -k"$2","$2"n -k"$1","$1"n "$3" | awk -F'\t' -v c="$1" -v k="$2" '
		NR > 1 && $c < prev { print "tag " $k " (" $1 ") ordered before tag " ptag " (" pname ")"; bad = 1 }
		{ prev = $c; ptag = $k; pname = $1 }
		END { exit bad }'
}

for prof in "$TOP"/profiles/h200/*.json; do
	m=$(basename "$prof" .json)
	plan=$T/$m.plan.json
	if ! $TOOL default "$prof" "$plan" 2>"$T/err"; then
		not_ok "$m: libmercury default plan"; sed 's/^/# /' "$T/err"; continue
	fi
	$SIM --profile "$prof" --plan "$plan" --print-priorities >"$T/sim" 2>"$T/err" ||
		{ not_ok "$m: mercury-sim --plan --print-priorities"; sed 's/^/# /' "$T/err"; continue; }
	$PS worker --profile "$prof" --plan "$plan" --print-priorities >"$T/ps" 2>"$T/err" ||
		{ not_ok "$m: mercury-ps --plan --print-priorities"; sed 's/^/# /' "$T/err"; continue; }
	cut -f1 "$T/sim" | $TOOL lookup "$plan" >"$T/tag" 2>"$T/err" ||
		{ not_ok "$m: libmercury lookup"; sed 's/^/# /' "$T/err"; continue; }
	check "$m: sim, ps and tagger priorities agree ($(wc -l <"$T/tag") tensors)" \
		same_prio "$T/tag" "$T/sim" "$T/ps"
	# ps columns: name prio rank level band; the sender's rank follows the tag
	check "$m: mercury-ps sends in the plan's order" refines 3 2 "$T/ps"

	# Without a plan: ps ranks are libmercury's default tags; the
	# simulator's gates never order a tensor against the default plan.
	$SIM --profile "$prof" --print-priorities >"$T/sim0"
	$PS worker --profile "$prof" --print-priorities >"$T/ps0"
	check "$m: mercury-ps without --plan = libmercury's default plan" \
		same_prio "$T/tag" "$T/ps0"
	paste "$T/tag" "$T/sim0" | cut -f1,2,4 >"$T/gate"
	check "$m: mercury-sim's gates order tensors as the default plan" \
		refines 3 2 "$T/gate"

	# Squeezed to 8 tags: ties, the wire tag is the plan's.
	$TOOL default "$prof" "$plan.8" 8
	$SIM --profile "$prof" --plan "$plan.8" --print-priorities >"$T/sim8"
	$PS worker --profile "$prof" --plan "$plan.8" --print-priorities >"$T/ps8"
	cut -f1 "$T/sim" | $TOOL lookup "$plan.8" >"$T/tag8"
	cut -f1,4 "$T/ps8" >"$T/ps8level"
	check "$m: 8-tag plan: sim, ps, ps wire tag and tagger agree" \
		same_prio "$T/tag8" "$T/sim8" "$T/ps8" "$T/ps8level"

	# One tag rule (libmercury's mercury_plan_wire_tag()): mercury-ps,
	# libmercury and mercury.torch put the same tag on every tensor, at
	# every --levels, for the default plan, a plan with gaps between its
	# tags (squeezed by rank, not by value) and no plan at all.
	python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for e in d["priorities"]:
    e["tag"] *= 3
d["levels"] *= 3
json.dump(d, open(sys.argv[2], "w"))' "$plan" "$T/gaps.json"
	cut -f1 "$T/sim" >"$T/names"
	pyargs=""
	for lv in 1 3 8 64 1000; do
		for kind in default gaps none; do
			case $kind in
			default) pf=$plan ;;
			gaps) pf=$T/gaps.json ;;
			none) pf=$prof ;;
			esac
			if [ $kind = none ]; then
				$PS worker --profile "$prof" --levels $lv --print-priorities
			else
				$PS worker --profile "$prof" --plan "$pf" --levels $lv --print-priorities
			fi | cut -f1,4 >"$T/ps.$kind.$lv"
			$TOOL lookup "$([ $kind = none ] && echo "$plan" || echo "$pf")" $lv \
				<"$T/names" >"$T/lib.$kind.$lv" 2>&1
			pyargs="$pyargs $pf $lv $T/py.$kind.$lv"
		done
	done
	# shellcheck disable=SC2086
	python3 ./wire_tags.py "$T/names" $pyargs >"$T/pyerr" 2>&1 ||
		sed 's/^/# python: /' "$T/pyerr" | tail -n 5
	check "$m: one tag rule: ps, libmercury and mercury.torch agree (default plan, plan with gaps, no plan; levels 1 3 8 64 1000)" \
		sh -c 'for lv in 1 3 8 64 1000; do for k in default gaps none; do
			paste "$1/lib.$k.$lv" "$1/ps.$k.$lv" "$1/py.$k.$lv" | awk -F"\t" -v k=$k -v lv=$lv "
				\$1 != \$3 || \$1 != \$5 || \$2 != \$4 || \$2 != \$6 { if (bad++ < 3) print \"differ (\" k \", \" lv \" levels): lib/ps/python: \" \$0 }
				END { if (NR == 0) { print \"no tensors\"; bad = 1 } if (bad > 3) print bad \" tensors differ\"; exit bad > 0 }" || exit 1
		done; done' sh "$T"
done

prof=$TOP/profiles/h200/resnet50.json
plan=$T/resnet50.plan.json

# A tensor the plan does not name is an error naming it.
python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
d["priorities"] = [e for e in d["priorities"] if e["tensor"] != "layer3.1.conv2.weight"]
json.dump(d, open(sys.argv[2], "w"))' "$plan" "$T/missing.json"
for tool in "$SIM" "$PS worker"; do
	if $tool --profile "$prof" --plan "$T/missing.json" --print-priorities >/dev/null 2>"$T/err"; then
		not_ok "$tool: plan without a tensor is refused"
	elif grep -q 'layer3.1.conv2.weight' "$T/err"; then
		ok "$tool: plan without a tensor is refused, naming it"
	else
		not_ok "$tool: plan without a tensor: error names it"; sed 's/^/# /' "$T/err"
	fi
done
if $SIM --profile "$prof" --plan "$T/nonexistent.json" >/dev/null 2>"$T/err"; then
	not_ok "mercury-sim: unreadable plan is refused"
else
	ok "mercury-sim: unreadable plan is refused ($(cat "$T/err"))"
fi

# The plan drives the simulation: the default plan's order beats the same
# tags reversed (the last layer first), measured side by side.
python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
top = max(e["tag"] for e in d["priorities"])
for e in d["priorities"]:
    e["tag"] = top + 1 - e["tag"]
json.dump(d, open(sys.argv[2], "w"))' "$plan" "$T/reversed.json"
$PS worker --profile "$prof" --plan "$T/reversed.json" --print-priorities >"$T/psr"
check "reversed plan: mercury-ps sends the last layer first" refines 3 2 "$T/psr"
check "reversed plan: mercury-ps's first tensor is fc.weight (default tag 161)" \
	sh -c "awk -F'\t' '\$3 == 1 { print \$1 }' '$T/psr' | grep -qx fc.weight"
it() { $SIM --profile "$prof" --scheme mercury --bandwidth balanced -j "$@" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["iteration_ms"])'; }
fwd=$(it --plan "$plan"); rev=$(it --plan "$T/reversed.json"); none=$(it)
echo "# resnet50 mercury, balanced: no plan $none ms, default plan $fwd ms, reversed plan $rev ms"
check "simulated iteration: reversed plan slower than default plan" \
	python3 -c "import sys; sys.exit(not $rev > $fwd)"
$SIM --profile "$prof" --plan "$plan" -j >"$T/json"
check "JSON output records the plan" python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert d["plan"] == sys.argv[2] and d["plan_max_tag"] == 161, d' "$T/json" "$plan"

# Hybrid plan (data_parallel section) from mercury-place feeds the simulator.
hyb=$T/hybrid.json
if $PLACE --profile "$prof" --cluster ../../place/clusters/h100x4.json \
	--replicas 4 -o "$hyb" >/dev/null 2>"$T/err"; then
	check "hybrid plan: has a data_parallel section" python3 -c 'import json,sys
assert "data_parallel" in json.load(open(sys.argv[1]))' "$hyb"
	$SIM --profile "$prof" --plan "$hyb" --print-priorities >"$T/simh"
	cut -f1 "$T/simh" | $TOOL lookup "$hyb" >"$T/tagh"
	check "hybrid plan: sim priorities = tagger's" same_prio "$T/tagh" "$T/simh"
	check "hybrid plan: mercury-sim --plan simulates every scheme" \
		$SIM --profile "$prof" --plan "$hyb" --scheme all -j
else
	not_ok "mercury-place --replicas 4 -o"; sed 's/^/# /' "$T/err"
fi

echo "1..$n"
echo "# $((n - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
