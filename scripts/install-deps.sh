#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install every Debian package Mercury needs to build, test and demo.
# Idempotent: when everything is already present it returns in about a
# second without touching apt.
set -euo pipefail

PKGS=(
	# build the module and the tools
	build-essential pkg-config kmod cpio
	linux-image-amd64 linux-headers-amd64
	libnl-3-dev libnl-route-3-dev libnl-cli-3-dev
	libjson-c-dev libcmocka-dev
	iproute2
	# boot the guest
	qemu-system-x86 busybox-static
	# tests, benchmarks, plots
	python3 gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null |
		grep -qx installed || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
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
