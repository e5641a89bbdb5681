#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# make -C userspace/sim bench: every shipped h200 profile on 8 workers and
# 8 servers at its balanced bandwidth (pushing every gradient once takes
# as long as forward+backward), then the full-size tables (tables.py: 8
# and 16 workers, 10..400 Gbit/s), the share of the ideal gain once more
# with every wire tax off, and a 1..500 Gbit/s sweep with plots in out/.
set -eu
cd "$(dirname "$0")"
PROFILES=${PROFILES:-../../profiles/h200}
MODELS=${MODELS:-$(cd "$PROFILES" && ls *.json | sed 's/\.json$//' | tr '\n' ' ')}
SIM=./mercury-sim
OUT=out
mkdir -p "$OUT"
[ -d "$PROFILES" ] || { echo "bench: no profiles at $PROFILES" >&2; exit 1; }

echo "== mercury-sim --workers 8 --servers 8 --bandwidth balanced (every scheme)"
for m in $MODELS; do
	$SIM --profile "$PROFILES/$m.json" --workers 8 --servers 8 --bandwidth balanced -j \
		>"$OUT/$m.balanced.json"
done
python3 - "$OUT" $MODELS <<'PY'
import json, sys
out, models = sys.argv[1], sys.argv[2:]
print("%-13s %6s %8s %8s %8s %8s %8s %8s  %6s %6s %6s %7s" % (
    "model", "Gbit/s", "vanilla", "fifo-s", "prio", "bytesch", "mercury", "ideal",
    "xvan", "xfifoS", "xbytes", "/ideal"))
for m in models:
    o = json.load(open("%s/%s.balanced.json" % (out, m)))
    t = {r["scheme"]: r["iteration_ms"] for r in o["results"]}
    print("%-13s %6.1f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %6.3f %6.3f %6.3f %7.3f" % (
        m, o["bandwidth_bps"] / 1e9, t["vanilla"], t["fifo-stream"], t["prio"],
        t["bytesched"], t["mercury"], t["ideal"], t["vanilla"] / t["mercury"],
        t["fifo-stream"] / t["mercury"], t["bytesched"] / t["mercury"],
        t["mercury"] / t["ideal"]))
PY

echo
echo "== userspace/sim/tables.py"
python3 ./tables.py --models "$(echo $MODELS | tr ' ' ',')" --json "$OUT/tables.json"
echo
echo "== userspace/sim/tables.py -- --header 0 --frame-header 0 --frame-cost 0 (no wire tax for any scheme)"
python3 ./tables.py --models "$(echo $MODELS | tr ' ' ',')" \
	--json "$OUT/tables-notax.json" -- --header 0 --frame-header 0 --frame-cost 0 | tail -n 2

start=$(date +%s.%N)
for m in $MODELS; do
	$SIM --profile "$PROFILES/$m.json" --workers 8 --servers 8 --sweep \
		--plot "$OUT/$m.png" >"$OUT/$m.sweep.txt"
done
end=$(date +%s.%N)
printf '\nsweep of %s models x 9 bandwidths x 6 schemes (plots included): %.2f s\n' \
	"$(echo $MODELS | wc -w)" "$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }')"
printf 'machine: %s, %s CPUs, Linux %s\n' \
	"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
	"$(nproc)" "$(uname -r)"
echo "plots: $OUT/<model>.png; data: $OUT/*.json"
