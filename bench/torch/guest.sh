#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The network of bench/torch/run.sh, in the guest (run by scripts/vm-run.sh
# with one -n TAP per rank): port i (the i-th virtio-net device, the tap of
# rank i's host namespace) is 10.77.(i+1).1/24, and the guest routes between
# the ports. Each port's egress is a tbf at RATE whose child is the qdisc
# under test, so the queue that builds when rank i sends to rank j is the
# one on port j: it stands in for rank i's NIC queue.
#
# The host drives the schemes through the results share: it writes
# req.N holding one line "SCHEME"; the guest saves the counters of what ran
# before (stats.N-1), sets every port to SCHEME and answers ack.N with the
# resulting qdiscs. "done" ends the script. Settings: $MERCURY_OUT/torch.env.
source "$(dirname "$0")/../../selftests/lib.sh"

OUT=${MERCURY_OUT:-/tmp}
source "$OUT/torch.env"
PORTS=${PORTS:-2}
RATE=${RATE:-100mbit}
MTU=${MTU:-1500}
LIMIT=${LIMIT:-2000}		# packets of every scheme's queue (prio: per band)
# --- BT_BULK, scenario 2 (shallow shared buffer): BYTES, every scheme's
# whole buffer in bytes of full-size frames (MTU + 14), set by
# bench/shared/run.sh. Each scheme turns it into its own limits:
# LIMIT = BYTES / (MTU + 14) packets for the one queue of pfifo and of
# sch_mercury (its limit; memory_limit stays large enough that the count
# binds) and fq (per band: below); prio and ets split it equally over
# the bands the job uses (tags 1..CHANNELS and the untagged band:
# BAND_LIMIT each), every band given that same limit (the idle ones hold
# nothing). Packets are frames here: run.sh sets the
# ranks' taps' gso_max_size to one frame (their TCP sends no GSO
# aggregate) and GRO is off on the ports below (it merges none), so
# that a queued skb is one frame, as in a switch's buffer.
BYTES=${BYTES:-}
CHANNELS=${CHANNELS:-8}
# fq (Linux 6.7+) counts its limit per band, and the job's DSCPs reach
# all 3 of its default bands (a forwarded packet's priority comes from
# its TOS bits), so its limit and flow_limit are LIMIT / 3 there.
if [ -n "$BYTES" ]; then
	LIMIT=$(( BYTES / (MTU + 14) ))
	BAND_LIMIT=$(( LIMIT / (CHANNELS + 1) ))
	FQ_LIMIT=$LIMIT
	IFS=. read -r kmaj kmin _ < /proc/sys/kernel/osrelease
	[ $(( kmaj * 100 + ${kmin%%[!0-9]*} )) -ge 607 ] && FQ_LIMIT=$(( LIMIT / 3 ))
fi
BAND_LIMIT=${BAND_LIMIT:-$LIMIT}
FQ_LIMIT=${FQ_LIMIT:-$LIMIT}
# sch_mercury's flow_limit in the mercury-fl scheme: prio's and ets's
# per-band limit, the same split of the same buffer, unless given
FLOW_LIMIT=${FLOW_LIMIT:-$BAND_LIMIT}
# --- end BT_BULK ---
# sch_mercury's bytes of truesize: its default (32 MB), or per packet of
# LIMIT 8 KB or twice the MTU if more (a forwarded skb's truesize is up
# to a few pages), so that a full queue drops by count, as pfifo does
PKTMEM=$(( 2 * MTU > 8192 ? 2 * MTU : 8192 ))
MEMLIMIT=$(( LIMIT * PKTMEM > 33554432 ? LIMIT * PKTMEM : 33554432 ))
BURST=${BURST:-}
[ -n "$BURST" ] || BURST=$(( 2 * (MTU + 14) > 15000 ? 2 * (MTU + 14) : 15000 ))
WAIT=${WAIT:-3600}		# seconds the host may take between two requests

modprobe virtio_net || { echo "not ok 1 no virtio_net"; exit 1; }
modprobe sch_tbf; modprobe sch_prio; modprobe cls_u32
# --- BT_BULK (make bench-shared, bench/shared/run.sh): its queues ---
modprobe sch_ets; modprobe sch_fq
SHARE=${SHARE:-10}		# sch_mercury's untagged_share, ets-quanta's split
# --- end BT_BULK ---
mercury_load

