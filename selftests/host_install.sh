#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install and packaging checks that need no VM (CI runs them as root):
#   - make install DESTDIR=... lays out every file Documentation/install.md
#     lists, for PREFIX=/usr/local and PREFIX=/usr; depmod on the staged
#     module answers both aliases; make uninstall removes it all;
#   - the unit file passes systemd-analyze verify;
#   - make deb builds the packages and dpkg-deb shows the expected
#     contents and dependencies;
#   - make deb builds one mercury-modules-K per kernel K with headers;
#   - dkms builds the packaged source against each installed kernel's
#     headers, in a private DKMS tree (the host's /var/lib/dkms is not
#     touched), and refuses a kernel outside the declared range.
# Prints KTAP. Usage: selftests/host_install.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n $*"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n $*"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else nok "$name"; fi; }
log() { echo "# $*"; }

work=$(mktemp -d /tmp/mercury-host-install.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The kernel the Makefile installs for (scripts/kver.sh), and every
# kernel with headers (make deb and DKMS build for each).
KVER=${KVER:-$(scripts/kver.sh)}
KVERS=$(scripts/kver.sh --headers)
TC_LIB_DIR=$(strings /usr/sbin/tc | grep -m1 -E '^/usr/lib[^ ]*/tc/?$' | sed 's|/$||')
PYVER=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
log "kernel $KVER (headers of: $(echo $KVERS)), tc plugins in $TC_LIB_DIR"

# layout PREFIX LIBDIR PYTHONDIR: the documented list, expanded.
layout() {
	sed -n '/<!-- install-layout: begin -->/,/<!-- install-layout: end -->/p' \
		Documentation/install.md | sed -n 's/^    \(\/\|\$\)/\1/p' |
		sed -e "s|\$KVER|$KVER|g" -e "s|\$TC_LIB_DIR|$TC_LIB_DIR|g" \
		    -e "s|\$LIBDIR|$2|g" -e "s|\$PYTHONDIR|$3|g" -e "s|\$PREFIX|$1|g"
}

# install_case NAME PREFIX LIBDIR PYTHONDIR [MAKE ARGS...]
install_case() {
	local name=$1 prefix=$2 libdir=$3 pydir=$4 d=$work/$1 f missing="" extra
	shift 4
	if ! make -s install DESTDIR="$d" PREFIX="$prefix" "$@" > "$work/$name.log" 2>&1; then
		nok "$name: make install DESTDIR=... exits 0"
		tail -n 20 "$work/$name.log" | sed 's/^/# /'
		return
	fi
	ok "$name: make install DESTDIR=... exits 0"
	grep -E 'skipped|depmod' "$work/$name.log" | sed 's/^/# /'
	layout "$prefix" "$libdir" "$pydir" > "$work/$name.expected"
	[ -s "$work/$name.expected" ] || { nok "$name: documented layout found"; return; }
	while read -r f; do
		[ -e "$d$f" ] || missing="$missing $f"
	done < "$work/$name.expected"
	if [ -z "$missing" ]; then
		ok "$name: all $(wc -l < "$work/$name.expected") documented files installed"
	else
		nok "$name: documented files installed (missing:$missing)"
	fi
	# Nothing installed that the documentation does not list.
	extra=$(cd "$d" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort |
		comm -23 - <(sort "$work/$name.expected"))
	if [ -z "$extra" ]; then ok "$name: no undocumented file installed"
	else nok "$name: no undocumented file installed (extra: $(echo $extra))"; fi

	check "$name: mercury.pc points at $libdir" \
		test "$(PKG_CONFIG_PATH=$d$libdir/pkgconfig pkg-config --variable=libdir mercury)" = "$libdir"
	check "$name: mercury-run looks for its shim in $libdir/mercury" \
		grep -qa "$libdir/mercury" "$d$prefix/bin/mercury-run"
	check "$name: unit runs $prefix/sbin/mercury-apply" \
		grep -q "^ExecStart=$prefix/sbin/mercury-apply %I$" "$d$prefix/lib/systemd/system/mercury@.service"

	# depmod on the staged module (a copy, with the kernel's own tables)
	# must map both names the kernel may request to it.
	local m=$work/$name-depmod
	mkdir -p "$m/lib/modules/$KVER"
	cp /lib/modules/"$KVER"/modules.order /lib/modules/"$KVER"/modules.builtin* "$m/lib/modules/$KVER/" 2>/dev/null
	cp -r "$d/lib/modules/$KVER/extra" "$m/lib/modules/$KVER/"
	if depmod -b "$m" "$KVER" 2>"$work/$name.depmod" &&
	   grep -q '^alias net-sch-mercury sch_mercury$' "$m/lib/modules/$KVER/modules.alias" &&
	   grep -q '^extra/sch_mercury.ko:' "$m/lib/modules/$KVER/modules.dep"; then
		ok "$name: depmod maps sch_mercury and net-sch-mercury to extra/sch_mercury.ko"
	else
		nok "$name: depmod maps sch_mercury and net-sch-mercury to extra/sch_mercury.ko"
		sed 's/^/# /' "$work/$name.depmod"
	fi

	make -s uninstall DESTDIR="$d" PREFIX="$prefix" "$@" > "$work/$name.un.log" 2>&1
	left=$(cd "$d" && find . \( -type f -o -type l \) | sed 's|^\.||')
	if [ -z "$left" ]; then ok "$name: make uninstall removes every file"
	else nok "$name: make uninstall removes every file (left: $(echo $left))"; fi
}

install_case local /usr/local /usr/local/lib "/usr/local/lib/python$PYVER/dist-packages"
install_case usr /usr /usr/lib/x86_64-linux-gnu /usr/lib/python3/dist-packages \
	LIBDIR=/usr/lib/x86_64-linux-gnu

# An operator's configuration survives install and uninstall.
d=$work/conf
mkdir -p "$d/etc/mercury"
echo "eth0 levels 8" > "$d/etc/mercury/mercury.conf"
make -s install-boot DESTDIR="$d" > /dev/null 2>&1
make -s uninstall DESTDIR="$d" > /dev/null 2>&1
check "an edited /etc/mercury/mercury.conf is kept by install and uninstall" \
	test "$(cat "$d/etc/mercury/mercury.conf" 2>/dev/null)" = "eth0 levels 8"

# The unit, with ExecStart pointing at a staged copy of the applier.
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$work/unit"
	sed "s|@SBINDIR@|$top/scripts|g" packaging/mercury@.service > "$work/unit/mercury@.service"
	if out=$(systemd-analyze verify "$work/unit/mercury@eth0.service" 2>&1) && [ -z "$out" ]; then
		ok "systemd-analyze verify mercury@eth0.service"
	else
		nok "systemd-analyze verify mercury@eth0.service"
		echo "$out" | sed 's/^/# /'
	fi
else
	ok "systemd-analyze verify mercury@eth0.service # SKIP no systemd-analyze"
fi

# The applier on the host (no module here): errors are clear and exit 1/2.
printf 'lo levels 8\n' > "$work/a.conf"
out=$(scripts/mercury-apply -c "$work/a.conf" 2>&1); rc=$?
check "mercury-apply without the module: exit 1, names the module" \
	test $rc = 1 -a -n "$(echo "$out" | grep 'kernel module sch_mercury is not installed')"
out=$(scripts/mercury-apply -c "$work/none.conf" 2>&1); rc=$?
check "mercury-apply with no configuration file: exit 1" \
	test $rc = 1 -a -n "$(echo "$out" | grep 'cannot read')"
scripts/mercury-apply --bogus >/dev/null 2>&1; rc=$?
check "mercury-apply usage error: exit 2" test $rc = 2
printf 'lo levels\n' > "$work/b.conf"
out=$(scripts/mercury-apply -c "$work/b.conf" 2>&1); rc=$?
check "mercury-apply odd option words: exit 1" \
	test $rc = 1 -a -n "$(echo "$out" | grep 'KEY VALUE pairs')"

# Packages.
if make -s deb > "$work/deb.log" 2>&1; then
	ok "make deb"
else
	nok "make deb"
	tail -n 25 "$work/deb.log" | sed 's/^/# /'
fi
dkms_deb=$(ls out/deb/mercury-dkms_*_all.deb 2>/dev/null)
tools_deb=$(ls out/deb/mercury-tools_*_amd64.deb 2>/dev/null)
ver=$(cat VERSION)

# deb_has DEB PATH...: dpkg-deb -c lists every PATH.
deb_has() {
	local deb=$1 p miss=""
	shift
	[ -f "$deb" ] || return 1
	dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\.||; s|/$||' > "$work/list"
	for p in "$@"; do grep -qxF "$p" "$work/list" || miss="$miss $p"; done
	[ -z "$miss" ] || echo "# missing in $(basename "$deb"):$miss"
	[ -z "$miss" ]
}
check "mercury-dkms holds the DKMS source tree" deb_has "$dkms_deb" \
	/usr/src/mercury-$ver/dkms.conf /usr/src/mercury-$ver/Kbuild \
	/usr/src/mercury-$ver/kmod/sch_mercury.c /usr/src/mercury-$ver/kmod/compat.h \
	/usr/src/mercury-$ver/include/uapi/linux/mercury.h
check "mercury-dkms depends on dkms" \
	grep -q '^dkms' <<< "$(dpkg-deb -f "$dkms_deb" Depends 2>/dev/null)"
# dh_compress gzips every man page, whatever its section
layout /usr /usr/lib/x86_64-linux-gnu /usr/lib/python3/dist-packages |
	grep -v '^/lib/modules' | sed 's|/usr/share/doc/mercury/|/usr/share/doc/mercury-tools/|; s|/share/man/\(.*\)$|/share/man/\1.gz|' \
	> "$work/tools.expected"
# shellcheck disable=SC2046
check "mercury-tools holds every documented userspace file" deb_has "$tools_deb" $(cat "$work/tools.expected")
ipv=$(dpkg-query -W -f='${Version}' iproute2)
deps=$(dpkg-deb -f "$tools_deb" Depends 2>/dev/null)
log "mercury-tools Depends: $deps"
check "mercury-tools depends on exactly iproute2 (= $ipv), libjson-c, kmod" \
	test -n "$(echo "$deps" | grep -F "iproute2 (= $ipv)" | grep libjson-c | grep kmod)"
check "mercury-tools marks /etc/mercury/mercury.conf as a conffile" \
	test "$(dpkg-deb --ctrl-tarfile "$tools_deb" 2>/dev/null | tar -xO ./conffiles)" = /etc/mercury/mercury.conf
for k in $KVERS; do
	mod_deb=$(ls out/deb/mercury-modules-"$k"_*_amd64.deb 2>/dev/null)
	if deb_has "$mod_deb" /lib/modules/"$k"/extra/sch_mercury.ko &&
	   dpkg-deb --fsys-tarfile "$mod_deb" |
		tar -xO ./lib/modules/"$k"/extra/sch_mercury.ko > "$work/mod-$k.ko" &&
	   [ "$(modinfo -F vermagic "$work/mod-$k.ko" | awk '{ print $1 }')" = "$k" ]; then
		ok "mercury-modules-$k holds the module built for $k"
	else
		nok "mercury-modules-$k holds the module built for $k"
	fi
done
check "the packaged dkms.conf carries version $ver" \
	test "$(dpkg-deb --fsys-tarfile "$dkms_deb" 2>/dev/null | tar -xO ./usr/src/mercury-$ver/dkms.conf | sed -n 's/^PACKAGE_VERSION=//p')" = "\"$ver\""

# DKMS against the installed headers, from the packaged source, in a
# private tree.
dk=$work/dkms
mkdir -p "$dk/x" "$dk/tree" "$dk/inst"
dkopt=(--dkmstree "$dk/tree" --sourcetree "$dk/x/usr/src" --installtree "$dk/inst")
dkms_added=0
[ -f "$dkms_deb" ] && dpkg-deb -x "$dkms_deb" "$dk/x" &&
	dkms "${dkopt[@]}" add -m mercury -v "$ver" > "$work/dkms.log" 2>&1 && dkms_added=1
# DKMS compresses the module as the kernel's own are (6.12: sch_mercury.ko.xz).
for k in $KVERS; do
	if [ $dkms_added = 1 ] &&
	   dkms "${dkopt[@]}" build -m mercury -v "$ver" -k "$k" > "$work/dkms-$k.log" 2>&1 &&
	   ko=$(ls "$dk/tree/mercury/$ver/$k/x86_64/module/"sch_mercury.ko* 2>/dev/null | head -n 1) &&
	   [ "$(modinfo -F vermagic "$ko" 2>/dev/null | awk '{ print $1 }')" = "$k" ]; then
		ok "dkms build of the packaged source against the $k headers"
	else
		nok "dkms build of the packaged source against the $k headers"
		tail -n 20 "$work/dkms.log" "$work/dkms-$k.log" 2>/dev/null | sed 's/^/# /'
	fi
done
out=$(dkms "${dkopt[@]}" build -m mercury -v "$ver" -k 5.10.0-30-amd64 2>&1); rc=$?
if [ $rc = 77 ] && [[ $out == *"BUILD_EXCLUSIVE directive which does not match this kernel"* ]]; then
	ok "dkms refuses kernel 5.10 (outside 6.1+) with exit 77 and the BUILD_EXCLUSIVE message"
else
	nok "dkms refuses kernel 5.10 (outside 6.1+) with exit 77 and the BUILD_EXCLUSIVE message (rc $rc)"
	echo "$out" | sed 's/^/# /'
fi
# The declared range itself, on version strings.
range=$(sed -n 's/^BUILD_EXCLUSIVE_KERNEL="\(.*\)"$/\1/p' dkms.conf)
bad=""
for k in 6.1.0-57-amd64 6.9.7 6.10.1 6.12.0-1-amd64 6.12.118+deb12-amd64 6.18.44 7.0.0 10.1.0; do
	[[ $k =~ $range ]] || bad="$bad accepted:$k"
done
for k in 5.10.0-30-amd64 6.0.12 4.19.0 5.19.17 3.16.0; do
	[[ $k =~ $range ]] && bad="$bad refused:$k"
done
check "BUILD_EXCLUSIVE_KERNEL accepts 6.1+ and refuses older kernels${bad:+ (wrong:$bad)}" test -z "$bad"

echo "1..$n"
echo "# $((n - fails)) passed, $fails failed"
[ $fails = 0 ]
