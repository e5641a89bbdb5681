#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Fetch the Debian source of the installed iproute2 into build/iproute2/,
# so the tc plugin compiles against exactly the headers (struct
# qdisc_util, print helpers) of the tc that will load it. Uses its own apt
# source list and lists directory; /etc/apt is not touched. Prints the
# source directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
ver=$(dpkg-query -W -f='${Version}' iproute2 2>/dev/null) ||
	{ echo "fetch-iproute2: iproute2 is not installed" >&2; exit 1; }
upstream=${ver%-*}
dst=$top/build/iproute2
if [ -f "$dst/.version" ] && [ "$(cat "$dst/.version")" = "$ver" ]; then
	echo "$dst/iproute2-$upstream"
	exit 0
fi

work=$top/build/apt-src
mkdir -p "$work/lists/partial" "$work/archives/partial" "$dst"
# deb-src entries for the suites the host already uses.
sed -n 's/^Types: deb$/Types: deb-src/p; /^\(URIs\|Suites\|Components\|Signed-By\):/p; /^$/p' \
	/etc/apt/sources.list.d/*.sources > "$work/sources.sources" 2>/dev/null || true
if ! grep -q deb-src "$work/sources.sources" 2>/dev/null; then
	grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' > "$work/sources.list"
fi
aptopts=(-o "Dir::Etc::SourceList=/dev/null"
	 -o "Dir::Etc::SourceParts=$work"
	 -o "Dir::State::Lists=$work/lists"
	 -o "Dir::Cache::Archives=$work/archives"
	 -o "APT::Sandbox::User=root" -q)
apt-get "${aptopts[@]}" update >&2
rm -rf "${dst:?}"/*
(cd "$dst" && apt-get "${aptopts[@]}" source --download-only "iproute2=$ver" >&2)
(cd "$dst" && dpkg-source -x iproute2_"$ver".dsc "iproute2-$upstream" >&2)
echo "$ver" > "$dst/.version"
echo "$dst/iproute2-$upstream"
