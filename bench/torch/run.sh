#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# make bench-torch: real PyTorch training (torchvision models, 2 ranks)
# under stock DDP, the DDP variants a PyTorch user would try first
# (tuned buckets, fp16/bf16 compression hooks, PowerSGD) and
# mercury.torch, with the network in the guest.
#
#   bench/torch/run.sh [-o OUTDIR]       (default OUTDIR: out/bench-torch)
#   BT_QUICK=1 bench/torch/run.sh        every scheme once, 3 iterations of
#                                        a tiny model: a plumbing check and
#                                        a preview, not a result
#   BT_FULL=1 bench/torch/run.sh         the issue's whole design: resnet18,
#                                        vgg11 and vit, every scheme, 2
#                                        repetitions in each of 3 boots
#
# The default measures the transformer (vit) under the issue's schemes
# (all but 8-channel pfifo), 2 repetitions in each of 3 guest boots: 6
# paired runs per ratio in 3 boots, 60 min on a busy 2-core host
# (2026-12-04; 9 schemes x 6 runs of about 50 s, vit having 20 MB of
# gradients to resnet18's 45 MB, and per boot about 2 min of boot,
# build and probes, 3 more in the first for the size rule's profiles
# and the ddp-tuned sweep). resnet18's
# runs take 2.5-3 min each (2026-12-05: a boot of 8 schemes x 2 runs
# 45 min, the profiles and sweep 13 more: about 2.5 h for 3 boots),
# vgg11's (39 MB of gradients, 96 px) 2-2.5 min (a boot of its 9
# schemes once 22 min, the profiles and sweep 10 more), so BT_FULL=1
# takes presumably 5-6 hours.
#
# BT_BOOTS=N boots the guest N times (default 3; 1 with BT_QUICK=1,
# BT_CAPTURE=1 or BT_BULK=1). With N > 1 each boot runs every repetition
# of every scheme into OUTDIR/boot-K, and one report in OUTDIR pools
# them; the first boot chooses the sizes (the size rule) and ddp-tuned's
# bucket_cap_mb, the later ones measure that same configuration
# (OUTDIR/boot-1/chosen.env, passed as BT_<MODEL>_SIZE and
# BT_<MODEL>_CAP) and reuse the first boot's profiles and simulations.
# With N = 1 the run lands in OUTDIR itself.
#
# PyTorch in the emulated guest is ~200x slower than on the host, so the
# ranks run on the host at native speed, each in its own network namespace
# whose only device is a tap that is one port of the guest:
#
#   host ns mtb-$$-0            guest (qemu TCG)            host ns mtb-$$-1
#   rank 0  tap 10.77.1.2 --- port 0 10.77.1.1   port 1 10.77.2.1 --- tap 10.77.2.2  rank 1
#                             egress: tbf RATE    egress: tbf RATE
#                               -> scheme qdisc     -> scheme qdisc
#
# The guest routes between its ports; the queue of what rank 0 sends to
# rank 1 builds on port 1's egress, which stands in for rank 0's NIC queue.
# mercury.torch tags its channels with the DSCP, the only tag that crosses
# this link (skb mark and priority stay on the host). One guest boot serves
# every run of a boot (bench/torch/guest.sh); the schemes alternate within
# each repetition so that the host's load falls on all of them alike.
#
# Settings (environment): BT_MODELS ("vit"; BT_FULL=1: "resnet18 vgg11
# vit"), BT_BOOTS, BT_RATE (guest
# link rate), BT_LIMIT (packets each scheme's queue holds, default 48 MB
# of full-size packets, 32000 at MTU 1500, deep enough that no scheme
# drops; prio: each band), BT_RTO_MIN,
# BT_REPEAT (2), BT_ITERS, BT_WARMUP, BT_MTU, BT_SCHEMES (default all of
# "ddp ddp-tuned ddp-fp16 ddp-bf16 ddp-powersgd fifo1 prio mercury
# fifo1-fp16 mercury-fp16", with BT_QUICK=1 or BT_FULL=1 also fifo, that
# this torch and mercury.torch can run: worker.py --probe decides, and
# the run says which it left out; fifo1 is pfifo with one channel, fifo
# pfifo with BT_CHANNELS), BT_DDP_BUCKETS ("1 5 25": the bucket_cap_mb
# values ddp-tuned chooses from, each with gradient_as_bucket_view on
# and off, BT_TUNE_ITERS iterations each, on the guest's pfifo before
# the repetitions; BT_<MODEL>_CAP: CAP or CAP:on / CAP:off instead of
# the sweep), BT_POWERSGD_RANK (2),
# BT_POWERSGD_START (2: the smallest start_powerSGD_iter torch allows with
# error feedback; a short run never compresses at the default 1000),
# BT_CHANNELS (8: mercury.torch's channels in the other schemes),
# BT_<MODEL>_BATCH / BT_<MODEL>_SIZE (default auto: the size whose step
# computes as long as its gradients take on the link, from a profile),
# BT_DEADLINE, BT_CC (TCP congestion control of the ranks: the first of
# "cubic reno" the namespace allows), BT_RUN_TIMEOUT (900 s: a run
# that outlasts it has hung, and its scheme is left out of that model's
# later repetitions and boots, as skipped.txt says; the bucket sweep
# has it for each of its configurations),
# BT_GUEST_CPUS / BT_RANK_CPUS (taskset CPU lists for qemu and for the
# ranks and their profiles: on a 2-core host the emulated network needs
# a core of its own, or every overlap of compute with communication is
# charged the guest's forwarding as compute time).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/bench/torch
out=$top/out/bench-torch
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift ;;
	-h|--help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "bench-torch: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
