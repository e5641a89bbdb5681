#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Options: every option round-trips through tc; every bad value is
# rejected with exit code 2 and the kernel's message (the policy's for a
# value out of range, which points at the attribute; the qdisc's own for
# a conflict between options), nothing changed. Every allowed level is a
# class.
#
#   +---- ns mrc-s ----+
#   | dummy0: mercury  |
#   +------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
NS_S=mrc-o-$$
trap '$IP netns del $NS_S 2>/dev/null' EXIT
$IP netns add $NS_S && $IP -n $NS_S link add dummy0 type dummy && $IP -n $NS_S link set dummy0 up ||
	{ echo "not ok 1 setup"; exit 1; }

show() { tcs qdisc show dev dummy0; }
showj() { tcs -j qdisc show dev dummy0; }

# defaults
tcs qdisc add dev dummy0 root handle 1: mercury
ktap_check "defaults shown" bash -c "$(declare -f); TC=$TC IP=$IP NS_S=$NS_S; show | grep -q 'levels 1024 tag mark shift 0 mask 0xffff untagged first untagged_share 0 flow_order on flows 1024 limit 10000 memory_limit 32Mb quantum [0-9]*b bypass on flow_limit 0'"
ktap_check "defaults in JSON with raw numbers" bash -c "$(declare -f); TC=$TC IP=$IP NS_S=$NS_S; showj | python3 -c '
import json,sys
o = json.load(sys.stdin)[0][\"options\"]
assert o == {\"levels\": 1024, \"tag\": \"mark\", \"shift\": 0, \"mask\": 65535,
  \"untagged\": \"first\", \"untagged_share\": 0, \"flow_order\": True, \"flows\": 1024,
  \"limit\": 10000, \"memory_limit\": 33554432, \"quantum\": o[\"quantum\"],
  \"bypass\": True, \"flow_limit\": 0}, o
assert o[\"quantum\"] >= 3028, o'"
tcs qdisc del dev dummy0 root

# every option at once, and the printed form parses back to the same state
all="levels 4096 tag priority shift 4 mask 0x1fff untagged last untagged_share 15 flow_order off flows 2048 limit 777 memory_limit 33554500 quantum 9000 bypass off flow_limit 12"
ktap_check "add with every option" tcs qdisc add dev dummy0 root handle 1: mercury $all
printed=$(show | sed -n 's/.*mercury 1: root refcnt [0-9]* //p')
log "printed: $printed"
before=$(showj)
ktap_check "printed options parse back unchanged" tcs qdisc change dev dummy0 root handle 1: mercury $printed
ktap_check "state identical after round trip" test "$before" = "$(showj)"
ktap_check "tc -s -j has mercury's statistics" bash -c "$(declare -f); TC=$TC IP=$IP NS_S=$NS_S; tcs -s -j qdisc show dev dummy0 | python3 -c '
import json,sys
q = json.load(sys.stdin)[0]
x = q.get(\"xstats\", q)
for k in (\"flows\",\"levels_active\",\"most_urgent\",\"memory_usage\",\"drops_limit\",\"drops_memory\",\"inversions_avoided\",\"untagged_packets\",\"untagged_bytes\",\"share_forced\",\"drops_flows\",\"drops_flow_limit\"):
    assert isinstance(x[k], int), k'"
tcs qdisc del dev dummy0 root

# bad values: tc exits 2 with the kernel's message, nothing changes
tcs qdisc add dev dummy0 root handle 1: mercury levels 100 untagged last
before=$(showj)
# bad NAME RC MESSAGE OPTIONS...: the kernel's rejections exit 2, tc's own
# parser exits 1 (255 for a missing value).
bad() {
	local name=$1 want_rc=$2 want=$3 err
	shift 3
	err=$(tcs qdisc change dev dummy0 root handle 1: mercury "$@" 2>&1)
	local rc=$?
	if [ $rc = "$want_rc" ] && echo "$err" | grep -q -- "$want" && [ "$(showj)" = "$before" ]; then
		ktap_ok "rejects $name"
	else
		log "$*: rc $rc, said: $err"
		ktap_fail "rejects $name"
	fi
}
bad "levels 0" 2 "integer out of range" levels 0
bad "levels 65535 (one more than the class minors hold)" 2 "integer out of range" levels 65535 mask 0x1ffff
bad "levels above mask" 2 "sch_mercury: levels exceeds the largest tag mask can give" levels 300 mask 0xff
bad "levels not a number" 1 "levels" levels many
bad "tag foo" 1 "tag" tag foo
bad "shift 32" 2 "integer out of range" shift 32
bad "shift 300" 1 "shift" shift 300
bad "mask 0" 2 "integer out of range" mask 0
bad "untagged middle" 1 "untagged" untagged middle
bad "untagged_share 91" 2 "integer out of range" untagged_share 91
bad "untagged_share with untagged first" 2 "sch_mercury: untagged_share needs untagged last" untagged first untagged_share 10
bad "flow_order maybe" 1 "flow_order" flow_order maybe
bad "flows 0" 2 "integer out of range" flows 0
bad "flows 65537" 2 "integer out of range" flows 65537
bad "limit 0" 2 "integer out of range" limit 0
bad "memory_limit 0" 2 "integer out of range" memory_limit 0
bad "memory_limit 3gb (would wrap near 4 GiB)" 2 "integer out of range" memory_limit 3gb
bad "memory_limit 4294967295" 2 "integer out of range" memory_limit 4294967295
bad "tag dscp shift 6" 2 "sch_mercury: shift and mask leave no DSCP bit for the tag" tag dscp shift 6
bad "memory_limit junk" 1 "memory_limit" memory_limit 12zz
bad "quantum 100" 2 "integer out of range" quantum 100
bad "quantum 2mb" 2 "integer out of range" quantum 2mb
bad "bypass sometimes" 1 "bypass" bypass sometimes
bad "flow_limit -1" 1 "flow_limit" flow_limit -1
bad "unknown option" 1 "unknown option 'colour'" colour blue
bad "missing value" 255 "not complete" levels
tcs qdisc del dev dummy0 root

# bad values on add create nothing
err=$(tcs qdisc add dev dummy0 root handle 1: mercury levels 0 2>&1)
rc=$?
ktap_check "bad add fails with 2 and creates nothing" test $rc = 2 -a -z "$(show | grep mercury)"

# bypass: dummy0 is never busy, so with bypass on (the default) every
# packet finds the qdisc empty and the core sends it at once, counted by
# the qdisc but not by its level; with bypass off every packet is queued.
# 40 UDP packets at priority 3 (tag 3), from one socket
send40() { $IP netns exec $NS_S $TRAFFIC send --dst 10.77.0.2 --source priority --burst u:3:40; }
$IP netns exec $NS_S sysctl -qw net.ipv6.conf.dummy0.disable_ipv6=1
$IP -n $NS_S addr add 10.77.0.1/24 dev dummy0
tcs qdisc add dev dummy0 root handle 1: mercury levels 8 tag priority
send40
# a level that never counted a packet has no class ("none")
log "bypass on: qdisc sent $(qdisc_stat dummy0 1: packets), level 3 sent $(class_stat packets 3 dummy0)"
ktap_check "bypass on: an idle root sends packets past the queue" \
	test "$(qdisc_stat dummy0 1: packets)" = 40 -a "$(class_stat packets 3 dummy0)" = none
tcs qdisc change dev dummy0 root handle 1: mercury bypass off
send40
log "bypass off: qdisc sent $(qdisc_stat dummy0 1: packets), level 3 sent $(class_stat packets 3 dummy0)"
ktap_check "bypass off: every packet is queued and counted by its level" \
	test "$(qdisc_stat dummy0 1: packets)" = 80 -a "$(class_stat packets 3 dummy0)" = 40
tcs qdisc del dev dummy0 root

# A class dump split over many netlink messages lists every level once,
# even when a level before the cursor gains its class between messages:
# 2000 levels (tags 2..2001) each hold a packet behind a stalled tbf,
# and tag 1 gets one after the first message was read.
tcs qdisc add dev dummy0 root handle 1: tbf rate 8bit burst 3000 limit 10000000 &&
tcs qdisc add dev dummy0 parent 1:1 handle 10: mercury levels 4096
# shellcheck disable=SC2046
$IP netns exec $NS_S $TRAFFIC send --dst 10.77.0.2 --size 100 \
	$(for t in $(seq 2 2001); do echo "--burst l:$t:1"; done)
$IP netns exec $NS_S $TRAFFIC classes --dev dummy0 --parent 10: \
	--inject-after 1 --inject-tag 1 --dst 10.77.0.2 > /tmp/classes.$$.json
ktap_check "split class dump: every level listed once, in order, none repeated" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
m = [x for x in d["minors"] if x != 1]
dups = sorted({x for x in m if m.count(x) > 1})
print("# %d batches, %d classes, repeated %s, missing %s" % (d["batches"], len(d["minors"]), dups[:10],
      sorted(set(range(2, 2002)) - set(m))[:10]))
sys.exit(0 if d["batches"] > 3 and m == list(range(2, 2002)) else 1)' /tmp/classes.$$.json
ktap_check "split class dump: tc lists the 2001 levels" \
	test "$(tcs class show dev dummy0 | grep -c '^class mercury 10:')" = 2001
rm -f /tmp/classes.$$.json
tcs qdisc del dev dummy0 root

# Every allowed level is a class: tag N is minor N up to the largest
# level count, the untagged class is ffff, in either place; tags above
# levels count in the least urgent level's class.
# minor_stat MINOR: "PACKETS TAG" of class 1:MINOR, or "none"
minor_stat() {
	tcs -s class show dev dummy0 | awk -v h="1:$1" '
		/^class / { m = $3 == h; next }
		m && $1 == "Sent" { p = $4; next }
		m && $1 == "tag" { print p, $2; found = 1; exit }
		END { if (!found) print "none" }'
}
for place in first last; do
	tcs qdisc add dev dummy0 root handle 1: mercury levels 65534 mask 0x1ffff \
		tag priority untagged $place bypass off
	$IP netns exec $NS_S $TRAFFIC send --dst 10.77.0.2 --source priority \
		--burst a:65534:3 --burst b:65533:2 --burst c:0:1 --burst d:1:1 \
		--burst e:65535:1 --burst f:70000:1
	got="$(minor_stat fffe)/$(minor_stat fffd)/$(minor_stat 1)/$(minor_stat ffff)"
	log "untagged $place: classes fffe/fffd/1/ffff: $got"
	ktap_check "levels 65534, untagged $place: tags 65534..70000, 65533, 1, 0 are classes 1:fffe, 1:fffd, 1:1, 1:ffff" \
		test "$got" = "5 65534/2 65533/1 1/1 0"
	tcs qdisc del dev dummy0 root
done

# largest configuration
ktap_check "memory_limit 2gb (the maximum)" bash -c "$(declare -f); TC=$TC IP=$IP NS_S=$NS_S; tcs qdisc add dev dummy0 root handle 1: mercury memory_limit 2gb && show | grep -q 'memory_limit 2048Mb' && tcs qdisc del dev dummy0 root"
ktap_check "levels 65534 flows 65536" tcs qdisc add dev dummy0 root handle 1: mercury levels 65534 flows 65536
ktap_check "help prints usage" bash -c "$(declare -f); TC=$TC IP=$IP NS_S=$NS_S; tcs qdisc add dev dummy0 root mercury help 2>&1 | grep -q Usage"
tcs qdisc del dev dummy0 root

ktap_finish
