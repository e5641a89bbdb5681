# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# Shared by the tools' output.sh tests (userspace/place, userspace/sim):
# a scratch directory, KTAP results, a bounded run, and the gnuplot
# failures every tool that draws must survive. Source it after setting
# prefix (the scratch directory's name).

n=0
failed=0
tmp=$(mktemp -d "/tmp/$prefix-XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$tmp/run" "$tmp/bin" "$tmp/nognuplot"

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

# run EXPECTED_RC CMD...: in $tmp/run, stdout in $tmp/out, stderr in
# $tmp/err, under a 20 s bound; true if it exited EXPECTED_RC.
run() {
	want=$1
	shift
	(cd "$tmp/run" && timeout 20 "$@") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ] || { echo "# exit $rc, expected $want: $*"; return 1; }
}

# one line on stderr, naming what it must
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

# hostile_plots SRC OPT CMD...: four copies of the profile SRC whose
# model names try to make gnuplot run a command (a quote, a backtick, a
# line that ends the data, an output pipe); CMD --profile COPY OPT p.png must
# run nothing and write the PNG. They stay as $tmp/evil1..4.json.
hostile_plots() {
	src=$1
	opt=$2
	shift 2
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
json.dump(p, open(sys.argv[2], "w"))' "$src" "$tmp/evil$i.json"
		rm -f "$tmp/run/p.png"
		run 0 "$@" --profile "$tmp/evil$i.json" "$opt" p.png && no_pwned &&
			is_png "$tmp/run/p.png"
		result $? "$opt with a hostile model name ($i) runs nothing, writes the PNG"
	done
}

# gnuplot_faults OPT TABLE_RE CMD...: CMD OPT FILE draws FILE. Without
# gnuplot, with one that fails and with one that closes its input and
# writes junk, it exits 1 with one line, keeps its table on stdout
# (TABLE_RE), and leaves no PNG and no temporary; -j gives one error
# object.
gnuplot_faults() {
	opt=$1
	table=$2
	shift 2
	run 1 env PATH="$tmp/nognuplot" "$@" "$opt" p2.png &&
		one_line "$opt: gnuplot not found" &&
		grep -q "$table" "$tmp/out" && [ ! -e "$tmp/run/p2.png" ]
	result $? "$opt without gnuplot: exit 1, one line, the table kept, no PNG"

	printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/gnuplot"
	chmod +x "$tmp/bin/gnuplot"
	echo previous >"$tmp/run/p3.png"
	run 1 env PATH="$tmp/bin:$PATH" "$@" "$opt" p3.png &&
		one_line "gnuplot failed" && grep -q "$table" "$tmp/out" &&
		[ "$(cat "$tmp/run/p3.png")" = previous ] &&
		[ "$(ls -A "$tmp/run" | grep -c '^\.')" -eq 0 ]
	result $? "a gnuplot that fails: exit 1, the previous PNG kept, no temporary left"

	printf '#!/bin/sh\nexec 0<&-\necho junk\nexit 0\n' >"$tmp/bin/gnuplot"
	run 1 env PATH="$tmp/bin:$PATH" "$@" "$opt" p4.png &&
		one_line "no PNG" && [ ! -e "$tmp/run/p4.png" ]
	result $? "a gnuplot that closes stdin and writes no PNG: exit 1, no file"

	run 1 env PATH="$tmp/bin:$PATH" "$@" -j "$opt" p5.png &&
		python3 -c 'import json,sys; d=json.load(sys.stdin); assert list(d) == ["error"]' <"$tmp/out"
	result $? "-j $opt with gnuplot failing: one JSON error object, exit 1"
}

finish() {
	echo "1..$n"
	echo "# $((n - failed)) passed, $failed failed"
	[ "$failed" -eq 0 ]
}