PY=${TORCH_PYTHON:-/usr/bin/python3}
ALL_SCHEMES="ddp ddp-tuned ddp-fp16 ddp-bf16 ddp-powersgd fifo fifo1 prio mercury fifo1-fp16 mercury-fp16"
QUICK=${BT_QUICK:-0}
# the issue's schemes: 8-channel pfifo (fifo) explains the queues, it is
# no choice a user has that the others do not cover
SCHEMES=${BT_SCHEMES:-${ALL_SCHEMES/ fifo / }}
if [ "$QUICK" = 1 ]; then
	# every scheme once, a few iterations of a tiny model at a fixed size
	MODELS=${BT_MODELS:-tiny}
	SCHEMES=${BT_SCHEMES:-$ALL_SCHEMES}
	REPEAT=${BT_REPEAT:-1}
	ITERS=${BT_ITERS:-3}
	TUNE_ITERS=${BT_TUNE_ITERS:-2}
	BOOTS=${BT_BOOTS:-1}
elif [ "${BT_FULL:-0}" = 1 ]; then
	MODELS=${BT_MODELS:-resnet18 vgg11 vit}
	SCHEMES=${BT_SCHEMES:-$ALL_SCHEMES}
	REPEAT=${BT_REPEAT:-2}
	ITERS=${BT_ITERS:-6}
	TUNE_ITERS=${BT_TUNE_ITERS:-3}
	BOOTS=${BT_BOOTS:-3}
else
	MODELS=${BT_MODELS:-vit}
	REPEAT=${BT_REPEAT:-2}
	ITERS=${BT_ITERS:-6}
	TUNE_ITERS=${BT_TUNE_ITERS:-3}
	# make demo's capture and bench-shared's table read one run
	# directory: one boot unless asked for more
	BOOTS=${BT_BOOTS:-3}
	[ "${BT_CAPTURE:-0}" = 1 ] || [ "${BT_BULK:-0}" = 1 ] && BOOTS=${BT_BOOTS:-1}
fi
RATE=${BT_RATE:-30mbit}
# the rate the size rule balances a step's compute against (BT_BALANCE_RATE:
# half of RATE makes the compute twice the wire time, a job that leaves
# half the link to another: bench/shared's two-job scenario)
BALANCE_RATE=${BT_BALANCE_RATE:-$RATE}
MTU=${BT_MTU:-1500}
WARMUP=${BT_WARMUP:-1}
DDP_BUCKETS=${BT_DDP_BUCKETS:-1 5 25}
POWERSGD_RANK=${BT_POWERSGD_RANK:-2}
POWERSGD_START=${BT_POWERSGD_START:-2}
CHANNELS=${BT_CHANNELS:-8}
# The guest's queue stands in for the sending node's NIC queue, and a
# host's own qdisc seldom drops its TCP packets: TCP small queues keep
# the backlog in the sockets. A router's queue has no such back-pressure,
# so a shallow one here drops what a host would hold, and the drops, not
# the order, decide the result (Documentation/torch.md). 48 MB whatever
# the MTU (32000 packets at 1500) held every scheme's backlog without a
# drop; the report prints the drops, so a run where it did not says so.
LIMIT=${BT_LIMIT:-$((48000000 / MTU))}
RTO_MIN=${BT_RTO_MIN:-}
CC=${BT_CC:-cubic reno}
RUN_TIMEOUT=${BT_RUN_TIMEOUT:-900}
# command prefixes that pin qemu and the ranks (empty: anywhere)
guest_pin=()
rank_pin=()
[ -n "${BT_GUEST_CPUS:-}" ] && guest_pin=(taskset -c "$BT_GUEST_CPUS")
[ -n "${BT_RANK_CPUS:-}" ] && rank_pin=(taskset -c "$BT_RANK_CPUS")
# Batch per rank, and the input size (pixels a side): "auto" chooses it
# from a profile at the probe size (below).
resnet18_batch=${BT_RESNET18_BATCH:-32} resnet18_size=${BT_RESNET18_SIZE:-auto}
vgg11_batch=${BT_VGG11_BATCH:-64} vgg11_size=${BT_VGG11_SIZE:-auto}
tiny_batch=${BT_TINY_BATCH:-8} tiny_size=${BT_TINY_SIZE:-32}
# vit's sizes must be multiples of its 16 px patch: its probe is, and so
# is every size the rule picks (report.py rounds to 32 px).
vit_batch=${BT_VIT_BATCH:-32} vit_size=${BT_VIT_SIZE:-auto}
resnet18_probe=128 vgg11_probe=64 vit_probe=128 tiny_probe=64

die() { echo "bench-torch: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, tap devices)"
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
	die "$PY has no torch/torchvision (scripts/install-deps.sh)"
case $BOOTS in ''|*[!0-9]*|0*) die "BT_BOOTS must be a number from 1, not '$BOOTS'" ;; esac
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