# --- BT_BULK, scenario 2: gro_off D, ethtool -K D gro off (the guest has
# no ethtool: its ioctl, ETHTOOL_SGRO); prints "gro 0" read back ---
gro_off() {
	python3 - "$1" <<-'EOT'
		import ctypes, fcntl, socket, struct, sys
		val = ctypes.create_string_buffer(struct.pack("II", 0x2c, 0))   # ETHTOOL_SGRO, off
		req = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(val)).ljust(40, b"\0")
		fcntl.ioctl(socket.socket(), 0x8946, req)                       # SIOCETHTOOL
		val.raw = struct.pack("II", 0x2b, 9)                            # ETHTOOL_GGRO
		fcntl.ioctl(socket.socket(), 0x8946, req)
		print("gro %d" % struct.unpack("II", val.raw[:8])[1])
		EOT
}
# --- end BT_BULK ---

# The ports: every net device but lo, in probe order (PCI order = the
# order of vm-run.sh's -n options).
ports=()
for i in $(seq 100); do
	mapfile -t ports < <(ls /sys/class/net | grep -v '^lo$' | sort -V)
	[ ${#ports[@]} -ge "$PORTS" ] && break
	sleep 0.1
done
[ ${#ports[@]} -ge "$PORTS" ] || { echo "not ok 1 only ${#ports[@]} of $PORTS ports"; exit 1; }
for i in $(seq 0 $((PORTS - 1))); do
	d=${ports[$i]}
	$IP link set "$d" mtu "$MTU" up
	$IP addr add "10.77.$((i + 1)).1/24" dev "$d"
	# --- BT_BULK, scenario 2: no received frames merged into one skb ---
	if [ -n "$BYTES" ]; then
		g=$(gro_off "$d") || { echo "not ok 1 cannot turn GRO off on $d"; exit 1; }
		log "port $i: $g (ethtool -K $d gro off)"
	fi
	# --- end BT_BULK ---
	log "port $i: $d $(cat /sys/class/net/$d/address) 10.77.$((i + 1)).1/24"
done
sysctl -qw net.ipv4.ip_forward=1

# set_scheme SCHEME: tbf at RATE on every port, the scheme's qdisc below.
#   fifo     pfifo: one FIFO. (pfifo_fast is not one here: for a forwarded
#            packet the kernel sets skb->priority from the TOS bits
#            (ip_forward -> rt_tos2priority), and pfifo_fast's fixed
#            priomap would then serve some DSCP channels before others.)
#   prio     prio with 16 bands, each a pfifo; u32 filters on the DSCP
#            put tag d in band d (class 10:(d+1)): DSCP 0 (untagged: the
#            rendezvous store, DDP) in band 0, the most urgent, as
#            sch_mercury's "untagged first" does, channel k (tag k) in
#            band k; DSCP 15..63 share the last band. (priomap alone
#            cannot: it maps skb->priority, which a router derives from
#            the old TOS bits, not from the DSCP.)
#   mercury  sch_mercury reading the DSCP (tag dscp).
# --- BT_BULK (make bench-shared): the shared-NIC schemes, each the
# configuration a user writes to keep training (DSCP 1..15: mercury.torch's
# channels) ahead of untagged traffic (DSCP 0: a checkpoint upload) on
# port D, below the tbf at 1:1. Every tc line of the last port (the
# egress of rank 0's traffic) is also written, the device as DEV, to
# $OUT/tc-SCHEME.txt for the report and the docs.
#   prio-last     prio 16 bands, tag t (DSCP 1..15) in band t-1, untagged
#                 and DSCP 16..63 in band 15, the last (prio's counterpart
#                 of "untagged last" with no share)
#   ets-strict    the same with ets: 16 strict bands
#   ets-quanta    ets with 2 DRR bands, quanta (100-SHARE):SHARE in bytes
#                 (SHARE% of the link for untagged traffic while both
#                 wait), the tagged band's child prio-last's 16 bands:
#                 ets alone cannot both order the 15 tags (strict bands)
#                 and guarantee a share (only DRR bands get one, and every
#                 strict band is served before any DRR band)
#   mercury-share sch_mercury, untagged last untagged_share SHARE
#   mercury-fl    the same with flow_limit FLOW_LIMIT: a flow holding that
#                 many packets loses its arrivals, so a long transfer
#                 cannot fill the shared buffer
#   fq            fq, deep as the others (limit and flow_limit LIMIT);
#                 its 3 priority bands (Linux 6.7+) keep their defaults:
#                 iproute2 6.1's tc cannot set priomap or weights
#   With BYTES (scenario 2) every limit above comes from it (see BYTES);
#   SHARE 0 leaves untagged_share out of sch_mercury's line.
tcx() {
	[ "$tcx_log" = /dev/null ] || echo "tc $*" | sed "s/ dev $tcx_dev / dev DEV /" >> "$tcx_log"
	$TC "$@"
}
# tcx_start SCHEME D: log what tcx runs on D to $OUT/tc-SCHEME.txt if D
# is the last port, after the root tbf's line
tcx_start() {
	tcx_dev=$2 tcx_log=/dev/null
	if [ "$2" = "${ports[$((PORTS - 1))]}" ]; then
		tcx_log=$OUT/tc-$1.txt
		echo "tc qdisc add dev DEV root handle 1: tbf rate $RATE burst $BURST limit 100000000" > "$tcx_log"
	fi
}
# prio16 D HANDLE: prio 16 bands at HANDLE (already added's filters and
# children): tag t to band t-1, everything else to band 15, pfifo
# BAND_LIMIT each
prio16_filters() {
	local d=$1 h=$2 b
	for b in $(seq 1 15); do
		tcx filter add dev "$d" parent "$h:" protocol ip prio 1 u32 \
			match ip dsfield $((b << 2)) 0xfc flowid "$h:$(printf %x "$b")" || return 1
	done
	tcx filter add dev "$d" parent "$h:" protocol ip prio 2 u32 match u32 0 0 flowid "$h:10" || return 1
	for b in $(seq 1 16); do
		tcx qdisc add dev "$d" parent "$h:$(printf %x "$b")" pfifo limit "$BAND_LIMIT" || return 1
	done
}
shared_scheme() {
	local s=$1 d=$2 last=(15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)
	local qu=$((MTU + 14)) qt=0 share=() fl=()
	[ "$SHARE" -gt 0 ] && qt=$((qu * (100 - SHARE) / SHARE)) share=(untagged_share "$SHARE")
	tcx_start "$s" "$d"
	case $s in
	prio-last)
		tcx qdisc add dev "$d" parent 1:1 handle 10: prio bands 16 priomap "${last[@]}" &&
		prio16_filters "$d" 10 ;;
	ets-strict)
		tcx qdisc add dev "$d" parent 1:1 handle 10: ets bands 16 strict 16 priomap "${last[@]}" &&
		prio16_filters "$d" 10 ;;
	ets-quanta)
		tcx qdisc add dev "$d" parent 1:1 handle 10: ets bands 2 quanta "$qt" "$qu" \
			priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 &&
		tcx filter add dev "$d" parent 10: protocol ip prio 1 u32 \
			match ip dsfield 0 0xfc flowid 10:2 &&
		tcx filter add dev "$d" parent 10: protocol ip prio 2 u32 match u32 0 0 flowid 10:1 &&
		tcx qdisc add dev "$d" parent 10:2 pfifo limit "$LIMIT" &&
		tcx qdisc add dev "$d" parent 10:1 handle 20: prio bands 16 priomap "${last[@]}" &&
		prio16_filters "$d" 20 ;;
	mercury-share|mercury-fl)
		[ "$s" = mercury-fl ] && fl=(flow_limit "$FLOW_LIMIT")
		tcx qdisc add dev "$d" parent 1:1 handle 10: mercury tag dscp untagged last \
			"${share[@]}" limit "$LIMIT" memory_limit "$MEMLIMIT" "${fl[@]}" ;;
	fq)
		tcx qdisc add dev "$d" parent 1:1 handle 10: fq limit "$FQ_LIMIT" flow_limit "$FQ_LIMIT" ;;
	*) return 1 ;;
	esac
}
# --- end BT_BULK ---

