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
prefix=msim-output
. "$here/../../common/tests/output-lib.sh"

sweep="--sweep --sweep-range 1gbit:10gbit"
echo "TAP version 13"

hostile_plots "$tiny" --plot "$bin" $sweep

run 0 "$bin" --profile "$tiny" $sweep --plot '|touch PWNED6' &&
	no_pwned && is_png "$tmp/run/|touch PWNED6"
result $? "--plot '|cmd' writes a file of that name and runs nothing"

run 0 "$bin" --profile "$tiny" $sweep --scheme mercury --plot one.png &&
	is_png "$tmp/run/one.png"
result $? "--plot with one scheme (no speedups to draw)"

gnuplot_faults --plot '^10Gbit' "$bin" --profile "$tiny" $sweep

run 1 "$bin" --profile "$tiny" $sweep --plot "$tmp/run" &&
	one_line "is a directory"
result $? "--plot DIR: exit 1, one line"

run 0 "$bin" -j --profile "$tiny" --bandwidth 10000000000 &&
	python3 -c 'import json,sys; assert json.load(sys.stdin)["bandwidth_bps"] == 1e10' <"$tmp/out"
result $? "a bare --bandwidth is bit/s (tc's meaning)"

finish
