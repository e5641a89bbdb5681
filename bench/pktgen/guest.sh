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
# Qdiscs with TCQ_F_CAN_BYPASS (pfifo_fast, fq_codel, mercury by default)
# skip enqueue and dequeue while empty, which they always are here: the
# dummy device never stalls. The mercury configurations without "default"
# in their name set "bypass off", so each of their packets is queued; it
# finds the qdisc empty, so it takes mercury's lone-packet path.
#
# Most configurations run on a single-queue dummy0, where a flow qdisc
# computes the packet's hash itself (pktgen's skbs carry none). Those named
# "txq4" run on a dummy0 with 4 tx queues: the stack then hashes every
# packet to pick the queue, before any qdisc, as it does on multiqueue NICs
# (and TCP sets the hash from its socket): the qdisc finds it computed.
#
# For every configuration and repetition: replace the root qdisc, run
# pktgen, read "Result:" of every entry, and check that the qdisc sent
# every packet (tc -s). Repetitions are interleaved (round r measures every
# configuration once) so that drifting host load hits every qdisc alike.
# KTAP: one result per configuration. Raw results: $MERCURY_OUT/pktgen.json.
#
# Settings (environment, or $MERCURY_OUT/perf.env): PERF_PKTS (packets per measurement, default 100000),
# PERF_REPS (default 5), PERF_PROFILE=1 (also record perf profiles),
# PERF_QUICK=1 (a few configurations only, for development), PERF_ONLY=REGEX
# (only the configurations whose name matches, for A/B runs of a change).
set -u
cd "$(dirname "$0")/../.." || exit 1
. selftests/lib.sh

# The host (bench/pktgen/run.sh) passes settings in $MERCURY_OUT/perf.env:
# the guest does not inherit the host's environment.
[ -r "${MERCURY_OUT:-/nonexistent}/perf.env" ] && . "$MERCURY_OUT/perf.env"
PKTS=${PERF_PKTS:-100000}
REPS=${PERF_REPS:-5}
ENTRIES=16
DEV=dummy0
PG=/proc/net/pktgen
OUT=${MERCURY_OUT:-/tmp}
RAW=$OUT/pktgen.json
PROFILE_DIR=$OUT/profiles

# name | qdisc | tc arguments | priority scheme | flows | levels | tx queues
# Priority schemes give entry K (0..15) its skb_priority:
#   k      K: pfifo_fast's priomap, prio's 16 bands, fq_codel and fq ignore it
#   k4     4K: 16 of skbprio's 64 levels
#   lN     1 + K * N / 16: 16 of mercury's N levels, tag 1 (most urgent) first
# Ordered by flows, then priority scheme: pktgen settings are rewritten only
# when they change, and each rewrite costs the emulated guest milliseconds.
configs=()
add() {
	[ -n "${PERF_ONLY:-}" ] && ! [[ $1 =~ ^(${PERF_ONLY})$ ]] && return
	configs+=("$1|$2|$3|$4|$5|$6|${7:-1}")
}
# madd NAME LEVELS FLOWS [OPTIONS [TXQS]]: mercury reading the tag from
# the priority. mask 0x1ffff: tags above 0xffff reach the last level;
# buckets: 4096, enough for the most flows measured.
madd() {
	add "$1" mercury "mercury levels $2 tag priority mask 0x1ffff flows 4096${4:+ $4}" \
		"l$2" "$3" "$2" "${5:-1}"
}
PRIOMAP="0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
for f in 1 64 4096; do
	add "pfifo_fast f$f" pfifo_fast "pfifo_fast" k "$f" 3
	if [ "$f" = 64 ]; then
		# mercury as configured by default (bypass on), against the
		# floor and against the qdiscs that queue every packet
		madd "mercury l64 f$f default" 64 "$f"
		madd "mercury l16 f$f default" 16 "$f"
		# sch_prio's 16 bands against mercury with 16 levels
		madd "mercury l16 f$f fo-on" 16 "$f" "flow_order on bypass off"
		add "fq_codel f$f" fq_codel "fq_codel" k "$f" 1
		add "prio16 f$f" prio "prio bands 16 priomap $PRIOMAP" k "$f" 16
		add "fq f$f" fq "fq" k "$f" 1
		add "skbprio f$f" skbprio "skbprio" k4 "$f" 64
	fi
	for l in 64 1024 65534; do
		for fo in on off; do
			[ -n "${PERF_QUICK:-}" ] && { [ "$f" != 64 ] || [ "$l" = 1024 ]; } && continue
			madd "mercury l$l f$f fo-$fo" "$l" "$f" "flow_order $fo bypass off"
		done
	done
