#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot Debian's installed kernel under qemu (software emulation) with the
# host root filesystem shared read-only over 9p, run guest test scripts,
# and carry every result out.
#
#   scripts/vm-run.sh [-o OUTDIR] [-t SECONDS] [-m MiB] SCRIPT...
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
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
out=""
timeout_s=1500
mem=2048

while getopts "o:t:m:" opt; do
	case $opt in
	o) out=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	m) mem=$OPTARG ;;
	*) echo "usage: $0 [-o OUTDIR] [-t SECONDS] [-m MiB] SCRIPT..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "vm-run: no test script given" >&2; exit 2; }

die() { echo "vm-run: $*" >&2; exit 1; }

kver=${KVER:-$(ls -d /lib/modules/*/kernel 2>/dev/null | sed 's|/lib/modules/||;s|/kernel||' | sort -V | tail -n 1)}
[ -n "$kver" ] || die "no kernel modules installed (run scripts/install-deps.sh)"
kernel=/boot/vmlinuz-$kver
[ -r "$kernel" ] || die "no kernel image $kernel"
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

# The initramfs: busybox, the 9p/virtio modules of $kver, our /init.
initrd=$top/build/vm/initramfs-$kver.cpio.gz
if [ ! -s "$initrd" ] || [ "$initrd" -ot "$top/scripts/vm-init" ]; then
	bb=$(command -v busybox) || die "busybox missing (run scripts/install-deps.sh)"
	stage=$(mktemp -d)
	mkdir -p "$stage"/{bin,dev,proc,sys,newroot,lib/modules}
	cp "$bb" "$stage/bin/busybox"
	for m in virtio_pci 9pnet_virtio 9p; do
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
start=$(date +%s)
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
	-accel tcg -m "$mem" -smp 2 -nographic -no-reboot ${VM_QEMU_ARGS:-} \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 quiet mercury.root=$top ${VM_APPEND:-}" \
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=root,mount_tag=hostroot \
	-fsdev local,id=res,path="$out",security_model=none,multidevs=remap \
	-device virtio-9p-pci,fsdev=res,mount_tag=results \
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
echo "vm-run: $((n - fails)) passed, $fails failed in $(($(date +%s) - start))s"
[ $fails -eq 0 ]
