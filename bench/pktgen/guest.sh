#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest half of the qdisc cost benchmark (runs in the VM, as root).
#
#   kpktgend_0 --(queue_xmit)--> dummy0@0 .. dummy0@15 --> root qdisc --> dummy0 (drops)
#
# pktgen's queue_xmit mode hands every packet to dev_queue_xmit(), so it
# passes the root qdisc's enqueue and dequeue before the dummy driver frees
# it. The one pktgen thread serves ENTRIES entries of the same device
# (dummy0@K, pktgen's way to add a device more than once) in turn, each
# with its own skb_priority: that spreads the packets evenly over ENTRIES
# levels without a classifier, so no qdisc pays for one. The UDP source
# port is random over FLOWS ports (flag UDPSRC_RND): that many flows, each
# its own skb hash.
#
# For every configuration and repetition: replace the root qdisc, run
# pktgen, read "Result:" of every entry, and check that the qdisc sent
# every packet (tc -s). Repetitions are interleaved (round r measures every
# configuration once) so that drifting host load hits every qdisc alike.
# KTAP: one result per configuration. Raw results: $MERCURY_OUT/pktgen.json.
#
# Environment: PERF_PKTS (packets per measurement, default 40000),
# PERF_REPS (default 5), PERF_PROFILE=1 (also record perf profiles),
# PERF_QUICK=1 (a few configurations only, for development).
set -u
cd "$(dirname "$0")/../.." || exit 1
. selftests/lib.sh

PKTS=${PERF_PKTS:-40000}
REPS=${PERF_REPS:-5}
ENTRIES=16
DEV=dummy0
PG=/proc/net/pktgen
OUT=${MERCURY_OUT:-/tmp}
RAW=$OUT/pktgen.json
PROFILE_DIR=$OUT/profiles

# name | qdisc | tc arguments | priority scheme | flows | levels
# Priority schemes give entry K (0..15) its skb_priority:
#   k      K: pfifo_fast's priomap, prio's 16 bands, fq_codel and fq ignore it
#   k4     4K: 16 of skbprio's 64 levels
#   lN     1 + K * N / 16: 16 of mercury's N levels, tag 1 (most urgent) first
configs=()
add() { configs+=("$1|$2|$3|$4|$5|$6"); }
PRIOMAP="0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
for f in 1 64 4096; do
	add "pfifo_fast f$f" pfifo_fast "pfifo_fast" k "$f" 3
	[ -n "${PERF_QUICK:-}" ] && [ "$f" != 64 ] && continue
	add "fq_codel f$f" fq_codel "fq_codel" k "$f" 1
	add "prio16 f$f" prio "prio bands 16 priomap $PRIOMAP" k "$f" 16
	add "skbprio f$f" skbprio "skbprio" k4 "$f" 64
	add "fq f$f" fq "fq" k "$f" 1
done
for l in 64 1024 65536; do
	for f in 1 64 4096; do
		for fo in on off; do
			[ -n "${PERF_QUICK:-}" ] && { [ "$f" != 64 ] || [ "$l" = 1024 ]; } && continue
			# mask: tags go up to 65536, one bit more than 0xffff;
			# buckets: 4096, enough for the most flows measured.
			add "mercury l$l f$f fo-$fo" mercury \
				"mercury levels $l tag priority mask 0x1ffff flows 4096 flow_order $fo" \
				"l$l" "$f" "$l"
		done
	done
done

pg() {	# pg FILE COMMAND: write a pktgen command, fail on its refusal
	echo "$2" > "$PG/$1" || return 1
	grep -q "^Result: OK" "$PG/$1" 2>/dev/null || [ "$1" = pgctrl ] || {
		log "pktgen refused '$2' on $1: $(grep '^Result' "$PG/$1")"
		return 1
	}
}

setup() {
	modprobe pktgen && modprobe dummy numdummies=0 || return 1
	for m in sch_prio sch_skbprio sch_fq; do modprobe $m || return 1; done
	mercury_load
	$IP link add $DEV type dummy || return 1
	# dummy has no queue by default (txqueuelen 0): pfifo_fast refuses a
	# zero-length ring, prio's pfifo children would hold one packet.
	$IP link set $DEV txqueuelen 1000 up || return 1
	pg kpktgend_0 rem_device_all || return 1
	for k in $(seq 0 $((ENTRIES - 1))); do
		pg kpktgend_0 "add_device $DEV@$k" || return 1
		e=$DEV@$k
		pg "$e" "xmit_mode queue_xmit" &&
		pg "$e" "pkt_size 64" &&
		pg "$e" "delay 0" &&
		pg "$e" "dst 10.0.0.2" &&
		pg "$e" "dst_mac 02:00:00:00:00:02" &&
		pg "$e" "udp_dst_min 9000" && pg "$e" "udp_dst_max 9000" &&
		pg "$e" "flag UDPSRC_RND" || return 1
	done
}

