#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test-debug`: the whole guest suite under the debug kernel.
#  1. build (or reuse) the kernel: scripts/debug-kernel/build.sh;
#  2. build sch_mercury from this tree's kmod/ against it, in
#     build/debug-module/<results dir>/ (the tree's own sch_mercury.ko, built for
#     Debian's kernel, stays as it is);
#  3. boot it with scripts/vm-run.sh -k, run every guest selftest but the
#     package install test, the fuzzers among them at full size (100000
#     random option sets, 1000 random operation sequences), scan kmemleak
#     twice, and fail on any kernel report.
#
#   scripts/debug-kernel/test-debug.sh [SCRIPT...]
#
# With SCRIPTs, only those run (e.g. one selftest while debugging it).
# DEBUG_KERNEL_SRC=6.12 builds the kernel from linux-source-6.12 (default
# 6.1). FUZZ_SETS and FUZZ_SEQS change the fuzz sizes, VM_TIMEOUT the time
# allowed to the whole guest run (seconds), VM_OUT the results directory
# (out/vm-debug).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
start=$(date +%s)
die() { echo "test-debug: $*" >&2; exit 1; }

kdir=$(scripts/debug-kernel/build.sh | tail -n 1) && [ -e "$kdir/ready" ] ||
	die "no debug kernel"
echo "test-debug: kernel $(cat "$kdir/kver") in $kdir (ready after $(($(date +%s) - start))s)"

# The host tools the guest runs (tc plugin, mercuryctl, ...), the fuzzers,
# and the tree's module, which the guest shows the debug build in place of.
mkdir -p out
make -s all > out/test-debug-build.log 2>&1 || { tail -n 20 out/test-debug-build.log; die "make all failed"; }
make -s -C selftests/fuzz >> out/test-debug-build.log 2>&1 ||
	{ tail -n 20 out/test-debug-build.log; die "building the fuzzers failed"; }

out=${VM_OUT:-$top/out/vm-debug}
# one module build per results directory: test-debug and soak may run
# side by side
mod=$top/build/debug-module/$(basename "$out")
rm -rf "$mod"
mkdir -p "$mod"
cp -r Kbuild kmod include "$mod/"
nice -n 10 make -s -C "$kdir/build" M="$mod" modules > "$mod/build.log" 2>&1 ||
	{ cat "$mod/build.log"; die "sch_mercury does not build against the debug kernel"; }
[ -s "$mod/sch_mercury.ko" ] || die "no $mod/sch_mercury.ko"
grep -E "warning|error" "$mod/build.log" | sed 's/^/test-debug: /'

if [ $# -gt 0 ]; then
	scripts=("$@")
else
	mapfile -t scripts < <(ls selftests/mercury_*.sh | grep -v mercury_install.sh)
fi
sets=${FUZZ_SETS:-100000}
seqs=${FUZZ_SEQS:-1000}
# Unknown name=value words on the kernel command line reach the guest's
# init, and vm-guest.sh, as environment variables.
VM_APPEND="${VM_APPEND:-} MERCURY_TEST_TIMEOUT=${MERCURY_TEST_TIMEOUT:-14400} FUZZ_SETS=$sets FUZZ_SEQS=$seqs FUZZ_SEED=${FUZZ_SEED:-random}" \
	scripts/vm-run.sh -t "${VM_TIMEOUT:-28800}" -k "$kdir" -K "$mod/sch_mercury.ko" \
	-o "$out" "${scripts[@]}"
rc=$?
echo "test-debug: $([ $rc = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start))s (results in $out)"
exit $rc
