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

ADDR6_S=fd00:199::1
ADDR6_R=fd00:199::2

# quiet_ipv6 NS: IPv6 on, but no DAD, router solicitations or link-local
# addresses (so no ND or MLD packets from link-local addresses) on links
# created afterwards.
quiet_ipv6() {
	local k
	for k in disable_ipv6=0 accept_dad=0 dad_transmits=0 \
		router_solicitations=0 accept_ra=0 addr_gen_mode=1; do
		$IP netns exec "$1" sysctl -qw net.ipv6.conf.default.$k
		$IP netns exec "$1" sysctl -qw net.ipv6.conf.all.$k
	done
}

# Two namespaces joined by a veth pair; the sender's egress is the device
# under test. Optional: number of tx queues. With PAIR_IPV6=1 the pair
# also gets $ADDR6_S and $ADDR6_R (static neighbours, no DAD).
setup_pair() {
	local txq=${1:-1}
	$IP netns add $NS_S && $IP netns add $NS_R || return 1
	if [ "${PAIR_IPV6:-0}" = 1 ]; then
		quiet_ipv6 $NS_S
		quiet_ipv6 $NS_R
	fi
	[ "${PAIR_IPV6:-0}" = 1 ] ||
		$IP netns exec $NS_S sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	[ "${PAIR_IPV6:-0}" = 1 ] ||
		$IP netns exec $NS_R sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	# Both ends get the queues: the receive side looks up the queue the
	# packet was sent on, and warns when its peer has fewer.
	$IP -n $NS_S link add veth0 numtxqueues "$txq" numrxqueues "$txq" \
		type veth peer name veth1 numtxqueues "$txq" numrxqueues "$txq" \
		netns $NS_R || return 1
	$IP -n $NS_S addr add $ADDR_S/24 dev veth0
	$IP -n $NS_R addr add $ADDR_R/24 dev veth1
	# no IPv6 router or neighbour solicitations in the measured queue
	if [ "${PAIR_IPV6:-0}" != 1 ]; then
		$IP netns exec $NS_S sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		$IP netns exec $NS_R sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		$IP netns exec $NS_S sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	else
		$IP -n $NS_S -6 addr add $ADDR6_S/64 dev veth0 nodad || return 1
		$IP -n $NS_R -6 addr add $ADDR6_R/64 dev veth1 nodad || return 1
	fi
	$IP -n $NS_S link set lo up
	$IP -n $NS_R link set lo up
	$IP -n $NS_S link set veth0 up
	$IP -n $NS_R link set veth1 up
	# veth hands each packet to the backlog of the CPU that dequeued it,
	# and either vCPU may dequeue; two backlogs then race to the socket
	# and reorder what the qdisc sent in order (pfifo too, measured).
	# Steer all of veth1's receive work to CPU 0 so that the receiver
	# records the order packets left the qdisc in.
	rx_one_cpu $NS_R veth1 || return 1
	# No neighbour discovery packets in the measured queue.
	$IP -n $NS_S neigh replace $ADDR_R lladdr "$(lladdr $NS_R veth1)" \
		dev veth0 nud permanent || return 1
	if [ "${PAIR_IPV6:-0}" = 1 ]; then
		$IP -n $NS_S -6 neigh replace $ADDR6_R lladdr "$(lladdr $NS_R veth1)" \
			dev veth0 nud permanent || return 1
		$IP -n $NS_R -6 neigh replace $ADDR6_S lladdr "$(lladdr $NS_S veth0)" \
			dev veth1 nud permanent || return 1
	fi
}

# lladdr NS DEV: the MAC address of DEV.
lladdr() {
	$IP -n "$1" -j link show "$2" | jq -r '.[0].address'
}