# Several boots: this script once per boot (BT_BOOT=K) into
# OUTDIR/boot-K, the first boot's choices passed on, then one report of
# them all. A signal stops the boot under way (its cleanup stops the
# guest) and the rest.
if [ "$BOOTS" -gt 1 ] && [ -z "${BT_BOOT:-}" ]; then
	# (and a one-boot run's leftovers: report.py reads OUTDIR/runs
	# before any boot-K)
	rm -rf "$out"/boot-* "$out"/bench-torch.txt "$out"/bench-torch.json \
		"$out"/bench-torch.png "$out"/bench-torch-ratios.png "$out"/plot-*.dat "$out"/ratios-*.dat \
		"$out/runs" "$out"/req.* "$out"/ack.* "$out"/stats.* "$out"/util.* "$out/guest.ready" \
		"$out"/tune-*.txt "$out/skipped.txt" "$out/chosen.env" "$out/torch.env" "$out"/profile-*.json
	child=""
	trap '[ -n "$child" ] && { kill -TERM "$child"; wait "$child"; }; exit 1' INT TERM
	rc=0 t0=$(date +%s) last=0
	for k in $(seq 1 "$BOOTS"); do
		# BT_DEADLINE: no boot is started that the last one's length
		# says would end after it (each boot also checks its repetitions)
		if [ -n "${BT_DEADLINE:-}" ] && [ $k -gt 1 ] &&
		   [ $(( $(date +%s) + last )) -gt "$(date -d "$BT_DEADLINE" +%s)" ]; then
			echo "bench-torch: stopping after $((k - 1)) boots (deadline $BT_DEADLINE)"
			break
		fi
		tb=$(date +%s)
		echo "bench-torch: boot $k of $BOOTS -> $out/boot-$k"
		BT_BOOT=$k "$here/run.sh" -o "$out/boot-$k" &
		child=$!
		wait $child || { rc=1; echo "bench-torch: boot $k failed" >&2; }
		child=""
		[ -s "$out/boot-$k/hung.txt" ] &&
			export BT_HUNG="${BT_HUNG:-} $(tr '\n' ' ' < "$out/boot-$k/hung.txt")"
		last=$(( $(date +%s) - tb ))
		if [ $k = 1 ]; then
			[ -s "$out/boot-1/chosen.env" ] ||
				die "boot 1 chose no sizes: no later boot can repeat its configuration"
			set -a
			. "$out/boot-1/chosen.env"
			set +a
			echo "bench-torch: the later boots reuse boot 1's choices:" $(cat "$out/boot-1/chosen.env")
		fi
	done
	echo "bench-torch: boots done in $(( ($(date +%s) - t0) / 60 )) min; their runs pooled:"
	# --- BT_BULK: the shared-NIC table instead of bench-torch's ---
	if [ "${BT_BULK:-0}" = 1 ]; then
		"$PY" "$top/bench/shared/report.py" --out "$out" $([ "$QUICK" = 1 ] && echo --quick) \
			"$out"/boot-* || exit 1
		exit $rc
	fi
	# --- end BT_BULK ---
	"$PY" "$here/report.py" --rate "$RATE" --out "$out" $([ "$QUICK" = 1 ] && echo --quick) || exit 1
	exit $rc
fi
boot=${BT_BOOT:-1}
rm -rf "$out/runs" "$out"/req.* "$out"/ack.* "$out"/stats.* "$out"/util.* "$out/guest.ready" \
	"$out"/tune-*.txt "$out/skipped.txt" "$out/chosen.env" "$out/hung.txt"
mkdir -p "$out/runs"

# worker_scheme SCHEME: the training code of a bench scheme (worker.py's
# --scheme); the queue and channels are chosen in the repetitions' loop.
worker_scheme() {
	case $1 in
	ddp|ddp-*) echo "$1" ;;
	*-fp16) echo mercury-fp16 ;;
	fifo|fifo1|prio|mercury) echo mercury ;;
	# --- BT_BULK: bench/shared's queues, under mercury.torch ---
	prio-last|ets-strict|ets-quanta|mercury-share|mercury-fl|fq) echo mercury ;;
	# --- end BT_BULK ---
	*) return 1 ;;
	esac
}
# Built before the probe: mercury.torch loads libmercury when imported.
echo "bench-torch: building"
{ make -C "$top" module && make -C "$top" tc-plugin &&
  make -C "$top/userspace/lib" && make -C "$top/userspace/sim"; } > "$out/build.log" 2>&1 ||
	{ tail -n 30 "$out/build.log"; die "build failed (log: $out/build.log)"; }

# Keep the schemes this torch and mercury.torch can run, as a user would
# find out: worker.py probes the features (a DDP hook takes steps in a
# one-rank group; mercury-fp16 needs distribute(compression=...)).
ws=()
for sch in $SCHEMES; do
	w=$(worker_scheme "$sch") || die "unknown scheme $sch (known: $ALL_SCHEMES)"
	ws+=("$w")
done
probe=$(PYTHONPATH=$top/userspace/python "$PY" "$here/worker.py" --probe $(printf '%s\n' "${ws[@]}" | sort -u)) ||
	die "worker.py --probe failed"
kept=""
for sch in $SCHEMES; do
	w=$(worker_scheme "$sch")
	why=$(awk -v w="$w" '$1 == w { $1 = ""; sub(/^ /, ""); print }' <<< "$probe")
	if [ "$why" = ok ]; then
		kept="$kept $sch"
	else
		echo "bench-torch: leaving out $sch: ${why#no: }" | tee -a "$out/skipped.txt"
	fi
