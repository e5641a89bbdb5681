#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot Debian's installed kernel under qemu (software emulation) with the
# host root filesystem shared read-only over 9p, run guest test scripts,
# and carry every result out.
#
#   [KVER=K] scripts/vm-run.sh [-o OUTDIR] [-t SECONDS] [-m MiB] [-k KDIR] [-K KO] [-n TAP]... SCRIPT...
#
# Each SCRIPT (a file under the project root: the guest's /tmp is its own)
# runs as root in the guest, in the project root, under bash,
# with /tmp writable, MERCURY_ROOT and MERCURY_OUT set. Its stdout/stderr
# land in OUTDIR/<name>.log and its exit code in OUTDIR/<name>.rc; the
# guest's dmesg lands in OUTDIR/dmesg.log. Prints one KTAP line per test
# script result line and a dmesg check, and exits non-zero if the VM did
# not finish, any script failed, or dmesg holds a kernel warning.
#
# VM_QEMU_ARGS (extra qemu options, split on blanks) and VM_APPEND (extra
# kernel command line) let a benchmark change the emulation, e.g.
# bench/pktgen/run.sh boots the guest on the TSC clocksource.
#
# -n TAP (repeatable) gives the guest one virtio-net port per host tap
# device, in order (the guest's first non-loopback device is the first
# TAP), so that host processes can send through the guest's qdiscs
# (bench/torch/run.sh). The caller creates each tap beforehand (ip tuntap
# add TAP mode tap) and may move it into a namespace once qemu holds it
# (/sys/class/net/TAP/carrier reads 1): it stays attached.
#
# The kernel booted is Debian's /boot/vmlinuz-$KVER, KVER chosen as for
# "make" (scripts/kver.sh: the newest kernel with headers and an image),
# so the guest boots the kernel the tree's sch_mercury.ko was built for;
# vm-run refuses a module built for another kernel. KVER=K boots K.
# -K KO (or VM_MODULE=KO) is a sch_mercury.ko built for that kernel
# elsewhere (make module-kver KVER=K: build/kmod/K/sch_mercury.ko): the
# guest sees it as the tree's sch_mercury.ko.
#
# -k KDIR (or VM_KERNEL=KDIR) boots a kernel of our own instead, as built
# by scripts/debug-kernel/build.sh: KDIR/bzImage with everything built in,
# KDIR/kver its release and KDIR/mod/lib/modules its module directory,
# which the guest sees as /lib/modules (so modprobe finds the built-in
# drivers), with -K the sch_mercury.ko built for it. Such a kernel is taken to be
# a debug kernel: besides dmesg, the console and kmemleak's report (after
# two scans at the end) are scanned for KASAN, UBSAN, lockdep, kmemleak,
# WARN, BUG, Oops, RIP:, Call Trace:, ref_tracker: and hung-task reports.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
out=""
timeout_s=1500
mem=2048
kdir=${VM_KERNEL:-}
ko=${VM_MODULE:-}
nics=()

