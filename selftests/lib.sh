#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Shared helpers for Mercury's guest selftests (sourced, never run).
# KTAP output, namespaces, module loading, statistics from tc -j.

ksft_skip=4
TC=/usr/sbin/tc
IP=/usr/sbin/ip
MERCURY_ROOT=${MERCURY_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export TC_LIB_DIR=$MERCURY_ROOT/tc-plugin
TRAFFIC="python3 $MERCURY_ROOT/selftests/mercury_traffic.py"

_ktap_n=0
_ktap_fail=0

ktap_ok()   { _ktap_n=$((_ktap_n + 1)); echo "ok $_ktap_n $*"; }
ktap_fail() { _ktap_n=$((_ktap_n + 1)); _ktap_fail=$((_ktap_fail + 1)); echo "not ok $_ktap_n $*"; }
ktap_skip() { _ktap_n=$((_ktap_n + 1)); echo "ok $_ktap_n $* # SKIP"; }
# ktap_check NAME CMD...: ok when CMD succeeds; its output goes to the log.
ktap_check() {
	local name=$1
	shift
	if "$@"; then ktap_ok "$name"; else ktap_fail "$name"; fi
}
ktap_finish() {
	echo "1..$_ktap_n"
	[ $_ktap_fail -eq 0 ]
	exit $?
}
log() { echo "# $*"; }

# Load the module built in the tree (once per boot).
mercury_load() {
	grep -q '^sch_mercury ' /proc/modules && return 0
	insmod "$MERCURY_ROOT/sch_mercury.ko" ||
		{ echo "not ok 1 cannot load sch_mercury.ko"; exit 1; }
}

# Unique namespace names per test script run.
NS_S=mrc-s-$$
NS_R=mrc-r-$$
ADDR_S=10.199.0.1
ADDR_R=10.199.0.2

# Two namespaces joined by a veth pair; the sender's egress is the device
# under test. Optional: number of tx queues.
setup_pair() {
	local txq=${1:-1}
	$IP netns add $NS_S && $IP netns add $NS_R || return 1
	$IP netns exec $NS_S sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	$IP netns exec $NS_R sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	# Both ends get the queues: the receive side looks up the queue the
	# packet was sent on, and warns when its peer has fewer.
	$IP -n $NS_S link add veth0 numtxqueues "$txq" numrxqueues "$txq" \
		type veth peer name veth1 numtxqueues "$txq" numrxqueues "$txq" \
		netns $NS_R || return 1
	$IP -n $NS_S addr add $ADDR_S/24 dev veth0
	$IP -n $NS_R addr add $ADDR_R/24 dev veth1
	# no IPv6 router or neighbour solicitations in the measured queue
	$IP netns exec $NS_S sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	$IP netns exec $NS_R sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	$IP netns exec $NS_S sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	$IP -n $NS_S link set lo up
	$IP -n $NS_R link set lo up
	$IP -n $NS_S link set veth0 up
	$IP -n $NS_R link set veth1 up
	# veth hands each packet to the backlog of the CPU that dequeued it,
	# and either vCPU may dequeue; two backlogs then race to the socket
	# and reorder what the qdisc sent in order (pfifo too, measured).
	# Steer all of veth1's receive work to CPU 0 so that the receiver
	# records the order packets left the qdisc in.
	$IP netns exec $NS_R sh -c \
		'for f in /sys/class/net/veth1/queues/rx-*/rps_cpus; do echo 1 > "$f" || exit 1; done' ||
		return 1
	# No neighbour discovery packets in the measured queue.
	$IP -n $NS_S neigh replace $ADDR_R lladdr \
		"$($IP -n $NS_R -j link show veth1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')" \
		dev veth0 nud permanent
}

cleanup_pair() {
	$IP netns del $NS_S 2>/dev/null
	$IP netns del $NS_R 2>/dev/null
	true
}

tcs() { $IP netns exec $NS_S $TC "$@"; }

# nobody_tree PATH...: copy PATHs (relative to the project root, symlinks
# followed) into a fresh directory everyone may read, and print it. The
# tests that drop to nobody run these copies: the tree itself may sit
# where only root may enter, as a clone in /root does.
nobody_tree() {
	local d
	d=$(mktemp -d /tmp/nobody.XXXXXX) && chmod 755 "$d" || return 1
	(cd "$MERCURY_ROOT" && cp -rL --parents "$@" "$d") && chmod -R a+rX "$d" ||
		{ rm -rf "$d"; return 1; }
	echo "$d"
}

# qdisc_stat DEV HANDLE KEY: a number from tc -j -s qdisc show (top level
# or inside "xstats").
qdisc_stat() {
	tcs -j -s qdisc show dev "$1" | python3 -c '
import json, sys
h, k = sys.argv[1], sys.argv[2]
for q in json.load(sys.stdin):
    if q["handle"] == h:
        v = q.get(k, q.get("xstats", {}).get(k))
        print(v)
        break
else:
    print("none")' "$2" "$3"
}

# class_stat KEY TAG [DEV]: a per-level counter (packets, bytes, drops) from
# tc -s class show on DEV (veth0); "none" when the level has no class (the
# qdisc lists only levels that counted something). tc 6.1 prints classes as
# text only, even with -j.
class_stat() {
	tcs -s class show dev "${3:-veth0}" | python3 -c '
import re, sys
k, tag = sys.argv[1], int(sys.argv[2])
for block in re.split(r"\n(?=class )", sys.stdin.read()):
    m = re.search(r"^class mercury .*Sent (\d+) bytes (\d+) pkt \(dropped (\d+).*\n +tag (\d+) ",
                  block, re.S)
    if m and int(m.group(4)) == tag:
        print({"bytes": m.group(1), "packets": m.group(2), "drops": m.group(3)}[k])
        break
else:
    print("none")' "$1" "$2"
}

# wait_backlog_zero DEV HANDLE [SECONDS]: poll until the queue drained.
wait_backlog_zero() {
	local i
	for ((i = 0; i < ${3:-60} * 5; i++)); do
		[ "$(qdisc_stat "$1" "$2" qlen)" = 0 ] && return 0
		sleep 0.2
	done
	return 1
}

# run_traffic REC COUNT SEND-ARGS...: a receiver in $NS_R records up to
# COUNT packets into REC while a sender in $NS_S sends SEND-ARGS.
run_traffic() {
	local rec=$1 count=$2 i pid
	shift 2
	rm -f "$rec" "$rec.ready"
	$IP netns exec $NS_R $TRAFFIC recv --count "$count" --out "$rec" \
		--ready "$rec.ready" --idle 8 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		[ -e "$rec.ready" ] && break
		sleep 0.1
	done
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R "$@"
	wait $pid
}

check() { $TRAFFIC check "$@"; }

# The link the tests slow down: tbf at RATE on the sender's veth0, with
# the qdisc under test (the rest of the arguments) as its child 10:.
setup_tbf() {
	local rate=$1
	shift
	tcs qdisc replace dev veth0 root handle 1: tbf rate "$rate" burst 3000 limit 10000000 &&
	tcs qdisc add dev veth0 parent 1:1 handle 10: "$@"
}

teardown_qdisc() { tcs qdisc del dev veth0 root 2>/dev/null; true; }

# drained_with DEV HANDLE N: the queue drained and sent exactly N packets.
drained_with() {
	wait_backlog_zero "$1" "$2" && [ "$(qdisc_stat "$1" "$2" packets)" = "$3" ]
}

# skb_objects: skbs allocated now (skbuff_head_cache active objects, plus
# skbuff_fclone_cache's, TCP's clones, where SLUB keeps it apart: the debug
# kernel boots with slab_nomerge), after SLUB flushed its per-CPU slabs:
# without the flush, the free objects those slabs hold count as active and
# the number wanders by a few slabs' worth. Prints nothing and fails when
# /proc/slabinfo has no skbuff_head_cache.
skb_objects() {
	local c
	for c in skbuff_head_cache skbuff_fclone_cache; do
		echo 1 > /sys/kernel/slab/$c/shrink 2>/dev/null
	done
	awk '$1 == "skbuff_head_cache" { h = 1 }
	     $1 == "skbuff_head_cache" || $1 == "skbuff_fclone_cache" { s += $2 }
	     END { if (h) print s; exit !h }' /proc/slabinfo
}

# pin_reverse_neigh: the receiver's permanent neighbour entry for the
# sender too, so that no ARP reply (an untagged packet) enters the queue
# under test: runs of minutes outlive the entry the receiver learnt.
pin_reverse_neigh() {
	$IP -n $NS_R neigh replace $ADDR_S lladdr \
		"$($IP -n $NS_S -j link show veth0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')" \
		dev veth1 nud permanent
}