done
SCHEMES=${kept# }
[ -n "$SCHEMES" ] || die "no scheme left to run"
quick=()
if [ "$QUICK" = 1 ]; then
	quick=(--quick)
	echo "bench-torch: quick: $MODELS, $ITERS iterations, $REPEAT repetition(s): a preview, not a result"
fi
echo "bench-torch: schemes: $SCHEMES${BT_BOOT:+ (boot $BT_BOOT of $BOOTS)}"

cat > "$out/torch.env" <<-EOT
	PORTS=2
	RATE=$RATE
	MTU=$MTU
	LIMIT=$LIMIT
	QUICK=$QUICK
	SCHEMES="$SCHEMES"
	POWERSGD_RANK=$POWERSGD_RANK
	POWERSGD_START=$POWERSGD_START
	EOT
# --- BT_BULK (make bench-shared: bench/shared/run.sh) ---
# BT_BULK=1: after each run, the same scheme again (a fresh qdisc) with an
# untagged bulk TCP transfer (bench/shared/bulk.py: a checkpoint upload)
# from rank 0's namespace to rank 1's over the same guest egress (port 1),
# started BT_BULK_LEAD (0) seconds after the ranks begin training and
# running until they end; the receiver counts its bytes per 5 s window
# (runs/TAG.bulk, TAG MODEL.SCHEME+bulk.REP). BT_SHARE: sch_mercury's
# untagged_share and ets-quanta's split. The report is
# bench/shared/report.py's.
# BT_SCENARIO=shallow (bench/shared's scenario 2): no bulk runs, and
# BT_BYTES, every scheme's whole buffer in bytes (guest.sh's BYTES); the
# ranks' TCP then sends one frame per skb (their taps' gso_max_size), and
# the idle link's round trip is measured once (runs/rtt.txt).
BULK=${BT_BULK:-0}
BULK_LEAD=${BT_BULK_LEAD:-0}
BULK_TIMEOUT=${BT_BULK_TIMEOUT:-60}	# seconds of training beside the bulk, at most
SCENARIO=${BT_SCENARIO:-bulk}
BYTES=${BT_BYTES:-}
[ "$BULK" = 1 ] && printf "SHARE=%s\nITERS=%s\nRUN_TIMEOUT=%s\nBULK_TIMEOUT=%s\nSCENARIO=%s\n" "${BT_SHARE:-10}" \
	"$ITERS" "$RUN_TIMEOUT" "$BULK_TIMEOUT" "$SCENARIO" >> "$out/torch.env"
[ "$BULK" = 1 ] && [ -n "$BYTES" ] && printf "BYTES=%s\nCHANNELS=%s\n" "$BYTES" "$CHANNELS" >> "$out/torch.env"
# BT_FLOW_LIMIT: sch_mercury's flow_limit in the mercury-fl scheme
# (default: guest.sh's per-band split of BYTES)
[ -n "${BT_FLOW_LIMIT:-}" ] && printf "FLOW_LIMIT=%s\n" "$BT_FLOW_LIMIT" >> "$out/torch.env"
# tap_dropped TAG: append both taps' tx_dropped (packets the host dropped
# before the guest: qemu not reading them) to runs/TAG.tapdrops; called
# before and after a run
tap_dropped() {
	local i
	for i in 0 1; do
		ip netns exec "${ns[$i]}" cat "/sys/class/net/${tap[$i]}/statistics/tx_dropped"
	done >> "$out/runs/$1.tapdrops"
}
# --- end BT_BULK ---

# Two namespaces, one tap each; qemu opens the taps, then they move.
ns=(mtb-$$-0 mtb-$$-1)
tap=(mtb$$t0 mtb$$t1)
vm=""
cleanup() {
	# vm-run.sh's timeout passes the signal on to qemu
	[ -n "$vm" ] && { pkill -TERM -P "$vm"; kill "$vm"; } 2>/dev/null
	for i in 0 1; do
		ip netns pids "${ns[$i]}" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "${ns[$i]}" 2>/dev/null
		ip link del "${tap[$i]}" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 1' INT TERM
for i in 0 1; do
	ip netns add "${ns[$i]}" || die "cannot create namespace ${ns[$i]}"
	ip tuntap add "${tap[$i]}" mode tap || die "cannot create tap ${tap[$i]}"
	ip link set "${tap[$i]}" up
done

echo "bench-torch: host load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/hostload.txt"
# The guest script lasts the whole benchmark: lift vm-guest.sh's 900 s
# limit (the kernel passes VAR=VAL of its command line to init).
VM_APPEND="${VM_APPEND:-} MERCURY_TEST_TIMEOUT=$((RUN_TIMEOUT * 40))" \
"${guest_pin[@]}" "$top/scripts/vm-run.sh" -o "$out" -t $((RUN_TIMEOUT * 40 + 600)) -n "${tap[0]}" -n "${tap[1]}" \
	"$here/guest.sh" > "$out/vm-run.out" 2>&1 &
vm=$!
for i in 0 1; do
	t=0
	until [ "$(cat /sys/class/net/${tap[$i]}/carrier 2>/dev/null)" = 1 ]; do
		kill -0 $vm 2>/dev/null || { cat "$out/vm-run.out"; die "qemu did not start"; }
		sleep 0.2; t=$((t + 1))
		[ $t -lt 300 ] || die "qemu did not attach ${tap[$i]}"
	done
	# qemu holds the tap: it stays attached in the rank's namespace.
	ip link set "${tap[$i]}" netns "${ns[$i]}" || die "cannot move ${tap[$i]}"
	n=(ip -n "${ns[$i]}")
	"${n[@]}" link set lo up
	"${n[@]}" link set "${tap[$i]}" mtu "$MTU" up
	"${n[@]}" addr add "10.77.$((i + 1)).2/24" dev "${tap[$i]}"
	# BT_RTO_MIN (e.g. 3s): the ranks' minimum retransmission timeout,
	# to measure what the timeouts of starved channels cost
	"${n[@]}" route add default via "10.77.$((i + 1)).1" ${RTO_MIN:+rto_min "$RTO_MIN"} ||
		die "cannot set the default route of ${ns[$i]}"
	# Loss-based congestion control (Linux's default, cubic) whatever the
	# host's: a paced BBR keeps the bottleneck queue nearly empty, and a
	# qdisc can only order what waits in it. A namespace may only pick
	# from tcp_allowed_congestion_control (here: reno bbr), hence the list.
	for c in $CC; do
		ip netns exec "${ns[$i]}" sysctl -qw net.ipv4.tcp_congestion_control="$c" 2>/dev/null && break
	done
	c=$(ip netns exec "${ns[$i]}" sysctl -n net.ipv4.tcp_congestion_control)
	case " $CC " in *" $c "*) ;; *) die "cannot use any of: $CC (is: $c)" ;; esac
	echo "bench-torch: ${ns[$i]}: TCP congestion control $c" | tee -a "$out/hostload.txt"
	# The host side of the tap queues FIFO whatever the scheme (a queue
	# here would mean the guest, not the link, is the bottleneck).
	ip netns exec "${ns[$i]}" tc qdisc replace dev "${tap[$i]}" root pfifo limit 1000
	# --- BT_BULK, scenario 2: one frame per skb (no TSO/GSO aggregate),
	# so that the guest's packet limits are limits on frames ---
	if [ "$BULK" = 1 ] && [ -n "$BYTES" ]; then
		"${n[@]}" link set "${tap[$i]}" gso_max_size "$MTU" || die "cannot set gso_max_size of ${tap[$i]}"
	fi
	# --- end BT_BULK ---