set_scheme() {
	local d q b
	for i in $(seq 0 $((PORTS - 1))); do
		d=${ports[$i]}
		$TC qdisc del dev "$d" root 2>/dev/null
		$TC qdisc add dev "$d" root handle 1: tbf rate "$RATE" burst "$BURST" \
			limit 100000000 || return 1
		case $1 in
		fifo) q=(pfifo limit "$LIMIT") ;;
		prio) q=(prio bands 16 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0) ;;
		# (memory_limit: at least what LIMIT full-size packets take,
		# so that a deep queue drops by count, as pfifo does)
		mercury) q=(mercury tag dscp limit "$LIMIT" memory_limit "$MEMLIMIT") ;;
		# --- BT_BULK (make bench-shared) ---
		prio-last|ets-strict|ets-quanta|mercury-share|mercury-fl|fq)
			shared_scheme "$1" "$d" || return 1
			continue ;;
		# --- end BT_BULK ---
		*) echo "# unknown scheme $1"; return 1 ;;
		esac
		# (their lines logged as shared_scheme's are: tc-SCHEME.txt)
		tcx_start "$1" "$d"
		tcx qdisc add dev "$d" parent 1:1 handle 10: "${q[@]}" || return 1
		[ "$1" = prio ] || continue
		# (class minors are hexadecimal: band 15 is 10:10)
		for b in $(seq 0 14); do
			tcx filter add dev "$d" parent 10: protocol ip prio 1 u32 \
				match ip dsfield $((b << 2)) 0xfc flowid 10:$(printf %x $((b + 1))) || return 1
		done
		tcx filter add dev "$d" parent 10: protocol ip prio 2 u32 \
			match u32 0 0 flowid 10:10 || return 1
		for b in $(seq 1 16); do
			tcx qdisc add dev "$d" parent 10:$(printf %x $b) pfifo limit "$LIMIT" || return 1
		done
	done
}

