#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs in the guest as PID 1 on the host's root: run each listed test script
# with its output and exit code in the results share, save dmesg, power off.
root=$1
out=$2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp MERCURY_ROOT=$root MERCURY_OUT=$out LC_ALL=C.UTF-8
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# devtmpfs has no /dev/fd; bash's <(...) and dkms need it
ln -sfn /proc/self/fd /dev/fd
hostname mercury-vm
ip link set lo up
echo 1 > /proc/sys/kernel/panic_on_oops
dmesg -n 1

# A kernel with kmemleak (vm-run.sh -k): forget what boot left behind, so
# that the report at the end names only what the tests leaked.
leak=/sys/kernel/debug/kmemleak
if [ -e $leak ]; then
	echo scan > $leak
	echo clear > $leak
fi

cd "$root" || exit 1
echo "MERCURY-GUEST-START"
while read -r t; do
	name=$(basename "$t" .sh)
	echo "MERCURY-TEST-START $name"
	timeout -k 5 "${MERCURY_TEST_TIMEOUT:-1800}" bash "$t" > "$out/$name.log" 2>&1 < /dev/null
	echo $? > "$out/$name.rc"
	echo "MERCURY-TEST-END $name $(cat "$out/$name.rc")"
	# the log so far, kept in case the guest dies or is stopped later
	dmesg > "$out/dmesg.log"
	if [ -e $leak ]; then
		echo scan > $leak
		cat $leak > "$out/kmemleak.log"
	fi
done < "$out/tests"
# Two scans a few seconds apart, as the kernel's netdev CI does: an object
# must look unreferenced twice to be reported.
if [ -e $leak ]; then
	echo scan > $leak
	sleep 5
	echo scan > $leak
	cat $leak > "$out/kmemleak.log"
fi
dmesg > "$out/dmesg.log"
sync
echo "MERCURY-GUEST-DONE"
echo o > /proc/sysrq-trigger
sleep 10