done
t=0
until [ -e "$out/guest.ready" ]; do
	kill -0 $vm 2>/dev/null || { cat "$out/vm-run.out"; die "the guest stopped"; }
	sleep 0.5; t=$((t + 1))
	[ $t -lt 1200 ] || die "the guest did not come up"
done
echo "bench-torch: guest up"

# guest SCHEME: have the guest put SCHEME on its ports; waits for it.
nreq=0
guest() {
	echo "$1" > "$out/req.$nreq.tmp" && mv "$out/req.$nreq.tmp" "$out/req.$nreq"
	[ "$1" = done ] && return 0
	local t=0
	until [ -e "$out/ack.$nreq" ]; do
		kill -0 $vm 2>/dev/null || die "the guest stopped"
		sleep 0.2; t=$((t + 1))
		[ $t -lt 600 ] || die "the guest did not set $1"
	done
	grep -q FAILED "$out/ack.$nreq" && die "the guest could not set $1"
	nreq=$((nreq + 1))
}

# profile MODEL BATCH SIZE: the profile the simulator is given, measured
# in this run on the host: two copies at once, as the two ranks run, one
# thread each; the first one's profile is used (out/profile-MODEL.json).
profile() {
	local c pp=()
	for c in 0 1; do
		PYTHONPATH=$top/userspace/python OMP_NUM_THREADS=1 "${rank_pin[@]}" "$PY" -m mercury.torch profile \
			--model "$here/models.py:$1" --input "${2}x3x${3}x${3}" --iters 3 --warmup 1 \
			-o "$out/runs/profile-$1.$c.json" > "$out/runs/profile-$1.$c.log" 2>&1 &
		pp+=($!)
	done
	wait "${pp[@]}"
	mv "$out/runs/profile-$1.0.json" "$out/profile-$1.json" ||
		{ cat "$out/runs/profile-$1.0.log"; die "profile of $1 failed"; }
	echo "bench-torch: $(cat "$out/runs/profile-$1.0.log")"
}

for m in $MODELS; do
	probe=""
	eval "b=\$${m}_batch s=\$${m}_size"
	# A later boot measures the first boot's sizes; the report takes
	# the profiles and simulations of the first.
	[ "$boot" -gt 1 ] && [ "$s" != auto ] && continue
	# A size of "auto": the one at which a step's compute on this host
	# equals its gradients' time on the link (communication-bound, with
	# as much to overlap as to send), from a profile at the probe size;
	# the machine's speed, not a constant, then sets the balance.
	if [ "$s" = auto ]; then
		eval "probe=\$${m}_probe"
		profile "$m" "$b" "$probe"
		read -r s c w < <("$PY" "$here/report.py" --balance "$out/profile-$m.json" \
			--size "$probe" --rate "$BALANCE_RATE") || die "cannot choose the size of $m"
		echo "bench-torch: $m: compute $c s a step at $probe px against $w s of" \
			"gradients at $BALANCE_RATE: size $s px" | tee -a "$out/hostload.txt"
		eval "${m}_size=$s"
	fi
	if [ -n "$probe" ] && [ "$probe" != "$s" ]; then
		# Compute seldom grows exactly with the pixels: one more step,
		# from how it grew between the probe and this size, unless
		# this size is already within 20% of the balance.
		mv "$out/profile-$m.json" "$out/runs/profile-$m.probe.json"
		profile "$m" "$b" "$s"
		read -r s2 c w < <("$PY" "$here/report.py" --balance "$out/profile-$m.json" \
			--size "$s" --rate "$BALANCE_RATE" --prev "$out/runs/profile-$m.probe.json" \
			--prev-size "$probe") || die "cannot choose the size of $m"
		echo "bench-torch: $m: compute $c s a step at $s px against $w s of" \
			"gradients: size $s2 px" | tee -a "$out/hostload.txt"
		if [ "$s2" != "$s" ]; then
			s=$s2
			eval "${m}_size=$s"
			profile "$m" "$b" "$s"
		fi
	elif [ -z "$probe" ]; then
		profile "$m" "$b" "$s"
	fi
	for sch in fifo-stream prio mercury; do
		"$top/userspace/sim/mercury-sim" --profile "$out/profile-$m.json" --workers 2 \
			--servers 2 --bandwidth "$RATE" --mtu "$MTU" --scheme "$sch" --json \
			> "$out/runs/sim-$m-$sch.json" || die "mercury-sim failed on $m"
	done
done
# What a later boot repeats (BT_BOOTS): the sizes, and ddp-tuned's cap
# (appended below).
for m in $MODELS; do
	eval "echo BT_${m^^}_SIZE=\$${m}_size"
done > "$out/chosen.env"

# net_counters TAG SUFFIX: each namespace's TCP counters, before (net0)
# and after (net1) a run; report.py diffs them: retransmissions and
# timeouts say what the queue did to the senders. Also the host's CPU
# ticks (TAG.cpu0/cpu1: how busy the cores the ranks and the guest share
# were).
net_counters() {
	local i
	for i in 0 1; do
		ip netns exec "${ns[$i]}" cat /proc/net/snmp /proc/net/netstat \
			> "$out/runs/$1.r$i.$2"
	done
	head -n 1 /proc/stat > "$out/runs/$1.cpu${2#net}"
}