prio_of() {	# prio_of SCHEME K
	case $1 in
	k) echo "$2" ;;
	k4) echo $(($2 * 4)) ;;
	l*) echo $((1 + $2 * ${1#l} / ENTRIES)) ;;
	esac
}

qdisc_packets() {
	$TC -j -s qdisc show dev $DEV | python3 -c '
import json, sys
for q in json.load(sys.stdin):
    if q.get("root"):
        print(q["packets"])' 2>/dev/null
}

# measure CONFIG: one pktgen run; prints "pps pkts usec errors" or fails
measure() {
	local IFS='|' name kind args scheme flows levels
	read -r name kind args scheme flows levels <<< "$1"
	IFS=' '
	local k e per=$((PKTS / ENTRIES)) sent=0 usec=0 errs=0 r u c before after
	# shellcheck disable=SC2086
	$TC qdisc replace dev $DEV root handle 1: $args || return 1
	for k in $(seq 0 $((ENTRIES - 1))); do
		e=$DEV@$k
		pg "$e" "count $per" &&
		pg "$e" "skb_priority $(prio_of "$scheme" "$k")" &&
		pg "$e" "udp_src_min 10000" &&
		pg "$e" "udp_src_max $((10000 + flows - 1))" || return 1
	done
	before=$(qdisc_packets)
	pg pgctrl start || return 1
	after=$(qdisc_packets)
	for k in $(seq 0 $((ENTRIES - 1))); do
		# "Result: OK: 1234(c1200+d34) usec, 2500 (64byte,0frags)"
		r=$(grep -m1 '^Result: OK:' "$PG/$DEV@$k") || { log "$name: no result on $DEV@$k"; return 1; }
		u=$(echo "$r" | sed -E 's/^Result: OK: ([0-9]+)\(.*/\1/')
		c=$(echo "$r" | sed -E 's/.* usec, ([0-9]+) \(.*/\1/')
		sent=$((sent + c))
		[ "$u" -gt "$usec" ] && usec=$u
		errs=$((errs + $(sed -nE 's/.*errors: ([0-9]+).*/\1/p' "$PG/$DEV@$k" | head -n1)))
	done
	if [ $((after - before)) -ne "$sent" ]; then
		log "$name: pktgen sent $sent, the qdisc $((after - before))"
		return 1
	fi
	echo "$((sent * 1000000 / usec)) $sent $usec $errs"
}

# Mercury lists a class per level that saw packets: all 16 tags, or the
# priorities did not reach it as distinct levels.
check_spread() {
	local n
	n=$($TC -s class show dev $DEV | grep -c '^class mercury')
	[ "$n" -eq $ENTRIES ] || { log "$1: $n levels used, want $ENTRIES"; return 1; }
}

json_str() { printf '"%s"' "$1"; }

if ! setup; then
	echo "not ok 1 setup: pktgen, dummy0 and the qdisc modules"
	echo "1..1"
	exit 1
fi
log "guest kernel $(uname -r), $(nproc) CPUs, $PKTS packets x $REPS repetitions, ${#configs[@]} configurations"

declare -A res bad
for r in $(seq 1 "$REPS"); do
	for i in "${!configs[@]}"; do
		cfg=${configs[$i]}
		name=${cfg%%|*}
		if m=$(measure "$cfg"); then
			res[$i]="${res[$i]:-} $m"
			[ "$r" = 1 ] && [[ $name == mercury* ]] && { check_spread "$name" || bad[$i]=1; }
		else
			bad[$i]=1
		fi
	done
	log "round $r of $REPS done"
done

{
	printf '{\n "kernel": "%s",\n "cpu": "%s",\n "cpus": %s,\n "pkts": %s,\n "reps": %s,\n "entries": %s,\n "pkt_size": 64,\n "results": [\n' \
		"$(uname -r)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1)" \
		"$(nproc)" "$PKTS" "$REPS" "$ENTRIES"
	sep=""
	for i in "${!configs[@]}"; do
		IFS='|' read -r name kind args scheme flows levels <<< "${configs[$i]}"
		printf '%s  {"name": %s, "qdisc": %s, "args": %s, "flows": %s, "levels": %s, "runs": [' \
			"$sep" "$(json_str "$name")" "$(json_str "$kind")" "$(json_str "$args")" "$flows" "$levels"
		rsep=""
		read -ra v <<< "${res[$i]:-}"
		for ((j = 0; j + 3 < ${#v[@]}; j += 4)); do
			printf '%s{"pps": %s, "pkts": %s, "usec": %s, "errors": %s}' "$rsep" \
				"${v[j]}" "${v[j+1]}" "${v[j+2]}" "${v[j+3]}"
			rsep=", "
		done
		printf ']}'
		sep=$',\n'
	done
	printf '\n ]\n}\n'
} > "$RAW"

for i in "${!configs[@]}"; do
	name=${configs[$i]%%|*}
	read -ra v <<< "${res[$i]:-}"
	if [ -z "${bad[$i]:-}" ] && [ ${#v[@]} -eq $((4 * REPS)) ]; then
		ktap_ok "$name: $(printf '%s ' "${v[@]}" | awk '{for (i = 1; i <= NF; i += 4) printf "%s ", $i}')pps"
	else
		ktap_fail "$name"
	fi
done

# Kernel profiles of the cheapest and the largest configuration: where the
# time goes, for the findings in Documentation/performance.md.
if [ -n "${PERF_PROFILE:-}" ]; then
	mkdir -p "$PROFILE_DIR"
	for i in "${!configs[@]}"; do
		name=${configs[$i]%%|*}
		case $name in
		"pfifo_fast f64"|"skbprio f64"|"mercury l64 f64 fo-on"|"mercury l65536 f4096 fo-on") ;;
		*) continue ;;
		esac
		f=$PROFILE_DIR/$(echo "$name" | tr ' ' '_')
		perf record -q -a -g -e cpu-clock -o /tmp/perf.data > /dev/null 2>&1 &
		ppid=$!
		sleep 2		# perf has started sampling
		measure "${configs[$i]}" > /dev/null
		kill -INT $ppid
		wait $ppid
		if perf report -i /tmp/perf.data --stdio --no-children --sort sym -g none 2>/dev/null |
			grep -v '^$' | head -n 60 > "$f.txt" && grep -q '%' "$f.txt"; then
			ktap_ok "perf profile: $name"
		else
			ktap_fail "perf profile: $name"
		fi
	done
fi

$TC qdisc del dev $DEV root 2>/dev/null
pg kpktgend_0 rem_device_all
$IP link del $DEV
ktap_finish