stats() {
	for d in "${ports[@]:0:$PORTS}"; do
		echo "== $d"
		$TC -s qdisc show dev "$d"
		# --- BT_BULK, scenario 2: per-class drops (sch_mercury's
		# levels, minor = tag) and the port's frames (ip -s link) ---
		if [ -n "$BYTES" ]; then
			$TC -s class show dev "$d"
			$IP -s link show dev "$d"
		fi
		# --- end BT_BULK ---
	done
}

# sampler FILE: every half second, the guest's uptime and each port's
# transmitted bytes (builtins only, but sleep: cheap in the slow guest),
# so that the report can tell when the link was busy during a run; and
# into FILE.cpu the uptime and the CPU time of all vCPUs and of each
# from /proc/stat's cpu lines (10 tick counts each: user nice system
# idle iowait irq softirq steal guest guest_nice), so that it can tell
# whether the guest, or one of its vCPUs, had time to spare.
sampler() {
	local t rest b line d cpu cpus
	while :; do
		read -r t rest < /proc/uptime
		line=$t
		for d in "${ports[@]:0:$PORTS}"; do
			read -r b < "/sys/class/net/$d/statistics/tx_bytes"
			line="$line $b"
		done
		echo "$line"
		cpus=$t
		while read -r cpu rest; do
			case $cpu in cpu*) cpus="$cpus $rest" ;; *) break ;; esac
		done < /proc/stat
		echo "$cpus" >&3
		sleep 0.5
	done > "$1" 3> "$1.cpu"
}

echo ready > "$OUT/guest.ready"
n=0
spid=""
while :; do
	req=$OUT/req.$n
	t=0
	while [ ! -e "$req" ] && [ $t -lt $((WAIT * 10)) ]; do
		sleep 0.1
		t=$((t + 1))
	done
	[ -e "$req" ] || { ktap_fail "no request $n from the host in ${WAIT}s"; break; }
	[ -n "$spid" ] && { kill "$spid"; wait "$spid"; spid=""; } 2>/dev/null
	[ $n -gt 0 ] && stats > "$OUT/stats.$((n - 1))"
	read -r scheme < "$req"
	[ "$scheme" = done ] && { ktap_ok "served $n schemes"; break; }
	if set_scheme "$scheme"; then
		stats > "$OUT/ack.$n.tmp"
		sampler "$OUT/util.$n" &
		spid=$!
	else
		echo "FAILED" > "$OUT/ack.$n.tmp"
	fi
	mv "$OUT/ack.$n.tmp" "$OUT/ack.$n"
	n=$((n + 1))
done
ktap_finish