# run_ranks SCHEME MODEL TAG CHANNELS [WORKER ARGS...]: both ranks, each
# in its namespace (SCHEME: worker.py's), each stopped after RUN_LIMIT
# seconds (default RUN_TIMEOUT).
nrun=0
run_ranks() {
	local i pids=() rc=0 b s limit=${RUN_LIMIT:-$RUN_TIMEOUT}
	eval "b=\$${2}_batch s=\$${2}_size"
	nrun=$((nrun + 1))
	net_counters "$3" net0
	for i in 0 1; do
		ip netns exec "${ns[$i]}" env MASTER_ADDR=10.77.1.2 MASTER_PORT=$((29500 + nrun)) \
			RANK=$i WORLD_SIZE=2 GLOO_SOCKET_IFNAME="${tap[$i]}" OMP_NUM_THREADS=1 \
			timeout -k 10 "$limit" "${rank_pin[@]}" "$PY" "$here/worker.py" --scheme "$1" --model "$2" \
			--batch "$b" --size "$s" --iters "$ITERS" --warmup "$WARMUP" \
			--channels "$4" "${@:5}" -o "$out/runs/$3.r$i.json" \
			> "$out/runs/$3.r$i.log" 2>&1 &
		pids+=($!)
	done
	# 124: a rank outlasted its limit (timeout's status; 137 after
	# its -k), which the repetitions' loop treats as a hang
	for i in 0 1; do
		wait "${pids[$i]}" && continue
		case $? in 124|137) rc=124 ;; *) [ $rc = 124 ] || rc=1 ;; esac
	done
	net_counters "$3" net1
	return $rc
}

# ddp-tuned: the bucket_cap_mb of BT_DDP_BUCKETS and gradient_as_bucket_view
# (on, off) that trained fastest on this machine and link, as a user
# tuning DDP would choose them: BT_TUNE_ITERS iterations each, after the
# first, the slower rank's; printed ("CAP:on", "CAP:off"), and in
# out/tune-MODEL.txt for the report.
case " $SCHEMES " in *" ddp-tuned "*)
	guest fifo
	for m in $MODELS; do
		eval "cap=\${BT_${m^^}_CAP:-}"
		if [ -n "$cap" ]; then
			case $cap in
			[0-9]*:on|[0-9]*:off) ;;
			*:*|[!0-9]*) die "BT_${m^^}_CAP=$cap: not CAP, CAP:on or CAP:off" ;;
			esac
			eval "${m}_cap=$cap"
			echo "BT_${m^^}_CAP=$cap" >> "$out/chosen.env"
			echo "bench-torch: $m: ddp-tuned uses bucket_cap_mb:gradient_as_bucket_view" \
				"$cap (BT_${m^^}_CAP)" | tee -a "$out/hostload.txt"
			continue
		fi
		caps=$(echo $DDP_BUCKETS | tr ' ' ,)
		# the sweep is a run of each configuration in turn: a run's
		# limit for each of them
		limit=$((RUN_TIMEOUT * 2 * $(echo $DDP_BUCKETS | wc -w)))
		RUN_LIMIT=$limit ITERS=$TUNE_ITERS run_ranks ddp-tuned "$m" "tune-$m" "$CHANNELS" --tune "$caps" || {
			[ $? = 124 ] && die "the bucket_cap_mb sweep of $m outlasted its $limit s" \
				"(BT_RUN_TIMEOUT for each of its configurations)"
			tail -n 5 "$out/runs/tune-$m.r0.log"; die "the bucket_cap_mb sweep of $m failed"; }
		"$PY" - "$out/runs/tune-$m.r0.json" "$out/runs/tune-$m.r1.json" > "$out/tune-$m.txt" <<-'EOT' ||
			import json, sys
			t = [json.load(open(p))["tune"] for p in sys.argv[1:]]
			slow = {c: max(r[c] for r in t) for c in t[0]}
			best = min(slow, key=slow.get)
			print(best)
			for c in sorted(slow, key=lambda c: (float(c.split(":")[0]), c)):
			    print(c, "%.4f" % slow[c])
			EOT
			die "cannot choose bucket_cap_mb for $m"
		read -r cap < "$out/tune-$m.txt"
		eval "${m}_cap=$cap"
		echo "BT_${m^^}_CAP=$cap" >> "$out/chosen.env"
		echo "bench-torch: $m: ddp-tuned uses bucket_cap_mb:gradient_as_bucket_view $cap" \
			"(s/iter: $(tail -n +2 "$out/tune-$m.txt" | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }'))" |
			tee -a "$out/hostload.txt"
	done ;;
esac

