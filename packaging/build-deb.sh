#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make deb: build mercury-dkms and mercury-tools with Debian's own tooling
# (dpkg-buildpackage, debhelper, dh-dkms) from a copy of the tree, and
# leave the .deb files in out/deb/.
#
#   packaging/build-deb.sh VERSION
#
# The packages are built from a copy of the committed tree (git HEAD), so
# they never pick up half-done work lying in the checkout. With
# MERCURY_DEB_SRC=worktree the copy is the working tree instead: tracked
# files as they are now plus new files git does not ignore.
set -euo pipefail

ver=${1:?usage: build-deb.sh VERSION}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/out/deb
src=$out/src/mercury-$ver

die() { echo "build-deb: $*" >&2; exit 1; }

for t in dpkg-buildpackage dh dh_dkms; do
	command -v $t >/dev/null || die "$t missing (run scripts/install-deps.sh)"
done
chver=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -SVersion)
[ "$chver" = "$ver" ] || die "packaging/debian/changelog says $chver, VERSION $ver"

rm -rf "$out"
mkdir -p "$src"
cd "$top"
paths=(VERSION Makefile Kbuild dkms.conf kmod include tc-plugin userspace scripts packaging
       Documentation)
git rev-parse --verify -q HEAD >/dev/null || die "$top is not a git checkout with a commit"
case ${MERCURY_DEB_SRC:-head} in
head)
	echo "build-deb: packaging commit $(git rev-parse --short HEAD)"
	git archive --format=tar HEAD -- "${paths[@]}" | tar -x -C "$src" ;;
worktree)
	echo "build-deb: packaging the working tree"
	git ls-files -z -c -o --exclude-standard -- "${paths[@]}" |
		while IFS= read -r -d '' f; do
			[ -f "$f" ] && printf '%s\0' "$f"
		done | xargs -0 cp --parents -t "$src" ;;
*) die "MERCURY_DEB_SRC must be head or worktree" ;;
esac
cp -r "$src/packaging/debian" "$src/debian"

# One more package per kernel in DEB_KVERS (make deb: every kernel whose
# headers are installed, scripts/kver.sh --headers): the module prebuilt
# for exactly that kernel, for nodes that run it and should not need a
# compiler.
kvers=""
for kver in ${DEB_KVERS-$("$top/scripts/kver.sh" --headers)}; do
	[ -d "/lib/modules/$kver/build" ] || die "no headers for kernel $kver (DEB_KVERS)"
	mod=mercury-modules-$kver
	cat >> "$src/debian/control" <<EOF

Package: $mod
Architecture: linux-any
Depends: \${misc:Depends}, kmod, linux-image-$kver
Provides: mercury-modules
Description: Mercury gradient-priority qdisc (module prebuilt for $kver)
 Mercury is a Linux packet scheduler (qdisc) that sends the most urgent
 DNN gradient packets first.
 .
 This package holds sch_mercury built for exactly the kernel $kver, for
 nodes that run that kernel and have no compiler. Everywhere else,
 install mercury-dkms.
EOF
	kvers="$kvers $kver"
done
# dh_installmodules adds the depmod to each package's postinst and postrm.
if [ -n "$kvers" ]; then
	export MERCURY_MODULE_KVERS="${kvers# }"
	echo "build-deb: prebuilt modules for $MERCURY_MODULE_KVERS"
else
	echo "build-deb: no kernel headers, no prebuilt module package"
fi

# The tc plugin's headers: the source of the installed iproute2.
IPROUTE2_SRC=$(scripts/fetch-iproute2.sh) || die "cannot fetch the iproute2 source"
export IPROUTE2_SRC

(cd "$src" && dpkg-buildpackage -us -uc -b) > "$out/build.log" 2>&1 ||
	{ tail -n 40 "$out/build.log" >&2; die "dpkg-buildpackage failed (log: $out/build.log)"; }
mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out/"
rm -rf "$out/src"
for d in "$out"/*.deb; do
	echo "build-deb: $(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done
