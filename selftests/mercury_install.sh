#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages "make deb" built (out/deb/) into the guest,
# load the module by its alias, and run the boot-time applier.
#
#   guest root (host's, read-only 9p)
#     + overlayfs on /usr /etc /var/lib /var/log /var/cache, upper in /tmp
#       dpkg -i mercury-modules-$KVER mercury-tools
#       (with out/deb/test-dkms: mercury-dkms instead, compiled here)
#   +----------- ns mrc-s -----------+      +-- ns mrc-r --+
#   | veth0: root qdisc set by       |------| veth1        |
#   |   /usr/sbin/mercury-apply      |      |              |
#   |   (mercuryctl apply)           |      |              |
#   +--------------------------------+      +--------------+
#
# The installed tc plugin is the one used (TC_LIB_DIR unset). At the end
# the namespaces go, the module is unloaded (later scripts insmod the
# tree's build) and the overlays are unmounted.
source "$(dirname "$0")/lib.sh"
unset TC_LIB_DIR

DEBS=$MERCURY_ROOT/out/deb
OVL=/tmp/mercury-ovl
OVL_DIRS="/usr /etc /var/lib /var/log /var/cache"
KVER=$(uname -r)
CONF=/tmp/mercury-install.conf
mounted=()

cleanup() {
	cleanup_pair
	rmmod sch_mercury 2>/dev/null
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" ||
			echo "# cannot unmount ${mounted[i]}"
	done
	rm -rf "$OVL"
}
trap cleanup EXIT

tools_deb=$(ls "$DEBS"/mercury-tools_*_amd64.deb 2>/dev/null | tail -n 1)
# The module: prebuilt for this kernel by default; when out/deb/test-dkms
# exists (touch it on the host), the mercury-dkms package, which compiles
# it here: about ten minutes under emulation, so not in the default run
# (the DKMS build itself is checked on the host by host_install.sh).
if [ -e "$DEBS/test-dkms" ]; then
	mod_deb=$(ls "$DEBS"/mercury-dkms_*_all.deb 2>/dev/null | tail -n 1)
	mod_dir=updates/dkms
else
	mod_deb=$(ls "$DEBS"/mercury-modules-"$KVER"_*_amd64.deb 2>/dev/null | tail -n 1)
	mod_dir=extra
fi
if [ -z "$mod_deb" ] || [ -z "$tools_deb" ]; then
	ktap_fail "packages for kernel $KVER found in out/deb (run 'make deb' on the host first: this test builds nothing)"
	ktap_finish
fi
T0=$(date +%s)
ktap_ok "packages found: $(basename "$mod_deb") $(basename "$tools_deb")"

# A previous script may have loaded the tree's module; alias loading is
# only observable from an unloaded state.
if [ -d /sys/module/sch_mercury ] && ! rmmod sch_mercury; then
	ktap_fail "sch_mercury unloaded before the test"
	ktap_finish
fi

ovl_ok=1
for d in $OVL_DIRS; do
	mkdir -p "$OVL$d/u" "$OVL$d/w"
	if mount -t overlay overlay -o "lowerdir=$d,upperdir=$OVL$d/u,workdir=$OVL$d/w" "$d"; then
		mounted+=("$d")
	else
		ovl_ok=0
	fi
done
if [ $ovl_ok = 1 ]; then ktap_ok "writable overlay over $OVL_DIRS"
else ktap_fail "writable overlay over $OVL_DIRS"; ktap_finish; fi

# Start from a guest where Mercury was never installed, whatever the
# host did (these removals only touch the overlay).
rm -rf /var/lib/dkms/mercury /usr/src/mercury-* /usr/lib/x86_64-linux-gnu/tc/q_mercury.so \
	/etc/mercury
for f in /usr/lib/modules/"$KVER"/{extra,updates/dkms}/sch_mercury.ko{,.xz,.zst,.gz}; do
	[ -e "$f" ] || continue
	rm -f "$f"
	stale=1
done
# depmod over 9p at emulated speed takes a while: only when needed.
[ -z "${stale:-}" ] || depmod -a "$KVER"
# dkms and dpkg use <(...), which needs /dev/fd; the guest's devtmpfs
# has no such link.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
export DEBIAN_FRONTEND=noninteractive
# man-db's trigger would index every page at emulated speed.
rm -f /var/lib/man-db/auto-update

