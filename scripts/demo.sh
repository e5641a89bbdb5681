#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo: build everything, boot the VM and run the short emulated
# training benchmark (a stock parameter server, FIFO with streaming
# aggregation, ByteScheduler-style partitioning and Mercury on real model
# profiles), print its table and plot, then say in plain words what
# Mercury gains, measured in the emulation and simulated at full size.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "demo: building module, tc plugin and tools"
make -s all || exit 1
if [ ! -x bench/run.sh ]; then
	echo "demo: bench/run.sh is missing: the emulated benchmark is not in this tree" >&2
	exit 1
fi
out=$top/out/bench
bench/run.sh --short -o "$out"
rc=$?

echo
echo "What Mercury gains, in plain words (iteration time of the other scheme / Mercury's):"
if [ -s "$out/bench.json" ]; then
	echo "emulated (2 workers, 2 servers, 10 Mbit/s links in the VM, scaled models; table above):"
	python3 -c 'import json, sys
for line in json.load(open(sys.argv[1])).get("plain", []):
    print("  " + line)' "$out/bench.json"
fi
echo "simulated at full size (mercury-sim, 8 workers, 8 servers, each model at its balanced bandwidth):"
for m in resnet50 vgg16 bert_large; do
	userspace/sim/mercury-sim --profile "profiles/h200/$m.json" --bandwidth balanced -j |
		python3 -c 'import json, sys
d = json.load(sys.stdin)
t = {r["scheme"]: r["iteration_ms"] for r in d["results"]}
print("  %s (%.0f Gbit/s): Mercury %.2fx faster than a stock parameter server, %.2fx than FIFO with streaming aggregation, %.2fx than ByteScheduler-style partitioning" % (
    d["model"], d["bandwidth_bps"] / 1e9, t["vanilla"] / t["mercury"],
    t["fifo-stream"] / t["mercury"], t["bytesched"] / t["mercury"]))' || rc=1
done
[ -s "$out/bench.png" ] && echo "plot: $out/bench.png"
exit $rc