# --- BT_BULK ---
# bulk_run WORKER MODEL SCHEME REP QUEUE CHANNELS [WORKER ARGS...]: the
# run of the repetitions' loop again, with the bulk transfer beside it:
# the sender starts BULK_LEAD s after the ranks have passed their first
# barrier (worker.py writes BT_READY_FILE), so that it loads the
# training, not the job's start-up (its rendezvous and connections are
# untagged: under "untagged last" they would wait behind the bulk), and
# stops when the ranks end.
bulk_run() {
	local w=$1 m=$2 sch=$3 r=$4 q=$5 ch=$6 tag rx tx rr wd res t=0 rt=() i p
	shift 6
	# real-time priority where allowed: on a loaded host a receiver that
	# is not scheduled shifts bytes from one window into the next
	chrt -f 1 true 2>/dev/null && rt=(chrt -f 1)
	guest "$q"
	tag=$m.$sch+bulk.$r
	echo "$tag $nreq" >> "$out/runs/index"
	ip netns exec "${ns[1]}" "${rt[@]}" "$PY" "$top/bench/shared/bulk.py" recv --bind 10.77.2.2 \
		--port 5201 -o "$out/runs/$tag.bulk" > "$out/runs/$tag.bulk.rx.log" 2>&1 &
	rx=$!
	tap_dropped "$tag"
	until [ -e "$out/runs/$tag.bulk.ready" ] || [ $t -ge 100 ]; do sleep 0.1; t=$((t + 1)); done
	( export BT_READY_FILE=$out/runs/$tag.ready; run_ranks "$w" "$m" "$tag" "$ch" "$@" ) &
	rr=$!
	nrun=$((nrun + 1))	# run_ranks counted in its subshell
	until [ -e "$out/runs/$tag.ready" ] || ! kill -0 "$rr" 2>/dev/null; do sleep 0.1; done
	# BULK_TIMEOUT s of training at most (the start-up's time, which a
	# loaded host stretches, is not charged to the scheme): then this
	# run's two workers are stopped, found by their own record's name
	(
		sleep "$BULK_TIMEOUT"
		for i in 0 1; do
			for p in $(ip netns pids "${ns[$i]}" 2>/dev/null); do
				grep -qaF -- "$out/runs/$tag.r$i.json" "/proc/$p/cmdline" 2>/dev/null &&
					kill -TERM "$p" 2>/dev/null
			done
		done
	) &
	wd=$!
	sleep "$BULK_LEAD"
	ip netns exec "${ns[0]}" "${rt[@]}" "$PY" "$top/bench/shared/bulk.py" send --to 10.77.2.2:5201 \
		> "$out/runs/$tag.bulk.tx.log" 2>&1 &
	tx=$!
	if wait "$rr"; then res=ok; else res=FAILED; fi
	kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null
	# packets the taps dropped before the guest (qemu not reading them:
	# a host too busy for the emulated NIC), before and after the run
	tap_dropped "$tag"
	kill -TERM "$tx" 2>/dev/null; wait "$tx"
	kill -TERM "$rx" 2>/dev/null; wait "$rx"
	echo "bench-torch: [$(($(date +%s) - start))s] $m $sch run $r with the bulk: $res" \
		"($(cut -d' ' -f1 /proc/loadavg); bulk $(awk '{ b += $3 } END { print b + 0 }' \
		"$out/runs/$tag.bulk" 2>/dev/null) bytes in whole windows)"
}
# --- end BT_BULK ---

# --- BT_BULK, scenario 3 (two jobs, bench/shared/run.sh twojobs) ---
# twojobs_run WORKER MODEL SCHEME REP QUEUE CHANNELS [WORKER ARGS...]: two
# independent jobs of the same model at once, each with a rank in both
# namespaces (their own rendezvous ports), over the same guest egress;
# worker.py --job J makes mercury.torch tag job J's channels job_tag(J,
# CHANNELS, c) (stock DDP ignores it). Records: TAG MODEL.SCHEME+jobJ.REP.
twojobs_run() {
	local w=$1 m=$2 sch=$3 r=$4 q=$5 ch=$6 j pids=() res=ok
	shift 6
	guest "$q"
	for j in 0 1; do
		echo "$m.$sch+job$j.$r $nreq" >> "$out/runs/index"
		run_ranks "$w" "$m" "$m.$sch+job$j.$r" "$ch" --job "$j" "$@" &
		pids+=($!)
		nrun=$((nrun + 1))	# run_ranks counted in its subshell
	done
	for j in 0 1; do wait "${pids[$j]}" || res=FAILED; done
	echo "bench-torch: [$(($(date +%s) - start))s] $m $sch run $r, two jobs: $res" \
		"($(cut -d' ' -f1 /proc/loadavg))"
}
# --- end BT_BULK ---

# --- BT_BULK, scenario 2: the idle link's round trip, on pfifo, once
# (runs/rtt.txt: bench/shared/report.py's bandwidth-delay product) ---
if [ "$BULK" = 1 ] && [ -n "$BYTES" ]; then
	guest fifo
	ip netns exec "${ns[1]}" "$PY" "$top/bench/shared/bulk.py" echo --bind 10.77.2.2 --port 5202 \
		-o "$out/runs/echo.ready" > /dev/null 2>&1 &
	epid=$! t=0
	until [ -e "$out/runs/echo.ready" ] || [ $t -ge 100 ]; do sleep 0.1; t=$((t + 1)); done
	ip netns exec "${ns[0]}" "$PY" "$top/bench/shared/bulk.py" rtt --to 10.77.2.2:5202 \
		> "$out/runs/rtt.txt" 2>&1
	wait "$epid"
	echo "bench-torch: the idle link's round trip: $(cat "$out/runs/rtt.txt")" | tee -a "$out/hostload.txt"
fi
# --- end BT_BULK ---

# A run that outlasts RUN_TIMEOUT is a hang, not a slow run (measured:
# torch 1.13's powerSGD_hook on gloo deadlocks with resnet18's buckets),
# so its scheme is left out of the model's later repetitions and boots
# (BT_HUNG, "MODEL:SCHEME ...", passed on by the boots' loop) instead of
# costing RUN_TIMEOUT each time.
HUNG=${BT_HUNG:-}
hung() {
	case " $HUNG " in *" $1:$2 "*) return 0 ;; esac
	return 1
}
for h in $HUNG; do
	echo "bench-torch: leaving out ${h#*:} for ${h%%:*}: it hung in an earlier boot" |
		tee -a "$out/skipped.txt"
done