setup_pair || { ktap_fail "netns setup"; ktap_finish; }

# The applier, from the tree, before anything is installed: no module.
echo "veth0 levels 16" > $CONF
out=$($IP netns exec $NS_S "$MERCURY_ROOT/scripts/mercury-apply" -c $CONF 2>&1)
rc=$?
log "before install: rc $rc: $out"
if [ $rc = 1 ] && [[ $out == *"kernel module sch_mercury is not installed"* ]]; then
	ktap_ok "applier without the module: clear error, exit 1"
else
	ktap_fail "applier without the module: clear error, exit 1"
fi

t0=$(date +%s)
dpkg -i "$mod_deb" "$tools_deb" > /tmp/dpkg.log 2>&1
rc=$?
sed 's/^/# dpkg: /' /tmp/dpkg.log | tail -n 25
log "dpkg -i took $(($(date +%s) - t0)) s"
modfile=$(modinfo -k "$KVER" -F filename sch_mercury 2>/dev/null)
# (DKMS compresses it as the kernel's own modules are: .ko.xz on 6.12)
if [ $rc = 0 ] && [[ $modfile == /lib/modules/$KVER/$mod_dir/sch_mercury.ko* ||
		    $modfile == /usr/lib/modules/$KVER/$mod_dir/sch_mercury.ko* ]]; then
	ktap_ok "dpkg -i $(basename "$mod_deb") mercury-tools; depmod knows sch_mercury for $KVER"
else
	ktap_fail "dpkg -i $(basename "$mod_deb") mercury-tools; depmod knows sch_mercury for $KVER (rc $rc, module '$modfile')"
	ktap_finish
fi

