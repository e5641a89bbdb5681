#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install every Debian package Mercury needs to build, test and demo.
# Idempotent: when everything is already present it returns in about a
# second without touching apt.
set -euo pipefail

PKGS=(
	# build the module and the tools
	build-essential pkg-config kmod cpio procps
	linux-image-amd64 linux-headers-amd64
	# the second kernel the module is tested on: Debian 12's 6.12 (also
	# Debian 13's), image and headers beside 6.1; the meta-packages follow
	# the archive's newest 6.12 ABI (Documentation/install.md, "Kernels")
	linux-image-6.12-amd64 linux-headers-6.12-amd64
	libnl-3-dev libnl-route-3-dev libnl-cli-3-dev
	libjson-c-dev libcmocka-dev
	iproute2
	# boot the guest
	qemu-system-x86 busybox-static
	# packages: make deb (git archive), make dkms-install,
	# selftests/host_install.sh
	git dkms debhelper dh-dkms fakeroot
	# tests, benchmarks, plots; systemd-analyze checks the unit file
	python3 gnuplot-nox jq systemd
	# libmercury's fuzzers (libFuzzer, ASan, UBSan)
	clang libclang-rt-14-dev
	# mercury.torch: its tests, example and benchmark (CPU PyTorch, gloo)
	python3-torch python3-torchvision
	# the qdisc cost benchmark: red-black tree, kernel profiles
	libbsd-dev linux-perf
	# checkpatch, sparse and tc-testing (tdc) come from the kernel source;
	# 6.12's is where its qdisc API can be read (kmod/compat.h's probes)
	linux-source-6.1 linux-source-6.12 sparse
	# the debug guest kernel (make test-debug, make soak)
	flex bison bc libelf-dev
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null |
		grep -qx installed || missing+=("$p")
done

extract_kernel_tools() {
	# checkpatch.pl and tc-testing live only in the source tarball; keep
	# the few files we use under build/ (git-ignored).
	local top dst tarball
	top=$(cd "$(dirname "$0")/.." && pwd)
	dst=$top/build/linux-src
	[ -f "$dst/scripts/checkpatch.pl" ] && [ -d "$dst/tools/testing/selftests/tc-testing" ] &&
		[ -f "$dst/tools/lib/rbtree.c" ] && return 0
	tarball=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | head -n 1)
	[ -n "$tarball" ] || { echo "install-deps: no linux-source tarball" >&2; return 1; }
	echo "install-deps: extracting checkpatch and tc-testing from $tarball"
	mkdir -p "$dst"
	tar -xf "$tarball" -C "$dst" --strip-components=1 \
		linux-source-6.1/scripts/checkpatch.pl \
		linux-source-6.1/scripts/spelling.txt \
		linux-source-6.1/scripts/const_structs.checkpatch \
		linux-source-6.1/tools/testing/selftests/tc-testing \
		linux-source-6.1/tools/testing/selftests/kselftest.h \
		linux-source-6.1/tools/include \
		linux-source-6.1/tools/lib/rbtree.c
}

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	extract_kernel_tools
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	echo "install-deps: run as root (or: sudo $0)" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The initramfs that linux-image-amd64 would build is never used: the
# guest boots from our own small initramfs (scripts/vm-run.sh).
export INITRD=No
apt-get update -q </dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
extract_kernel_tools