done
# The same on a 4-queue device, last: one device change per round.
add "pfifo_fast f64 txq4" pfifo_fast "pfifo_fast" k 64 3 4
add "skbprio f64 txq4" skbprio "skbprio" k4 64 64 4
add "prio16 f64 txq4" prio "prio bands 16 priomap $PRIOMAP" k 64 16 4
madd "mercury l64 f64 default txq4" 64 64 "" 4
madd "mercury l64 f64 fo-on txq4" 64 64 "bypass off" 4
madd "mercury l16 f64 fo-on txq4" 16 64 "bypass off" 4

pg() {	# pg FILE COMMAND: write a pktgen command, fail on its refusal
	local st
	echo "$2" > "$PG/$1" || return 1
	[ "$1" = pgctrl ] && return 0
	# builtins only: a fork costs milliseconds in the emulated guest
	read -r -d '' st < "$PG/$1"
	[[ $st == *"Result: OK"* ]] && return 0
	log "pktgen refused '$2' on $1"
	return 1
}

# pgset ENTRY KEY VALUE: only when the value changes
declare -A pgval
pgset() {
	[ "${pgval[$1 $2]:-}" = "$3" ] && return 0
	pg "$1" "$2 $3" && pgval[$1 $2]=$3
}

setup() {
	modprobe pktgen && modprobe dummy numdummies=0 || return 1
	for m in sch_prio sch_skbprio sch_fq; do modprobe $m || return 1; done
	mercury_load
	# pktgen draws a random source port per packet; before the kernel's
	# random generator is initialised (about a minute into an emulated
	# boot) that draw is several times slower and would weigh on the first
	# round only. Reading /dev/random waits for it (and hurries it along).
	dd if=/dev/random of=/dev/null bs=1 count=1 status=none || return 1
}

# make_dev TXQS: (re)create $DEV with TXQS tx queues and the pktgen entries
cur_txqs=""
make_dev() {
	[ "$cur_txqs" = "$1" ] && return 0
	cur_txqs=""
	# deleting the device also removes its pktgen entries
	$IP link del $DEV 2>/dev/null
	pgval=()
	$IP link add $DEV numtxqueues "$1" type dummy || return 1
	# no IPv6 autoconfiguration packets in the measured qdisc
	sysctl -qw net.ipv6.conf.$DEV.disable_ipv6=1 || return 1
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
	cur_txqs=$1
}