missing=""
for f in /usr/lib/x86_64-linux-gnu/tc/q_mercury.so /usr/sbin/mercury-apply \
	 /usr/lib/systemd/system/mercury@.service /etc/mercury/mercury.conf \
	 /usr/lib/x86_64-linux-gnu/libmercury.so.0 /usr/include/mercury/mercury.h \
	 /usr/lib/x86_64-linux-gnu/pkgconfig/mercury.pc \
	 /usr/lib/python3/dist-packages/mercury/__init__.py /usr/bin/mercury-run; do
	[ -e "$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then ktap_ok "packaged files in place"
else ktap_fail "packaged files in place (missing:$missing)"; fi

# Load by alias: no insmod, no modprobe; tc's request reaches modprobe,
# which finds the module through depmod's alias table.
if [ ! -d /sys/module/sch_mercury ] &&
   tcs qdisc add dev veth0 root handle 1: mercury levels 8 &&
   [ -d /sys/module/sch_mercury ] &&
   [ "$(tcs -j qdisc show dev veth0 root | sed -n 's/.*"kind":"\([^"]*\)".*/\1/p')" = mercury ]; then
	ktap_ok "tc qdisc add ... mercury loads the installed module by alias"
else
	ktap_fail "tc qdisc add ... mercury loads the installed module by alias"
fi
tcs qdisc del dev veth0 root 2>/dev/null

# The applier as installed: mercury-apply runs mercuryctl apply, which
# talks netlink itself and says on stdout what it sends.
apply() {	# apply ARGS...: run the installed applier in $NS_S; sets out, rc
	out=$($IP netns exec $NS_S /usr/sbin/mercury-apply "$@" 2>&1)
	rc=$?
	log "mercury-apply $*: rc $rc (t=$(($(date +%s) - T0)) s)"
	echo "$out" | sed 's/^/#   /'
}
# opt KEY: an option of veth0's root qdisc as tc -j prints it (the
# options object is flat); "kind" gives the kind.
opt() {
	local j
	j=$(tcs -j qdisc show dev veth0 root)
	if [ "$1" = kind ]; then
		echo "$j" | sed -n 's/.*"kind":"\([^"]*\)".*/\1/p'
	else
		echo "$j" | sed -n 's/.*"options":{\([^}]*\)}.*/\1/p' | tr ',' '\n' |
			sed -n "s/^\"$1\"://p"
	fi
}

echo "veth0  levels 4096 untagged last untagged_share 5  # the test's line" > $CONF
apply -c $CONF
if [ $rc = 0 ] && [ "$(opt kind)" = mercury ] && [ "$(opt levels)" = 4096 ] &&
   [ "$(opt untagged)" = '"last"' ] && [ "$(opt untagged_share)" = 5 ] &&
   [[ $out == *"veth0: replacing root qdisc noqueue with mercury levels 4096 untagged last untagged_share 5"* ]] &&
   [[ $out == *"veth0: mercury applied"* ]]; then
	ktap_ok "first run applies mercury with the configured options"
else
	ktap_fail "first run applies mercury with the configured options"
fi

handle=$(tcs -j qdisc show dev veth0 root | sed -n 's/.*"handle":"\([^"]*\)".*/\1/p')
apply -c $CONF
if [ $rc = 0 ] && [[ $out == *"already in place"* ]] && [[ $out != *"applied"* ]] &&
   [ "$(tcs -j qdisc show dev veth0 root | sed -n 's/.*"handle":"\([^"]*\)".*/\1/p')" = "$handle" ]; then
	ktap_ok "second run changes nothing (the qdisc only read)"
else
	ktap_fail "second run changes nothing (the qdisc only read)"
fi

echo "veth0 levels 64 untagged last untagged_share 5 memory_limit 1.5m flow_order off" > $CONF
apply -c $CONF veth0
if [ $rc = 0 ] && [[ $out == *"levels 4096 -> 64; flow_order on -> off; memory_limit 32Mb -> 1536Kb"* ]] &&
   [ "$(opt levels)" = 64 ] &&
   [ "$(opt memory_limit)" = 1572864 ] && [ "$(opt flow_order)" = false ] &&
   [ "$(tcs -j qdisc show dev veth0 root | sed -n 's/.*"handle":"\([^"]*\)".*/\1/p')" = "$handle" ]; then
	ktap_ok "changed options are changed in place"
else
	ktap_fail "changed options are changed in place"
fi
apply -c $CONF veth0
if [ $rc = 0 ] && [[ $out == *"already in place"* ]] && [[ $out != *"applied"* ]]; then
	ktap_ok "sizes and booleans compare equal on the next run (1.5m = 1572864, off = false)"
else
	ktap_fail "sizes and booleans compare equal on the next run (1.5m = 1572864, off = false)"
fi

printf 'veth0 levels 64\nmrc-nodev0 levels 8\n' > $CONF
apply -c $CONF
if [ $rc = 1 ] && [[ $out == *"mrc-nodev0: no such network device"* ]] &&
   [[ $out == *"veth0: mercury already in place"* ]]; then
	ktap_ok "missing device: clear error, exit 1, the other interface still handled"
else
	ktap_fail "missing device: clear error, exit 1, the other interface still handled"
fi

echo "veth0 levels 64 colour blue" > $CONF
apply -c $CONF
if [ $rc = 1 ] && [[ $out == *"bad option 'colour blue'"* ]] && [ "$(opt levels)" = 64 ]; then
	ktap_ok "unknown option: clear error, exit 1, qdisc untouched"
else
	ktap_fail "unknown option: clear error, exit 1, qdisc untouched"
fi

echo "veth0 levels 0" > $CONF
apply -c $CONF
if [ $rc = 1 ] && [[ $out == *"bad option 'levels 0'"*"levels must be 1..65534"* ]] &&
   [ "$(opt levels)" = 64 ]; then
	ktap_ok "value out of range: named before anything is sent, exit 1, old qdisc kept"
else
	ktap_fail "value out of range: named before anything is sent, exit 1, old qdisc kept"
fi

apply --remove veth0
if [ $rc = 0 ] && [ "$(opt kind)" != mercury ]; then
	ktap_ok "mercury-apply --remove restores the default qdisc"
else
	ktap_fail "mercury-apply --remove restores the default qdisc"
fi

# dpkg -r is not run: its depmod costs two more minutes under emulation,
# and the overlay goes away at the end anyway.
ktap_finish
