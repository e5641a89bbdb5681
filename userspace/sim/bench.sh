#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# make -C userspace/sim bench: for the five target models on 8 workers and
# 8 servers, simulate at the balanced bandwidth (pushing every gradient
# once takes as long as forward+backward), check Mercury's speedups there
# against the published ranges, sweep 1..500 Gbit/s and plot into out/.
# Then, outside the timed sweep, the same balanced point with every scheme
# aggregating per packet (--chunk = one 1500-MTU payload, 1448 B) to show
# what the default 64 KiB chunk changes.
set -eu
cd "$(dirname "$0")"
PROFILES=${PROFILES:-../../profiles/h200}
MODELS=${MODELS:-"resnet50 vgg16 inception_v3 bert_large gpt2"}
SIM=./mercury-sim
OUT=out
mkdir -p "$OUT"
[ -d "$PROFILES" ] || { echo "bench: no profiles at $PROFILES" >&2; exit 1; }

start=$(date +%s.%N)
for m in $MODELS; do
	p="$PROFILES/$m.json"
	$SIM --profile "$p" --workers 8 --servers 8 --bandwidth balanced -j \
		>"$OUT/$m.balanced.json"
	$SIM --profile "$p" --workers 8 --servers 8 --sweep -j \
		>"$OUT/$m.sweep.json"
	$SIM --profile "$p" --workers 8 --servers 8 --sweep \
		--plot "$OUT/$m.png" >"$OUT/$m.sweep.txt"
done
end=$(date +%s.%N)
for m in $MODELS; do
	$SIM --profile "$PROFILES/$m.json" --workers 8 --servers 8 \
		--bandwidth balanced --chunk 1448 -j >"$OUT/$m.packet.json"
done

python3 - "$OUT" $MODELS <<'PY'
import json, sys
out, models = sys.argv[1], sys.argv[2:]
T_FIFO, T_BS, T_IDEAL = 1.18, 1.08, 1.05
def res(o):
    return {r["scheme"]: r["iteration_ms"] for r in o["results"]}
print("Mercury at the balanced bandwidth, 8 workers / 8 servers "
      "(targets: >= %.2fx fifo, >= %.2fx bytesched, <= %.2fx ideal)\n"
      % (T_FIFO, T_BS, T_IDEAL))
hdr = ("model", "bw Gbit/s", "fifo ms", "prio ms", "bytesch ms",
       "mercury ms", "ideal ms", "vs fifo", "vs bytesch", "/ideal")
print("%-13s %9s %9s %9s %10s %10s %9s %12s %12s %12s" % hdr)
met = {"fifo": 0, "bytesched": 0, "ideal": 0}
with open("%s/speedup.dat" % out, "w") as dat:
    for m in models:
        o = json.load(open("%s/%s.balanced.json" % (out, m)))
        r = res(o)
        vf = r["fifo"] / r["mercury"]
        vb = r["bytesched"] / r["mercury"]
        vi = r["mercury"] / r["ideal"]
        ok = lambda c: "ok " if c else "NO "
        met["fifo"] += vf >= T_FIFO
        met["bytesched"] += vb >= T_BS
        met["ideal"] += vi <= T_IDEAL
        print("%-13s %9.1f %9.2f %9.2f %10.2f %10.2f %9.2f %8.3f %s %8.3f %s %8.3f %s"
              % (m, o["bandwidth_bps"] / 1e9, r["fifo"], r["prio"],
                 r["bytesched"], r["mercury"], r["ideal"],
                 vf, ok(vf >= T_FIFO), vb, ok(vb >= T_BS), vi,
                 ok(vi <= T_IDEAL)))
        s = json.load(open("%s/%s.sweep.json" % (out, m)))
        dat.write("# %s\n" % m)
        for pt in s["sweep"]:
            q = res(pt)
            dat.write("%g %g %g\n" % (pt["bandwidth_bps"] / 1e9,
                                      q["fifo"] / q["mercury"],
                                      q["bytesched"] / q["mercury"]))
        dat.write("\n\n")
n = len(models)
print("\nmet: vs fifo %d/%d, vs bytesched %d/%d, within 5%% of ideal %d/%d"
      % (met["fifo"], n, met["bytesched"], n, met["ideal"], n))
print("\nSame point, every scheme aggregating per packet (--chunk 1448, one "
      "1500-MTU payload; bytesched unchanged):\n")
print("%-13s %9s %9s %10s %10s %9s %12s %12s %12s" % ("model", "fifo ms",
      "prio ms", "mercury ms", "m. 64K ms", "ideal ms", "vs fifo",
      "vs bytesch", "/ideal"))
for m in models:
    r = res(json.load(open("%s/%s.balanced.json" % (out, m))))
    q = res(json.load(open("%s/%s.packet.json" % (out, m))))
    vf = q["fifo"] / q["mercury"]
    vb = q["bytesched"] / q["mercury"]
    vi = q["mercury"] / q["ideal"]
    ok = lambda c: "ok " if c else "NO "
    print("%-13s %9.2f %9.2f %10.2f %10.2f %9.2f %8.3f %s %8.3f %s %8.3f %s"
          % (m, q["fifo"], q["prio"], q["mercury"], r["mercury"], q["ideal"],
             vf, ok(vf >= T_FIFO), vb, ok(vb >= T_BS), vi, ok(vi <= T_IDEAL)))
PY

printf '\nsweep of %s models x 9 bandwidths x 5 schemes (plots included): %.2f s\n' \
	"$(echo $MODELS | wc -w)" "$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }')"
printf 'machine: %s, %s CPUs, Linux %s\n' \
	"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
	"$(nproc)" "$(uname -r)"

gnuplot <<GP
set terminal pngcairo size 1000,500 font ',10' noenhanced
set output '$OUT/speedup.png'
set multiplot layout 1,2 title 'Mercury speedup, 8 workers / 8 servers (mercury-sim)'
set logscale x
set grid
set xlabel 'link bandwidth (Gbit/s)'
set ylabel 'iteration time ratio'
set key top left
names = '$MODELS'
set title 'vs fifo'
plot for [i=0:$(($(echo $MODELS | wc -w) - 1))] '$OUT/speedup.dat' index i using 1:2 with linespoints title word(names, i + 1)
set title 'vs bytesched'
plot for [i=0:$(($(echo $MODELS | wc -w) - 1))] '$OUT/speedup.dat' index i using 1:3 with linespoints title word(names, i + 1)
unset multiplot
GP
echo "plots: $OUT/speedup.png $OUT/<model>.png; data: $OUT/*.json"
