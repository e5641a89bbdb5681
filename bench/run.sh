#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The emulated training benchmark, from the host:
#   bench/run.sh [--short|--full] [-o OUTDIR]
# builds what the guest needs, boots the VM once with bench/training.sh
# (every model, every scheme), shows progress, prints the table and
# writes OUTDIR/bench.png (default OUTDIR: out/bench).
#   --short  the demo: 3 models x 4 schemes x 2 runs, a few minutes
#   --full   all 5 models, more iterations, 2 runs per case
#   --calibrate FILE  one boot over a list of settings ("LABEL VAR=VAL ...")
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
mode=short
out=$top/out/bench
calib=""
while [ $# -gt 0 ]; do
	case $1 in
	--short) mode=short ;;
	--full) mode=full ;;
	-o) out=$2; shift ;;
	--calibrate) calib=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
	-h|--help) sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench: unknown argument $1 (--short, --full, --calibrate FILE, -o DIR)" >&2; exit 2 ;;
	esac
	shift
done

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
echo "bench: building"
{ make -C "$top" module && make -C "$top" tc-plugin &&
  make -C "$top/userspace/lib" && make -C "$top/userspace/sim" &&
  make -C "$top/userspace/ps"; } > "$out/build.log" 2>&1 ||
	{ tail -n 30 "$out/build.log"; echo "bench: build failed (log: $out/build.log)" >&2; exit 1; }

# The guest reads its settings from the results share.
# Settings chosen by calibration (Documentation/benchmark.md): fifo's
# measured time must agree with mercury-sim's fifo for the same case.
# MTU 9000 (the simulator gets --mtu 9000) halves the guest's per-packet
# CPU; the Mercury in-flight cap is 4 frames (see training.sh).
# The two modes differ only in the models and the iterations per run.
models="resnet50 vgg16 bert_large" iter=4
[ $mode = full ] && models="resnet50 vgg16 inception_v3 bert_large gpt2" iter=6
cat > "$out/bench.env" <<-EOT
	MODE=$mode
	MODELS="$models"
	W=2
	S=2
	RATE=10mbit
	MTU=9000
	SSAI=0
	TARGET_BYTES=400000
	ITER=$iter
	REPEAT=2
	EOT
# Overrides from the environment: BENCH_MODELS="resnet50 vgg16",
# BENCH_SCHEMES=fifo, BENCH_REPEAT=3, BENCH_MTU=9000, ... (every setting
# of bench/training.sh, prefixed with BENCH_).
for v in MODELS SCHEMES W S RATE MTU BURST SSAI REPEAT TARGET_BYTES ITER CHANNELS LEVELS INFLIGHT DELAY TSQ DIAG CHUNK CHUNK_MIN FRAME_COST LATENCY PART_RTT BS_CREDIT; do
	eval "val=\${BENCH_$v:-}"
	[ -n "$val" ] && printf '%s="%s"\n' "$v" "$val" >> "$out/bench.env"
done
rm -f "$out/bench.txt" "$out/bench.json" "$out/bench-raw.tsv" "$out/training.log" \
	"$out/calib.list" "$out/calib.txt" "$out/calib.json" "$out/calib-raw.tsv"
if [ -n "$calib" ]; then
	cp "$calib" "$out/calib.list" || exit 1
fi

# Other VMs or builds on the host slow the guest and are the largest
# source of run-to-run noise: the host's load goes into the log.
echo "bench: host load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/hostload.txt"
echo "bench: $mode mode, booting the VM (results in $out)"
"$top/scripts/vm-run.sh" -o "$out" "$top/bench/training.sh" > "$out/vm-run.out" 2>&1 &
vm=$!
start=$(date +%s)
last=""
while kill -0 $vm 2>/dev/null; do
	p=$(grep '^# progress' "$out/training.log" 2>/dev/null | tail -n 1 | sed 's/^# progress //')
	line="bench: [$(($(date +%s) - start))s] ${p:-booting}"
	if [ -t 1 ]; then
		printf '\r%-70s' "$line"
	elif [ "$p" != "$last" ]; then
		echo "$line"
	fi
	last=$p
	sleep 1
done
wait $vm
rc=$?
[ -t 1 ] && echo
echo "bench: host load after: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" | tee -a "$out/hostload.txt"
grep -E '^(ok|not ok)' "$out/vm-run.out"
if [ -n "$calib" ]; then
	[ -s "$out/calib.txt" ] || { echo "bench: no calibration results (see $out/training.log)" >&2; exit 1; }
	cat "$out/calib.txt"
	echo "bench: calibration done in $(($(date +%s) - start))s"
	exit $rc
fi
if [ ! -s "$out/bench.json" ]; then
	echo "bench: no results (see $out/training.log and $out/vm-run.out)" >&2
	exit 1
fi

# Plot: iteration time per scheme and model (clustered bars), measured,
# with the simulator's ideal and Mercury beside them.
dat=$out/bench.dat
python3 - "$out/bench.json" > "$dat" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))

for m in d["models"]:
    v = {s["scheme"]: s["iteration_ms"] for s in m["schemes"]}
    sm = next((s["sim_ms"] for s in m["schemes"] if s["scheme"] == "mercury"), None)
    print(m["model"], *[("%.2f" % v[k]) if v.get(k) else "NaN"
                        for k in ("vanilla", "fifo-stream", "bytesched", "mercury")],
          *[("%.2f" % x) if x else "NaN" for x in (m.get("ideal_sim_ms"), sm)])
PY
gnuplot <<EOT 2>> "$out/build.log" || echo "bench: gnuplot failed" >&2
set terminal pngcairo size 1000,560 font "sans,11" noenhanced
set output "$out/bench.png"
set title "Emulated PS training: iteration time per scheme ($(sed -n 's/.*"meta": "\(.*\)",/\1/p' "$out/bench.json"))" font "sans,10"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "iteration time (ms, log scale)"
set logscale y
set key top left
set datafile missing "NaN"
set grid ytics
plot "$dat" using 2:xtic(1) title "vanilla (stock PS, whole tensors)", \
     "" using 3 title "fifo-stream (FIFO, streaming aggregation)", \
     "" using 4 title "bytesched (partition + credit)", \
     "" using 5 title "mercury", \
     "" using 6 title "ideal, simulated" fs pattern 4, \
     "" using 7 title "mercury, simulated" fs pattern 5
EOT
# the table, ending with what Mercury gained in plain words
cat "$out/bench.txt"
echo "bench: plot $out/bench.png"
exit $rc