# rx_one_cpu NS DEV: all of DEV's receive work on CPU 0 (see setup_pair).
rx_one_cpu() {
	$IP netns exec "$1" sh -c \
		'for f in /sys/class/net/'"$2"'/queues/rx-*/rps_cpus; do echo 1 > "$f" || exit 1; done'
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
# or inside "xstats"); "none" when there is no such qdisc or key. (These
# helpers use jq and awk, not python3: the guest starts python3 in
# seconds under the debug kernel, and the tests read counters hundreds
# of times.)
qdisc_stat() {
	tcs -j -s qdisc show dev "$1" | jq -r --arg h "$2" --arg k "$3" \
		'first((.[] | select(.handle == $h) | (.[$k] // .xstats[$k]) // "none"), "none")'
}

# class_stat KEY TAG [DEV]: a per-level counter (packets, bytes, drops) from
# tc -s class show on DEV (veth0); "none" when the level has no class (the
# qdisc lists only levels that counted something). tc 6.1 prints classes as
# text only, even with -j: a class is "class mercury H: ...", then
# " Sent B bytes P pkt (dropped D, ...", then "  tag T flows F".
class_stat() {
	tcs -s class show dev "${3:-veth0}" | awk -v k="$1" -v want="$2" '
		/^class / { m = $2 == "mercury"; next }
		m && $1 == "Sent" { b = $2; p = $4; d = $7; sub(/,$/, "", d); next }
		m && $1 == "tag" && $2 == want {
			v = k == "bytes" ? b : k == "packets" ? p : d; found = 1; exit
		}
		END { print found ? v : "none" }'
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

# wait_quiet DEV HANDLE [QUIET] [TIMEOUT]: until the qdisc's sent counter
# has not moved for QUIET seconds (default 3), at most TIMEOUT (default
# 60): killed TCP traffic leaves orphaned sockets whose FIN and RST
# retransmissions trickle through for seconds, and a test that counts
# its own packets must start from a quiescent qdisc.
wait_quiet() {
	local i last now still=0
	last=$(qdisc_stat "$1" "$2" packets)
	for ((i = 0; i < ${4:-60} * 2; i++)); do
		sleep 0.5
		now=$(qdisc_stat "$1" "$2" packets)
		if [ "$now" = "$last" ]; then
			still=$((still + 1))
			[ $still -ge $((${3:-3} * 2)) ] && return 0
		else
			still=0
			last=$now
		fi
	done
	return 1
}

# The traffic of run_traffic and run_stalled goes from $SEND_NS (default
# $NS_S) to $DST (default $ADDR_R); RECV_ARGS go to the receiver
# ("--family 6" with an IPv6 $DST).
start_receiver() {
	local rec=$1 count=$2 idle=$3 i
	rm -f "$rec" "$rec.ready" "$rec.stop"
	# shellcheck disable=SC2086
	$IP netns exec $NS_R $TRAFFIC recv --count "$count" --out "$rec" \
		--ready "$rec.ready" --idle "$idle" --stop "$rec.stop" \
		--max-time 900 ${RECV_ARGS:-} &
	recv_pid=$!
	for ((i = 0; i < 300; i++)); do
		[ -e "$rec.ready" ] && break
		sleep 0.1
	done
}

# run_traffic REC COUNT SEND-ARGS...: a receiver in $NS_R records up to
# COUNT packets into REC while a sender sends SEND-ARGS through veth0,
# whose root qdisc is 1:. No short idle timer: on a busy machine the
# sender's start alone can outlast one (a receiver that had stopped after
# 8 quiet seconds once recorded none of 400 packets). Once the sender is
# done and the root drained, a receiver still short of COUNT (packets
# were dropped) stops after one quiet second.
run_traffic() {
	local rec=$1 count=$2 rc=0
	shift 2
	start_receiver "$rec" "$count" 600
	$IP netns exec ${SEND_NS:-$NS_S} $TRAFFIC send --dst ${DST:-$ADDR_R} "$@" || rc=1
	stop_receiver "$rec" || rc=1
	return $rc
}

# stop_receiver REC: once veth0's root qdisc 1: is empty (or gone), tell
# the receiver of REC to stop after a quiet second, and wait for it.
stop_receiver() {
	local rec=$1 rc=0
	if kill -0 $recv_pid 2>/dev/null; then
		[ "$(qdisc_stat veth0 1: qlen)" = none ] || wait_backlog_zero veth0 1: 120 || rc=1
		touch "$rec.stop"
	fi
	wait $recv_pid || rc=1
	rm -f "$rec.stop"
	return $rc
}

# tc_count DEV HANDLE: packets the qdisc has seen so far (sent, queued,
# dropped), which only enqueue changes while the link is stalled.
tc_count() {
	tcs -j -s qdisc show dev "$1" | jq -r --arg h "$2" \
		'first((.[] | select(.handle == $h) | .packets + .qlen + .drops), -1)'
}

# wait_queued REC WANT: wait (at most 300 s) until the sender said it
# queued everything (REC.queued) and veth0's root qdisc counts WANT
# packets; fails if it never does.
wait_queued() {
	local i
	for ((i = 0; i < 3000; i++)); do
		[ -e "$1.queued" ] && [ "$(tc_count veth0 1:)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# run_stalled REC COUNT KICK SEND-ARGS...: the deterministic fill. Needs
# the link stalled by "setup_tbf $STALL_RATE ...". The sender sends
# SEND-ARGS while the link holds everything but tbf's first burst; once
# all COUNT - N of them reached veth0's root qdisc, the link is raised to
# $RELEASE_RATE, and the sender sends KICK (NAME:TAG:N, counted in COUNT):
# tbf does not restart on change, the kick's enqueue does. A receiver in
# $NS_R records the COUNT packets into REC in arrival order, or what
# arrived of them once the link drained (a case that drops packets).
STALL_RATE=8bit
RELEASE_RATE=100mbit
run_stalled() {
	local rec=$1 count=$2 kick=$3 want spid rc=0
	shift 3
	want=$((count - ${kick##*:}))
	rm -f "$rec.queued" "$rec.release"
	start_receiver "$rec" "$count" 60
	$IP netns exec ${SEND_NS:-$NS_S} $TRAFFIC send --dst ${DST:-$ADDR_R} "$@" \
		--queued "$rec.queued" --release "$rec.release" --kick "$kick" &
	spid=$!
	wait_queued "$rec" $want ||
		{ log "run_stalled: only $(tc_count veth0 1:) of $want packets queued"; rc=1; }
	tcs qdisc change dev veth0 root handle 1: tbf rate $RELEASE_RATE burst 3000 limit 10000000 ||
		rc=1
	touch "$rec.release"
	wait $spid || rc=1
	# Once the link drained, nothing more comes: a receiver still short
	# of COUNT (packets were dropped) stops after one quiet second.
	stop_receiver "$rec" || rc=1
	rm -f "$rec.queued" "$rec.release"
	return $rc
}

# stalled_fill REC SEND-ARGS...: run_stalled with the kick one more packet
# of the last burst's flow; sets $total to every packet sent, the kick's
# included.
stalled_fill() {
	local rec=$1 b last=
	shift
	total=1
	for b in "$@"; do
		case $b in *:*:*)
			total=$((total + ${b##*:}))
			last=${b%:*} ;;
		esac
	done
	run_stalled "$rec" "$total" "$last:1" "$@"
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

# skb_slack: how far skb_objects may rise with no skb leaked. Each CPU
# keeps freed skb heads in its NAPI cache (NAPI_SKB_CACHE_SIZE, 64 in
# 6.1 and 6.12, refilled 16 at a time) and on its defer list (up to
# net.core.skb_defer_max, TCP's receive path); the slab counts them as
# allocated. Measured in a 6.12 guest with no qdisc and no traffic: +30
# between two counts a second apart. Plus 64 for packets in flight.
skb_slack() {
	local defer
	defer=$(cat /proc/sys/net/core/skb_defer_max 2>/dev/null || echo 0)
	echo $(( (64 + defer) * $(nproc) + 64 ))
}

# pin_reverse_neigh: the receiver's permanent neighbour entry for the
# sender too, so that no ARP reply (an untagged packet) enters the queue
# under test: runs of minutes outlive the entry the receiver learnt.
pin_reverse_neigh() {
	$IP -n $NS_R neigh replace $ADDR_S lladdr "$(lladdr $NS_S veth0)" \
		dev veth1 nud permanent
}
