#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) Mercury's debug guest kernel: Debian's linux-source-6.1
# (or the series DEBUG_KERNEL_SRC names: 6.12), `make tinyconfig` plus
# scripts/debug-kernel/debug.config (KASAN, kmemleak, lockdep, UBSAN, ...
# and everything the guest needs built in).
#
#   scripts/debug-kernel/build.sh [-q]
#
# The result is cached outside the clone, so that CI and later runs reuse
# it, under $MERCURY_DEBUG_KERNEL_CACHE (default
# /var/cache/mercury/debug-kernel)/<key>/, where <key> hashes the config
# fragment, the linux-source package and version and the compiler:
#   bzImage        the kernel vm-run.sh -k boots
#   build/         the O= build tree, modules_prepare'd, with Module.symvers
#                  (make -C <key>/build M=... modules builds sch_mercury)
#   mod/           modules_install output: /lib/modules/<kver> with
#                  modules.builtin, so that modprobe in the guest finds
#                  the built-in drivers (vm-run.sh -M mounts it)
#   kver           the kernel release (uname -r in the guest)
#   build.log      the build's output; `ready` marks a finished build
# Prints the <key> directory on the last line of stdout. A second run with
# the same inputs returns in about a second. -q: no progress lines.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
frag=$here/debug.config
cache=${MERCURY_DEBUG_KERNEL_CACHE:-/var/cache/mercury/debug-kernel}
jobs=${DEBUG_KERNEL_JOBS:-2}
quiet=0
[ "${1:-}" = -q ] && quiet=1

say() { [ $quiet = 1 ] || echo "debug-kernel: $*" >&2; }
die() { echo "debug-kernel: $*" >&2; exit 1; }

series=${DEBUG_KERNEL_SRC:-6.1}
[[ $series =~ ^[0-9]+\.[0-9]+$ ]] ||
	die "DEBUG_KERNEL_SRC must be a kernel series such as 6.1 or 6.12, not '$series'"
pkg=linux-source-$series
tarball=$(ls /usr/src/$pkg.tar.* 2>/dev/null | head -n 1) ||
	true
[ -n "$tarball" ] || die "no /usr/src/$pkg.tar.* (apt-get install $pkg)"
srcver=$(dpkg-query -W -f='${Version}' $pkg 2>/dev/null) ||
	die "$pkg is not installed as a package"
for t in flex bison bc gcc make; do
	command -v $t >/dev/null || die "$t missing (run scripts/install-deps.sh)"
done
[ -e /usr/include/libelf.h ] || die "libelf-dev missing (run scripts/install-deps.sh)"

key=$( { cat "$frag"; echo "$pkg $srcver"; gcc --version | head -n 1; } |
	sha256sum | cut -c1-16)
dir=$cache/$key
mkdir -p "$cache" || die "cannot create $cache"

# One builder per key; a second caller waits and then reuses the result.
exec 9> "$cache/$key.lock"
flock 9

if [ -e "$dir/ready" ]; then
	say "reusing $dir ($(cat "$dir/kver"))"
	echo "$dir"
	exit 0
fi

# The extracted source is shared by every key of one package version and
# never written to: each key builds in its own O= tree.
src=$cache/src-$srcver/$pkg
if [ ! -e "$cache/src-$srcver/extracted" ]; then
	say "extracting $tarball"
	rm -rf "$cache/src-$srcver.tmp"
	mkdir -p "$cache/src-$srcver.tmp"
	nice -n 15 tar -xf "$tarball" -C "$cache/src-$srcver.tmp"
	rm -rf "$cache/src-$srcver"
	mv "$cache/src-$srcver.tmp" "$cache/src-$srcver"
	touch "$cache/src-$srcver/extracted"
fi

rm -rf "$dir"
mkdir -p "$dir/build"
log=$dir/build.log
start=$(date +%s)
say "building in $dir (log: $log); about 10-20 minutes on 2 cores"
k() { nice -n 15 make -C "$src" O="$dir/build" "$@" >> "$log" 2>&1; }

k tinyconfig || die "make tinyconfig failed (see $log)"
(cd "$dir/build" &&
	"$src/scripts/kconfig/merge_config.sh" -m -O "$dir/build" .config "$frag") \
	>> "$log" 2>&1 || die "merge_config failed (see $log)"
k olddefconfig || die "make olddefconfig failed (see $log)"

# Every option of the fragment must have survived olddefconfig: a
# dependency we missed would otherwise silently drop a detector.
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF "$line" "$dir/build/.config" ||
			{ echo "debug-kernel: wanted $line, got: $(grep "^${line%%=*}=\|^# ${line%%=*} " "$dir/build/.config" || echo unset)" >&2; bad=1; } ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }; opt=${opt%% *}
		! grep -q "^$opt=" "$dir/build/.config" ||
			{ echo "debug-kernel: wanted $opt off, got: $(grep "^$opt=" "$dir/build/.config")" >&2; bad=1; } ;;
	esac
done < "$frag"
[ $bad = 0 ] || die "the fragment does not apply cleanly (see above)"

# bzImage for the guest; `modules` has nothing to build (everything is
# built in) but writes Module.symvers, which out-of-tree builds need.
k -j"$jobs" bzImage modules || { tail -n 30 "$log" >&2; die "kernel build failed (see $log)"; }
k modules_prepare || die "make modules_prepare failed (see $log)"
[ -s "$dir/build/Module.symvers" ] || die "no Module.symvers in $dir/build"
cp "$dir/build/arch/x86/boot/bzImage" "$dir/bzImage"
kver=$(cat "$dir/build/include/config/kernel.release")
echo "$kver" > "$dir/kver"
k INSTALL_MOD_PATH="$dir/mod" modules_install || die "modules_install failed (see $log)"
# modules_install links build/ and source/ to where we built; depmod
# needs only the files beside them.
rm -f "$dir/mod/lib/modules/$kver/build" "$dir/mod/lib/modules/$kver/source"
depmod -b "$dir/mod" "$kver" || die "depmod failed"
echo "$(($(date +%s) - start))" > "$dir/build-seconds"
touch "$dir/ready"
say "built $kver in $(cat "$dir/build-seconds")s"
echo "$dir"
