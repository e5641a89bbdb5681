#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The kernels Mercury builds for and boots, chosen in one place so that the
# module "make" builds is the one the guest loads.
#
#   scripts/kver.sh            the kernel: the newest with both headers
#                              (/lib/modules/K/build) and an image
#                              (/boot/vmlinuz-K); the newest with headers
#                              only when none has both (a build machine)
#   scripts/kver.sh --boot     every kernel with headers and an image,
#                              oldest first (make test-kernels)
#   scripts/kver.sh --headers  every kernel with headers, oldest first
#                              (make deb, the DKMS checks)
#
# Versions sort with sort -V: 6.1.0-57-amd64 before 6.12.118+deb12-amd64.
# Never the running kernel: the host may not load modules at all.
headers() {
	for b in /lib/modules/*/build; do
		[ -d "$b" ] || continue
		b=${b%/build}
		echo "${b#/lib/modules/}"
	done | sort -V
}

boot() {
	headers | while read -r k; do
		[ -r "/boot/vmlinuz-$k" ] && echo "$k"
	done
}

case ${1:-} in
--headers) headers ;;
--boot) boot ;;
"") k=$(boot | tail -n 1)
    [ -n "$k" ] || k=$(headers | tail -n 1)
    [ -z "$k" ] || echo "$k" ;;
*) echo "usage: $0 [--boot|--headers]" >&2; exit 2 ;;
esac