# Every repetition runs every model under every scheme, in turn.
total=$(( REPEAT * $(echo $MODELS | wc -w) * $(echo $SCHEMES | wc -w) ))
k=0
start=$(date +%s)
rep_start=$start
for r in $(seq 1 "$REPEAT"); do
	# BT_DEADLINE (a date): no repetition is started that the last one's
	# duration says would end after it; the table counts the runs made.
	if [ -n "${BT_DEADLINE:-}" ] && [ $r -gt 1 ] &&
	   [ $(( $(date +%s) + $(date +%s) - rep_start )) -gt "$(date -d "$BT_DEADLINE" +%s)" ]; then
		echo "bench-torch: stopping after $((r - 1)) repetitions (deadline $BT_DEADLINE)" |
			tee -a "$out/hostload.txt"
		break
	fi
	rep_start=$(date +%s)
	for m in $MODELS; do
		for sch in $SCHEMES; do
			k=$((k + 1))
			# fifo1: pfifo with one channel, one connection per peer, so
			# that every tensor waits behind the whole backlog as in the
			# simulator's fifo-stream; with 8 channels TCP shares the link
			# among them, which is closer to fair queueing than to a FIFO.
			# The DDP variants and the fp16 fifo1 queue on pfifo as
			# stock DDP does; mercury-fp16 on sch_mercury.
			w=$(worker_scheme "$sch") ch=$CHANNELS extra=()
			case $sch in
			ddp|ddp-*|fifo1|fifo1-fp16) q=fifo ;;
			mercury-fp16) q=mercury ;;
			*) q=$sch ;;
			esac
			case $sch in fifo1|fifo1-fp16) ch=1 ;; esac
			case $sch in
			ddp-tuned)
				eval "c=\$${m}_cap"
				v=on
				[ "${c#*:}" = off ] && v=off
				extra=(--bucket-cap-mb "${c%%:*}" --bucket-view "$v") ;;
			ddp-powersgd) extra=(--powersgd-rank "$POWERSGD_RANK" --powersgd-start "$POWERSGD_START") ;;
			esac
			# --- BT_BULK, scenario 3: both jobs instead of one ---
			if [ "$BULK" = 1 ] && [ "$SCENARIO" = twojobs ]; then
				twojobs_run "$w" "$m" "$sch" "$r" "$q" "$ch" "${extra[@]}"
				continue
			fi
			# --- end BT_BULK ---
			if hung "$m" "$sch"; then
				echo "bench-torch: $k/$total $m $sch run $r: left out (it hung before)"
				continue
			fi
			guest "$q"
			tag=$m.$sch.$r
			echo "$tag $nreq" >> "$out/runs/index"
			[ "$BULK" = 1 ] && tap_dropped "$tag"
			run_ranks "$w" "$m" "$tag" "$ch" "${extra[@]}"
			case $? in 0) res=ok ;; 124) res="FAILED: hung for ${RUN_TIMEOUT} s" ;; *) res=FAILED ;; esac
			[ "$BULK" = 1 ] && tap_dropped "$tag"
			echo "bench-torch: [$(($(date +%s) - start))s] $k/$total $m $sch run $r: $res" \
				"($(cut -d' ' -f1 /proc/loadavg))"
			[ "$res" = ok ] || tail -n 5 "$out/runs/$tag.r0.log" "$out/runs/$tag.r1.log"
			case $res in *hung*)
				HUNG="$HUNG $m:$sch"
				echo "$m:$sch" >> "$out/hung.txt"
				echo "bench-torch: leaving out $sch for $m from here on: run $r" \
					"hung for ${RUN_TIMEOUT} s" | tee -a "$out/skipped.txt" ;;
			esac
			# --- BT_BULK ---
			[ "$BULK" = 1 ] && [ "$SCENARIO" = bulk ] &&
				bulk_run "$w" "$m" "$sch" "$r" "$q" "$ch" "${extra[@]}"
			# --- end BT_BULK ---
		done
	done
done
# --- BT_CAPTURE (make demo's picture: scripts/demo.sh, bench/torch/capture.py) ---
# BT_CAPTURE=1: after the repetitions, one more run of each model with
# mercury.torch (mercury-fp16 if kept, else mercury) on BT_CHANNELS
# tagged channels, through pfifo, then through sch_mercury, while
# capture.py records (time, DSCP, length) of what the guest's port 1
# sends, as it arrives on rank 1's tap: OUTDIR/capture-MODEL-QUEUE.txt,
# runs/capture-MODEL-QUEUE.r*.json; BT_CAPTURE_ITERS iterations (default
# BT_ITERS). Not in runs/index: no table counts them.
if [ "${BT_CAPTURE:-0}" = 1 ]; then
	case " $SCHEMES " in *" mercury-fp16 "*) cw=mercury-fp16 ;; *) cw=mercury ;; esac
	for m in $MODELS; do
		for q in fifo mercury; do
			guest "$q"
			rm -f "$out/capture.ready"
			ip netns exec "${ns[1]}" "$PY" "$here/capture.py" sniff "${tap[1]}" \
				"$out/capture-$m-$q.txt" --ready "$out/capture.ready" &
			cpid=$!
			t=0
			until [ -e "$out/capture.ready" ] || [ $t -ge 100 ]; do sleep 0.1; t=$((t + 1)); done
			if ITERS=${BT_CAPTURE_ITERS:-$ITERS} run_ranks "$cw" "$m" "capture-$m-$q" "$CHANNELS"
			then res=ok; else res=FAILED; fi
			kill -TERM "$cpid" 2>/dev/null; wait "$cpid"
			echo "bench-torch: [$(($(date +%s) - start))s] capture $m $cw on $q: $res" \
				"($(tail -n 1 "$out/capture-$m-$q.txt" 2>/dev/null | tr -d '#'))"
		done
	done
fi
# --- end BT_CAPTURE ---
guest done
wait $vm
vrc=$?
vm=""
echo "bench-torch: host load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/hostload.txt"
grep -E '^(not )?ok' "$out/vm-run.out"
# --- BT_BULK: the shared-NIC table instead of bench-torch's ---
if [ "$BULK" = 1 ]; then
	"$PY" "$top/bench/shared/report.py" --out "$out" "${quick[@]}" || exit 1
	[ $vrc = 0 ]
	exit
fi
# --- end BT_BULK ---
if [ -n "${BT_BOOT:-}" ]; then
	# one of several boots: its own report to its directory only
	"$PY" "$here/report.py" --rate "$RATE" --out "$out" "${quick[@]}" > /dev/null || exit 1
	echo "bench-torch: boot $BT_BOOT's own report: $out/bench-torch.txt"
else
	"$PY" "$here/report.py" --rate "$RATE" --out "$out" "${quick[@]}" || exit 1
fi
[ $vrc = 0 ]
