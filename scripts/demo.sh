#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo: build everything, boot the VM, and run the short emulated
# training benchmark (Mercury vs FIFO, sch_prio and tensor partitioning on
# real model profiles), then print the table and write the plot.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "demo: building module, tc plugin and tools"
make -s all
if [ ! -x bench/run.sh ]; then
	echo "demo: bench/run.sh is missing: the emulated benchmark is not in this tree" >&2
	exit 1
fi
exec bench/run.sh --short
