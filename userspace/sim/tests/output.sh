#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# --sweep --plot when the data or gnuplot misbehave: a hostile model name
# or plot file name runs nothing, a missing or failing gnuplot is a
# one-line error with exit 1 after the table, and no PNG is left half
# written. KTAP out; run from userspace/sim/tests; MSIM_BIN runs another
# build (an older one, to see what it fails).
set -u

here=$(cd "$(dirname "$0")" && pwd)
bin=${MSIM_BIN:-$here/../mercury-sim}
tiny=$here/fixtures/tiny2.json
n=0
failed=0

tmp=$(mktemp -d /tmp/msim-output-XXXXXX)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

result() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		failed=$((failed + 1))
		[ -s "$tmp/err" ] && sed 's/^/# stderr: /' "$tmp/err" | head -5
	fi
}

# run EXPECTED_RC CMD...: in $tmp/run, outputs in $tmp/out and $tmp/err
run() {
	want=$1
	shift
	(cd "$tmp/run" && timeout 20 "$@") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ] || { echo "# exit $rc, expected $want: $*"; return 1; }
}

one_line() {
	[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$1" "$tmp/err" ||
		{ echo "# stderr lacks one line with '$1':"; sed 's/^/#   /' "$tmp/err"; return 1; }
}

no_pwned() {
	! ls "$tmp/run" "$tmp" | grep -q '^PWNED'
}

is_png() {
	head -c 8 "$1" | od -c | grep -q 'P   N   G'
}

sweep="--sweep --sweep-range 1gbit:10gbit"
echo "TAP version 13"
mkdir -p "$tmp/run" "$tmp/bin" "$tmp/nognuplot"

i=0
for model in "x'; system(\"touch PWNED1\") #" \
	     'x`touch PWNED2`' \
	     "x
set output '|touch PWNED3'
EOD
system(\"touch PWNED4\")" \
	     'x" system("touch PWNED5") "'; do
	i=$((i + 1))
	MODEL=$model python3 -c 'import json, os, sys
p = json.load(open(sys.argv[1]))
p["model"] = os.environ["MODEL"]
json.dump(p, open(sys.argv[2], "w"))' "$tiny" "$tmp/evil$i.json"
	rm -f "$tmp/run/p.png"
	run 0 "$bin" --profile "$tmp/evil$i.json" $sweep --plot p.png &&
		no_pwned && is_png "$tmp/run/p.png"
	result $? "--plot with a hostile model name ($i) runs nothing, writes the PNG"
done

run 0 "$bin" --profile "$tiny" $sweep --plot '|touch PWNED6' &&
	no_pwned && is_png "$tmp/run/|touch PWNED6"
result $? "--plot '|cmd' writes a file of that name and runs nothing"

run 0 "$bin" --profile "$tiny" $sweep --scheme mercury --plot one.png &&
	is_png "$tmp/run/one.png"
result $? "--plot with one scheme (no speedups to draw)"

run 1 env PATH="$tmp/nognuplot" "$bin" --profile "$tiny" $sweep \
	--plot p2.png && one_line "mercury-sim: --plot: gnuplot not found" &&
	grep -q '^10Gbit' "$tmp/out" && [ ! -e "$tmp/run/p2.png" ]
result $? "--plot without gnuplot: exit 1, one line, the table kept, no PNG"

printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/gnuplot"
chmod +x "$tmp/bin/gnuplot"
echo previous >"$tmp/run/p3.png"
run 1 env PATH="$tmp/bin:$PATH" "$bin" --profile "$tiny" $sweep \
	--plot p3.png && one_line "gnuplot failed" &&
	grep -q '^10Gbit' "$tmp/out" &&
	[ "$(cat "$tmp/run/p3.png")" = previous ] &&
	[ "$(ls -A "$tmp/run" | grep -c '^\.')" -eq 0 ]
result $? "a gnuplot that fails: exit 1, the previous PNG kept, no temporary left"

printf '#!/bin/sh\nexec 0<&-\necho junk\nexit 0\n' >"$tmp/bin/gnuplot"
run 1 env PATH="$tmp/bin:$PATH" "$bin" --profile "$tiny" $sweep \
	--plot p4.png && one_line "no PNG" && [ ! -e "$tmp/run/p4.png" ]
result $? "a gnuplot that closes stdin and writes no PNG: exit 1, no file"

run 1 env PATH="$tmp/bin:$PATH" "$bin" -j --profile "$tiny" $sweep \
	--plot p5.png &&
	python3 -c 'import json,sys; d=json.load(sys.stdin); assert list(d) == ["error"]' <"$tmp/out"
result $? "-j --plot with gnuplot failing: one JSON error object, exit 1"

run 1 "$bin" --profile "$tiny" $sweep --plot "$tmp/run" &&
	one_line "is a directory"
result $? "--plot DIR: exit 1, one line"

run 0 "$bin" -j --profile "$tiny" --bandwidth 10000000000 &&
	python3 -c 'import json,sys; assert json.load(sys.stdin)["bandwidth_bps"] == 1e10' <"$tmp/out"
result $? "a bare --bandwidth is bit/s (tc's meaning)"

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
