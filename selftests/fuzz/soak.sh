#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The soak (guest half of `make soak`, scripts/debug-kernel/soak.sh):
# SOAK_MINUTES (10) one-minute rounds. Each round builds the qdiscs fresh,
# runs traffic and a loop of changes for about a minute, stops the
# traffic, checks the accounting and the skbs, and ends with rmmod and
# insmod of sch_mercury.
#
#   +----------------------- ns mrc-s --------------------------+  +- ns mrc-r -+
#   | mercury-blast: 64 TCP + 8 UDP flows, tags 1..65536 as      |  | blast sink |
#   |   mark, priority and DSCP (its low six bits) all           |  |            |
#   | veth0: htb 1: (20mbit) -> mercury 10: levels 1..65534,     |--| veth1      |
#   |   tag mark, priority or dscp: options change every 2 s     |  |            |
#   | kpktgend_0 --(queue_xmit, 16 entries, skb_priority across  |  +------------+
#   |   1..65521)--> dummy0: mercury 20: root, tag priority,      |
#   |   levels 65534, no bypass; its limits change every 2 s      |
#   +------------------------------------------------------------+
# Every 10 s: packets per second through each qdisc. Every round:
#  - mercury under htb: htb sent and dropped exactly what mercury did;
#    nothing left queued anywhere (veth0's own counters are not compared:
#    it counts a TCP GSO packet once, the qdiscs count its segments);
#  - mercury on dummy0 (only non-structural changes, so its level
#    counters live as long as it does): the levels sum to the qdisc, and
#    dummy0 transmitted what it sent; nothing queued;
#  - skbs back to the start's count (within lib.sh's skb_slack);
#  - rmmod is clean.
# Drops per reason (drops_limit, drops_memory) are summed over the rounds.
# The kernel reports (KASAN, lockdep, kmemleak, ...) are vm-run.sh's.
source "$(dirname "$0")/../lib.sh"
mercury_load
FZ=$MERCURY_ROOT/selftests/fuzz
minutes=${SOAK_MINUTES:-10}
seed=${SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
SEND_PID=""
SINK_PID=""
PG_PID=""
RANDOM=$seed

stop_traffic() {
	[ -n "$SEND_PID" ] && kill "$SEND_PID" 2>/dev/null && wait "$SEND_PID"
	SEND_PID=""
	if [ -n "$PG_PID" ]; then
		pgns "echo stop > /proc/net/pktgen/pgctrl"
		wait "$PG_PID"
		PG_PID=""
	fi
}
cleanup() {
	stop_traffic
	[ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
	pgns "echo rem_device_all > /proc/net/pktgen/kpktgend_0" 2>/dev/null
	cleanup_pair
}
trap cleanup EXIT
[ -x $FZ/mercury-blast ] || { echo "not ok 1 selftests/fuzz not built"; exit 1; }
[ -e /proc/net/pktgen/pgctrl ] || modprobe pktgen || { echo "not ok 1 no pktgen"; exit 1; }
setup_pair && pin_reverse_neigh || { echo "not ok 1 setup"; exit 1; }
$IP -n $NS_S link add dummy0 type dummy && $IP -n $NS_S link set dummy0 up ||
	{ echo "not ok 1 dummy0"; exit 1; }
log "seed $seed, $minutes rounds of a minute"

# pktgen is per namespace: /proc/net/pktgen is that of the writer's, so
# every command goes through ip netns exec (one shell for the setup).
pgns() { $IP netns exec $NS_S sh -c "$1"; }
# Priorities 1..65521, one level in 4368: every level is a class, so the
# levels add up to the qdisc.
pktgen_setup() {
	local k e cmds="p=/proc/net/pktgen; w() { echo \"\$2\" > \$p/\$1 || { echo \"pktgen refused \$2 on \$1\"; exit 1; }; }; w kpktgend_0 rem_device_all"
	for ((k = 0; k < 16; k++)); do
		e=dummy0@$k
		cmds="$cmds; w kpktgend_0 'add_device $e'"
		for c in "xmit_mode queue_xmit" "count 0" "pkt_size 200" "dst 10.199.9.9" \
			 "dst_mac 02:00:00:00:00:01" "skb_priority $((1 + k * 4368))" "ratep 300" \
			 "udp_src_min 10000" "udp_src_max 10063" "flag UDPSRC_RND"; do
			cmds="$cmds; w $e '$c'"
		done
	done
	pgns "$cmds"
}

stat() { qdisc_stat "$1" "$2" "$3"; }
dev_tx() {	# packets the device transmitted plus those it dropped
	$IP -n $NS_S -s -j link show "$1" | jq '.[0].stats64.tx | .packets + .dropped'
}
level_sum() {	# level_sum DEV KEY: the sum of KEY (packets, drops) over the levels of DEV
	tcs -s class show dev "$1" | awk -v k="$2" '
		/^class / { m = $2 == "mercury"; next }
		m && $1 == "Sent" { d = $7; sub(/,$/, "", d); s += k == "packets" ? $4 : d; m = 0 }
		END { print s + 0 }'
}

build_qdiscs() {
	tcs qdisc add dev veth0 root handle 1: htb default 1 &&
	tcs class add dev veth0 parent 1: classid 1:1 htb rate 20mbit burst 20k &&
	tcs qdisc add dev veth0 parent 1:1 handle 10: mercury levels 65534 mask 0xffffffff limit 2000 &&
	tcs qdisc add dev dummy0 root handle 20: mercury levels 65534 mask 0xffffffff tag priority \
		bypass off limit 5000
}

pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }
# timed CMD...: CMD, and a log line when it took more than 5 s (a control
# operation that traffic holds up is worth seeing in the log)
timed() {
	local t0=${EPOCHREALTIME/./} rc ms
	"$@"
	rc=$?
	ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
	[ $ms -le 5000 ] || log "slow: ${ms} ms for: $*"
	return $rc
}
change_loop_once() {
	# structural and not, on the htb child: levels, tag source, flows
	timed tcs qdisc change dev veth0 parent 1:1 handle 10: mercury \
		levels "$(pick 1 2 64 1024 65534)" tag "$(pick mark priority dscp)" \
		flows "$(pick 1 64 1024 65536)" limit "$(pick 10 100 2000 10000)" \
		memory_limit "$(pick 20000 1000000 33554432)" quantum "$(pick 256 3028 65536)" \
		untagged "$(pick first last)" || return 1
	# limits only on dummy0, whose level counters must live all round
	timed tcs qdisc change dev dummy0 root handle 20: mercury \
		limit "$(pick 1 10 1000 5000)" memory_limit "$(pick 5000 100000 33554432)" \
		quantum "$(pick 256 1514 65536)" || return 1
	timed tcs -s class show dev veth0 > /dev/null && timed tcs -s class show dev dummy0 > /dev/null
}

$IP netns exec $NS_R $FZ/mercury-blast sink -p 9000 > /dev/null &
SINK_PID=$!
pktgen_setup || { echo "not ok 1 pktgen setup"; exit 1; }
skb_start=$(skb_objects)
slack=$(skb_slack)
drops_limit=0
drops_memory=0
changes=0
bad=0
for ((round = 1; round <= minutes; round++)); do
	build_qdiscs || { ktap_fail "round $round: build the qdiscs"; bad=1; break; }
	d0=$(dev_tx dummy0)
	$IP netns exec $NS_S $FZ/mercury-blast send -a $ADDR_R -p 9000 -T 64 -b 20000 -U 8 \
		-g 1-65536 -s $((seed + round)) -r 2000 -l 1000 > /dev/null &
	SEND_PID=$!
	pgns "echo start > /proc/net/pktgen/pgctrl" &
	PG_PID=$!
	t0=$(date +%s)
	last=$t0
	lv=0
	ld=0
	while [ $(($(date +%s) - t0)) -lt 60 ]; do
		if change_loop_once; then
			changes=$((changes + 1))
		else
			ktap_fail "round $round: a valid change was refused"
			bad=1
		fi
		sleep 2
		now=$(date +%s)
		if [ $((now - last)) -ge 10 ]; then
			pv=$(stat veth0 10: packets)
			pd=$(stat dummy0 20: packets)
			log "t=$(((round - 1) * 60 + now - t0))s veth0/mercury $(((pv - lv) / (now - last))) pkt/s, dummy0/mercury $(((pd - ld) / (now - last))) pkt/s"
			lv=$pv
			ld=$pd
			last=$now
		fi
	done
	stop_traffic
	wait_backlog_zero veth0 10: && wait_backlog_zero dummy0 20:
	sleep 1		# the last TCP resets and the answers to them
	wait_backlog_zero veth0 10:

	mp=$(stat veth0 10: packets); md=$(stat veth0 10: drops)
	hp=$(stat veth0 1: packets); hd=$(stat veth0 1: drops)
	dp=$(stat dummy0 20: packets); dd=$(stat dummy0 20: drops)
	dt=$(($(dev_tx dummy0) - d0))
	lp=$(level_sum dummy0 packets); ld2=$(level_sum dummy0 drops)
	dl=$(($(stat veth0 10: drops_limit) + $(stat dummy0 20: drops_limit)))
	dm=$(($(stat veth0 10: drops_memory) + $(stat dummy0 20: drops_memory)))
	drops_limit=$((drops_limit + dl))
	drops_memory=$((drops_memory + dm))
	log "round $round: htb/mercury sent $mp dropped $md (htb: $hp, $hd); dummy0/mercury sent $dp dropped $dd (levels $lp, $ld2; dummy0 $dt); drops_limit $dl drops_memory $dm"
	ok=1
	[ "$mp" = "$hp" ] && [ "$md" = "$hd" ] || ok=0
	[ "$lp" = "$dp" ] && [ "$ld2" = "$dd" ] && [ "$dt" = "$dp" ] || ok=0
	for q in "veth0 10:" "veth0 1:" "dummy0 20:"; do
		[ "$(stat $q qlen)" = 0 ] && [ "$(stat $q backlog)" = 0 ] || ok=0
	done
	[ "$(stat veth0 10: memory_usage)" = 0 ] && [ "$(stat dummy0 20: memory_usage)" = 0 ] || ok=0
	[ $ok = 1 ] || { ktap_fail "round $round: accounting"; bad=1; }
	tcs qdisc del dev veth0 root && tcs qdisc del dev dummy0 root
	skb_now=$(skb_objects)
	if [ -z "$skb_now" ] || [ $((skb_now - skb_start)) -ge $slack ]; then
		ktap_fail "round $round: skb objects $skb_now, $skb_start at the start"
		bad=1
	fi
	rmmod sch_mercury || { ktap_fail "round $round: rmmod"; bad=1; break; }
	insmod "$MERCURY_ROOT/sch_mercury.ko" || { ktap_fail "round $round: insmod"; bad=1; break; }
	[ $bad = 0 ] || break
done
log "$changes change rounds; drops per reason over the soak: drops_limit $drops_limit drops_memory $drops_memory"
[ $bad = 0 ] && ktap_ok "soak: $minutes rounds of traffic, changes and reloads; every count adds up, no skb leaked (seed $seed)"
ktap_finish