while getopts "o:t:m:k:K:n:" opt; do
	case $opt in
	o) out=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	m) mem=$OPTARG ;;
	k) kdir=$OPTARG ;;
	K) ko=$OPTARG ;;
	n) i=$((${#nics[@]} / 4))
	   nics+=(-netdev "tap,id=tap$i,ifname=$OPTARG,script=no,downscript=no"
		-device "virtio-net-pci,netdev=tap$i") ;;
	*) echo "usage: [KVER=K] $0 [-o OUTDIR] [-t SECONDS] [-m MiB] [-k KDIR] [-K KO] [-n TAP]... SCRIPT..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "vm-run: no test script given" >&2; exit 2; }

die() { echo "vm-run: $*" >&2; exit 1; }

append_own=""
if [ -n "$kdir" ]; then
	kdir=$(cd "$kdir" 2>/dev/null && pwd) || die "no kernel directory ${VM_KERNEL:-$kdir}"
	kernel=$kdir/bzImage
	[ -r "$kernel" ] && [ -r "$kdir/kver" ] || die "$kdir has no bzImage and kver (scripts/debug-kernel/build.sh)"
	kver=$(cat "$kdir/kver")
	[ -d "$kdir/mod/lib/modules/$kver" ] || die "no module directory $kdir/mod/lib/modules/$kver"
	append_own="mercury.moddir=$kdir/mod/lib/modules $(grep -v '^#' "$top/scripts/debug-kernel/cmdline" 2>/dev/null | tr '\n' ' ')"
else
	kver=${KVER:-$("$top/scripts/kver.sh")}
	[ -n "$kver" ] || die "no kernel installed (run scripts/install-deps.sh)"
	[ -d "/lib/modules/$kver/kernel" ] || die "no modules of kernel $kver in /lib/modules"
	kernel=/boot/vmlinuz-$kver
	[ -r "$kernel" ] || die "no kernel image $kernel (KVER=$kver)"
fi
if [ -n "$ko" ]; then
	ko=$(cd "$(dirname "$ko")" && pwd)/$(basename "$ko")
	[ -r "$ko" ] || die "no module $ko"
	[ -e "$top/sch_mercury.ko" ] || die "$top/sch_mercury.ko missing: the guest shows $ko in its place (make module)"
	append_own="$append_own mercury.ko=$ko"
fi
# The module the guest will load must be built for the kernel it boots.
mod=${ko:-$top/sch_mercury.ko}
if [ -e "$mod" ]; then
	built=$(modinfo -F vermagic "$mod" 2>/dev/null | awk '{ print $1 }')
	[ "$built" = "$kver" ] ||
		die "$mod is built for kernel '${built:-?}', the guest boots $kver (make module KVER=$kver, or -K a module built for it)"
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (run scripts/install-deps.sh)"

[ -n "$out" ] || out=$top/out/vm-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.rc "$out"/*.log "$out/tests"

for s in "$@"; do
	s=$(cd "$(dirname "$s")" && pwd)/$(basename "$s")
	[ -r "$s" ] || die "no test script $s"
	echo "$s" >> "$out/tests"
done

# The initramfs: busybox, the 9p/virtio modules of $kver (none for our
# own kernel: it has them built in), our /init.
initrd=$top/build/vm/initramfs-$kver.cpio.gz
if [ ! -s "$initrd" ] || [ "$initrd" -ot "$top/scripts/vm-init" ]; then
	bb=$(command -v busybox) || die "busybox missing (run scripts/install-deps.sh)"
	stage=$(mktemp -d)
	mkdir -p "$stage"/{bin,dev,proc,sys,newroot,lib/modules}
	cp "$bb" "$stage/bin/busybox"
	for m in virtio_pci 9pnet_virtio 9p; do
		[ -z "$kdir" ] || break
		modprobe -S "$kver" --show-depends "$m" || die "cannot resolve module $m for $kver"
	done | awk '$1 == "insmod" { print $2 }' | awk '!seen[$0]++' > "$stage/modules.list"
	while read -r ko; do
		cp "$ko" "$stage/lib/modules/" || die "cannot copy $ko"
		echo "/lib/modules/$(basename "$ko")"
	done < "$stage/modules.list" > "$stage/modules.order"
	cp "$top/scripts/vm-init" "$stage/init"
	chmod +x "$stage/init"
	mkdir -p "$(dirname "$initrd")"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp" &&
		mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
fi

echo "vm-run: booting $kver with ${#} test script(s), results in $out"
# no_timer_check: on a loaded host the emulated 8254 can miss the kernel's
# IO-APIC timer check, which then panics at boot ("IO-APIC + timer doesn't
# work!", seen with 6.1 under a load of 20 on 2 cores); virtual machines
# skip that check.
start=$(date +%s)
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
	-accel tcg -m "$mem" -smp 2 -nographic -no-reboot ${VM_QEMU_ARGS:-} \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 quiet no_timer_check mercury.root=$top $append_own ${VM_APPEND:-}" \
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=root,mount_tag=hostroot \
	-fsdev local,id=res,path="$out",security_model=none,multidevs=remap \
	-device virtio-9p-pci,fsdev=res,mount_tag=results \
	"${nics[@]}" \
	< /dev/null > "$out/console.log" 2>&1 &
qpid=$!

# Progress while the guest runs: one line per finished script.
seen=""
while kill -0 "$qpid" 2>/dev/null; do
	for rc in "$out"/*.rc; do
		[ -e "$rc" ] || continue
		case " $seen " in *" $rc "*) continue ;; esac
		seen="$seen $rc"
		echo "vm-run: [$(($(date +%s) - start))s] $(basename "$rc" .rc) finished (exit $(cat "$rc"))"
	done
	sleep 2
done
wait "$qpid"
qrc=$?

fails=0
n=0
if ! grep -q '^MERCURY-GUEST-DONE' "$out/console.log"; then
	n=1; fails=1
	echo "not ok $n vm: guest did not finish (qemu exit $qrc)"
	tail -n 30 "$out/console.log" | sed 's/^/# /'
fi

# One KTAP result per script line, prefixed with the script name.
while read -r s; do
	name=$(basename "$s" .sh)
	log=$out/$name.log
	rcf=$out/$name.rc
	if [ ! -e "$rcf" ]; then
		n=$((n + 1)); fails=$((fails + 1))
		echo "not ok $n $name # did not run to completion"
		[ -e "$log" ] && tail -n 20 "$log" | sed 's/^/# /'
		continue
	fi
	found=0
	while IFS= read -r line; do
		case $line in
		"ok "*|"not ok "*)
			found=1; n=$((n + 1))
			res=${line%%ok *}ok
			desc=$(echo "$line" | sed -E 's/^(not )?ok [0-9]+ -? ?//')
			echo "$res $n $name: $desc"
			[ "$res" = "not ok" ] && fails=$((fails + 1))
			;;
		"#"*) [ -n "${MERCURY_VERBOSE:-}" ] && echo "$line" ;;
		esac
	done < "$log"
	if [ $found = 0 ] || { [ "$(cat "$rcf")" != 0 ] && ! grep -q '^not ok' "$log"; }; then
		n=$((n + 1)); fails=$((fails + 1))
		echo "not ok $n $name: exited $(cat "$rcf") without a failing test result"
		tail -n 20 "$log" | sed 's/^/# /'
	fi
	if grep -q '^not ok' "$log"; then
		grep -E '^#' "$log" | tail -n 40 | sed "s/^/# $name /"
	fi
done < "$out/tests"

# Every run checks the guest kernel log.
n=$((n + 1))
pat='WARNING:|BUG:|Oops|general protection|Kernel panic|INFO: task .* blocked|refcount_t:|kernel BUG|UBSAN|list_add corruption|list_del corruption'
if [ -s "$out/dmesg.log" ] && ! grep -Eq "$pat" "$out/dmesg.log"; then
	echo "ok $n dmesg: no WARN, BUG, Oops or hung task"
else
	fails=$((fails + 1))
	echo "not ok $n dmesg: kernel log missing or has warnings"
	grep -E "$pat" "$out/dmesg.log" 2>/dev/null | head -n 20 | sed 's/^/# /'
fi

# A debug kernel: its detectors may also speak on the console (a report
# the guest did not live to save) and in kmemleak's report.
if [ -n "$kdir" ]; then
	n=$((n + 1))
	dpat="$pat|KASAN|suspected memory leak|unreferenced object|RIP:|Call Trace:|ref_tracker:|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|sleeping function called|soft lockup|hung_task|blocked for more than|ODEBUG|Object already free|Poison overwritten|Redzone|Padding overwritten"
	if [ ! -e "$out/kmemleak.log" ]; then
		fails=$((fails + 1))
		echo "not ok $n debug kernel: no kmemleak report (is CONFIG_DEBUG_KMEMLEAK on?)"
	elif grep -Eq "$dpat" "$out/console.log" "$out/dmesg.log" "$out/kmemleak.log"; then
		fails=$((fails + 1))
		echo "not ok $n debug kernel: KASAN, UBSAN, lockdep, kmemleak, WARN, BUG or hung-task report"
		grep -Eh "$dpat" "$out/console.log" "$out/dmesg.log" "$out/kmemleak.log" |
			head -n 30 | sed 's/^/# /'
	else
		echo "ok $n debug kernel: no KASAN, UBSAN, lockdep, kmemleak, WARN, BUG, RIP, Call Trace, ref_tracker or hung-task report"
	fi
fi
echo "vm-run: $((n - fails)) passed, $fails failed in $(($(date +%s) - start))s"
[ $fails -eq 0 ]