prio_of() {	# prio_of SCHEME K: sets $prio
	case $1 in
	k) prio=$2 ;;
	k4) prio=$(($2 * 4)) ;;
	l*) prio=$((1 + $2 * ${1#l} / ENTRIES)) ;;
	esac
}

qdisc_packets() {	# sets $qkind and $qpkts: the root qdisc, packets it sent
	local line out
	qpkts=-1
	qkind=
	out=$($TC -s qdisc show dev $DEV root)
	read -r _ qkind _ <<< "$out"
	while read -r line; do
		if [[ $line =~ ^Sent\ [0-9]+\ bytes\ ([0-9]+)\ pkt ]]; then
			qpkts=${BASH_REMATCH[1]}
			return 0
		fi
	done <<< "$out"
	return 1
}

# measure CONFIG: one pktgen run; sets $m to "pps pkts usec errors"
measure() {
	local name kind args scheme flows levels txqs
	IFS='|' read -r name kind args scheme flows levels txqs <<< "$1"
	local k w e per=$((PKTS / ENTRIES)) sent=0 usec=0 errs=0 st prio
	make_dev "$txqs" || { log "$name: cannot create $DEV with $txqs tx queues"; return 1; }
	# "replace" keeps handle 1: and refuses another kind: delete first.
	# One tc for both (-force: go on when there is nothing to delete).
	printf 'qdisc del dev %s root\nqdisc add dev %s root handle 1: %s\n' \
		$DEV $DEV "$args" | $TC -force -batch - 2> /dev/null
	for ((k = 0; k < ENTRIES; k++)); do
		e=$DEV@$k
		prio_of "$scheme" $k
		# always written: it also replaces the entry's last "Result"
		pg "$e" "count $per" &&
		pgset "$e" skb_priority $prio &&
		pgset "$e" udp_src_min 10000 &&
		pgset "$e" udp_src_max $((10000 + flows - 1)) || return 1
	done
	pg pgctrl start || return 1
	# "start" waits only 125 ms for the pktgen thread to take the run;
	# a busy emulated guest can miss that and return at once. Wait for
	# every entry's run result (up to about a minute).
	for ((k = 0; k < ENTRIES; k++)); do
		for ((w = 0; w < 600; w++)); do
			read -r -d '' st < "$PG/$DEV@$k"
			[[ $st == *"Result: OK: "*" usec, "* ]] && break
			sleep 0.1
		done
	done
	qdisc_packets || return 1
	[ "$qkind" = "$kind" ] || { log "$name: root qdisc is '$qkind'"; return 1; }
	for ((k = 0; k < ENTRIES; k++)); do
		read -r -d '' st < "$PG/$DEV@$k"
		# "Result: OK: 1234(c1200+d34) usec, 2500 (64byte,0frags)"
		if ! [[ $st =~ Result:\ OK:\ ([0-9]+)\(.*\ usec,\ ([0-9]+)\ \( ]]; then
			log "$name: no result on $DEV@$k"
			return 1
		fi
		sent=$((sent + BASH_REMATCH[2]))
		((BASH_REMATCH[1] > usec)) && usec=${BASH_REMATCH[1]}
		[[ $st =~ errors:\ ([0-9]+) ]] && errs=$((errs + BASH_REMATCH[1]))
	done
	# a fresh qdisc: everything it sent came from pktgen
	if [ "$qpkts" -ne "$sent" ] || [ "$usec" -eq 0 ]; then
		log "$name: pktgen sent $sent in $usec us, the qdisc $qpkts"
		return 1
	fi
	m="$((sent * 1000000 / usec)) $sent $usec $errs"
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
		if measure "$cfg"; then
			res[$i]="${res[$i]:-} $m"
			# (with bypass on, packets rarely reach the levels at all)
			[ "$r" = 1 ] && [[ $name == mercury* && $name != *default* ]] &&
				{ check_spread "$name" || bad[$i]=1; }
		else
			bad[$i]=1
		fi
	done
	log "round $r of $REPS done"
done

{
	printf '{\n "kernel": "%s",\n "cpu": "%s",\n "cpus": %s,\n "clocksource": "%s",\n "pkts": %s,\n "reps": %s,\n "entries": %s,\n "pkt_size": 64,\n "results": [\n' \
		"$(uname -r)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1)" \
		"$(nproc)" "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)" \
		"$PKTS" "$REPS" "$ENTRIES"
	sep=""
	for i in "${!configs[@]}"; do
		IFS='|' read -r name kind args scheme flows levels txqs <<< "${configs[$i]}"
		printf '%s  {"name": %s, "qdisc": %s, "args": %s, "flows": %s, "levels": %s, "txqs": %s, "runs": [' \
			"$sep" "$(json_str "$name")" "$(json_str "$kind")" "$(json_str "$args")" "$flows" "$levels" "$txqs"
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

# Kernel profiles of CPU 0, where kpktgend_0 runs every packet's transmit
# path: where the time goes, for the findings in
# Documentation/performance.md.
if [ -n "${PERF_PROFILE:-}" ]; then
	mkdir -p "$PROFILE_DIR"
	for i in "${!configs[@]}"; do
		name=${configs[$i]%%|*}
		case $name in
		# the ones report.py reads
		"skbprio f64"|"mercury l64 f64 default"|"mercury l64 f64 fo-on"|"mercury l64 f64 fo-on txq4") ;;
		*) continue ;;
		esac
		f=$PROFILE_DIR/$(echo "$name" | tr ' ' '_')
		rm -f /tmp/perf.data
		perf record -q -C 0 -e cpu-clock -o /tmp/perf.data > /dev/null 2>&1 &
		ppid=$!
		# perf writes its header once it samples; it may take seconds
		for ((w = 0; w < 300; w++)); do
			[ -s /tmp/perf.data ] && break
			sleep 0.1
		done
		sleep 1
		PKTS=$((4 * PKTS)) measure "${configs[$i]}"
		kill -INT $ppid
		wait $ppid
		if perf report -i /tmp/perf.data --stdio --sort sym 2>/dev/null |
			grep -v '^$' | head -n 300 > "$f.txt" && grep -q '%' "$f.txt"; then
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
