#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make deb: build mercury-dkms and mercury-tools with Debian's own tooling
# (dpkg-buildpackage, debhelper, dh-dkms) from a copy of the tree, and
# leave the .deb files in out/deb/.
#
#   packaging/build-deb.sh VERSION
#
# The copy holds the files git knows (committed or new, never ignored
# build products), so the packages are built from source, not from
# whatever happens to be compiled in the tree.
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
[ "$chver" = "$ver" ] || die "packaging/debian/changelog says $chver, the Makefile $ver"

rm -rf "$out"
mkdir -p "$src"
cd "$top"
git ls-files -z -c -o --exclude-standard -- Makefile Kbuild dkms.conf kmod include \
	tc-plugin userspace scripts packaging Documentation 'README*' 'LICENSE*' |
	while IFS= read -r -d '' f; do
		[ -f "$f" ] && printf '%s\0' "$f"
	done | xargs -0 cp --parents -t "$src"
cp -r packaging/debian "$src/debian"

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
