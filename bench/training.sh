#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# Emulated PS training in the guest: every scheme, every model, the same
# links; measured iteration times against mercury-sim's prediction.
#
#   ns mb-w0 .. mb-w{W-1}        ns mb-sw               ns mb-s0 .. mb-s{S-1}
#   +-------------------+    +---------------+    +-------------------+
#   | mercury-ps worker |    |               |    | mercury-ps server |
#   | eth0 10.77.0.1+i  |----| br0 (bridge,  |----| eth0 10.77.0.101+j|
#   |  tbf RATE          |    |  unlimited)   |    |  tbf RATE          |
#   |   -> scheme qdisc |    |               |    |   -> scheme qdisc |
#   +-------------------+    +---------------+    +-------------------+
#
# Each host's uplink (the egress of its eth0) is a tbf at RATE whose child
# is the scheme's qdisc: pfifo_fast for vanilla, fifo-stream and
# bytesched, prio with 16 bands for prio, mercury for Mercury. The switch side is unlimited. With
# as many servers as workers and every tensor sharded evenly, each
# server's downlink carries what one worker's uplink does, so the push
# path and the pull path each run at RATE, as in the simulator.
#
# Run through scripts/vm-run.sh; reads $MERCURY_OUT/bench.env (written by
# bench/run.sh), writes bench-raw.tsv, bench.txt and bench.json there and
# prints KTAP: one "ok" per model whose runs all finished with verified
# sums. Before the models, bench/frame-cost.py measures in this guest what
# a frame costs and a partition's round trip; the simulator's prediction
# gets those figures (--frame-cost, --latency).
source "$(dirname "$0")/../selftests/lib.sh"

OUT=${MERCURY_OUT:-/tmp}
[ -r "$OUT/bench.env" ] && source "$OUT/bench.env"
MODE=${MODE:-short}
MODELS=${MODELS:-resnet50 vgg16 inception_v3 bert_large gpt2}
SCHEMES=${SCHEMES:-vanilla fifo-stream bytesched mercury}
W=${W:-2}
S=${S:-$W}
RATE=${RATE:-40mbit}		# tbf rate of every host uplink
DELAY=${DELAY:-}		# optional netem delay on every uplink, e.g. 1ms
MTU=${MTU:-1500}		# IP MTU of every veth (the simulator gets the same)
BURST=${BURST:-}		# tbf bucket; empty: max(15000, 2 frames) so the
				# guest's timer granularity does not throttle the link
SSAI=${SSAI:-}			# net.ipv4.tcp_slow_start_after_idle in every host
				# (empty: the kernel's default, 1)
REPEAT=${REPEAT:-1}		# runs of every case; the table shows the median
TSQ=${TSQ:-}			# net.ipv4.tcp_limit_output_bytes in every host
				# (empty: the kernel's default)
DIAG=${DIAG:-}			# seconds into a run to log ss -tin and tc -s
TARGET_BYTES=${TARGET_BYTES:-2000000}	# scaled gradient bytes per iteration
ITER=${ITER:-5}
# Aggregation unit at full size; mercury-ps scales it with the tensors.
# CHUNK_MIN bounds the scaled frame from below: the guest pays tens of
# microseconds per frame whatever its size (FRAME_COST below), so frames
# the scaling would make tiny (bert_large: 20 bytes) cost it more than
# their bytes; 4 KiB is 3.3 ms at 10 Mbit/s.
CHUNK=${CHUNK:-65536}
CHUNK_MIN=${CHUNK_MIN:-4096}
FRAME_COST=${FRAME_COST:-}	# us per frame for the simulator; empty: measured
PART_RTT=${PART_RTT:-}		# us, a partition's round trip here; empty: measured
# bytesched's credit window. "bytes" (16 MB x F) keeps the window's share
# of the gradient, as on the cluster, but covers only a few of the
# guest's partition round trips (tens of ms; hundreds of them on the
# cluster): bytesched is then latency-bound here. "rtt" covers as many
# round trips of this guest as 16 MB covers on the cluster at the model's
# balanced bandwidth (10 us latency, 4.4 us per frame each way), which is
# more than the whole scaled gradient: no window, so no scheduling. No
# setting keeps both (Documentation/benchmark.md, "bytesched in the
# emulation"); the table marks bytesched's rows.
BS_CREDIT=${BS_CREDIT:-bytes}
LATENCY=${LATENCY:-}		# one-way latency for the simulator; empty: measured
CHANNELS=${CHANNELS:-8}
# Mercury: distinct tags on the wire. The sender keeps its heap in
# per-tensor order and tags each frame with its rank squeezed to LEVELS
# groups (equal counts, forward order); one level per connection, as
# libmercury's channel set needs (Documentation/tagger.md, "How many
# levels"). The qdisc gets as many levels.
LEVELS=${LEVELS:-$CHANNELS}
# Mercury: bytes one connection may hold in the kernel (SIOCOUTQ: queued
# plus unacknowledged) before the next frame waits in the sender's heap.
# An urgent frame that finds its connection busy waits behind at most this
# much; below two frames the link idles whenever the sender wakes late, so
# 4 frames: two on their way, two queued (29 ms at 10 Mbit/s, MTU 9000).
INFLIGHT=${INFLIGHT:-}		# empty: 4 * (MTU + 14)
PROFILES=${PROFILES:-$MERCURY_ROOT/profiles/h200}
PS=$MERCURY_ROOT/userspace/ps/mercury-ps
SIM=$MERCURY_ROOT/userspace/sim/mercury-sim
TMPD=/tmp/mbench
RAW=$OUT/bench-raw.tsv
PORT=7000

mkdir -p $TMPD
rate_bps() {	# 40mbit -> 40000000
	echo "$1" | awk '{ v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u)
		m = 1; if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9
		printf "%.0f\n", v * m }'
}
RATE_BPS=$(rate_bps "$RATE")

hosts() {
	local i
	for ((i = 0; i < W; i++)); do echo "mb-w$i 10.77.0.$((1 + i))"; done
	for ((i = 0; i < S; i++)); do echo "mb-s$i 10.77.0.$((101 + i))"; done
}

cleanup() {
	local ns ip
	hosts | while read -r ns ip; do $IP netns del "$ns" 2>/dev/null; done
	$IP netns del mb-sw 2>/dev/null
	true
}

setup_topology() {
	local ns ip n=0
	$IP netns add mb-sw || return 1
	$IP -n mb-sw link add br0 type bridge || return 1
	$IP -n mb-sw link set br0 up
	$IP -n mb-sw link set lo up
	while read -r ns ip; do
		$IP netns add "$ns" || return 1
		$IP netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		$IP netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
		$IP -n "$ns" link add eth0 mtu "$MTU" type veth peer name p$n netns mb-sw || return 1
		$IP -n mb-sw link set p$n mtu "$MTU" || return 1
		$IP -n "$ns" addr add "$ip/24" dev eth0
		if [ -n "$TSQ" ]; then
			$IP netns exec "$ns" sysctl -qw net.ipv4.tcp_limit_output_bytes="$TSQ" || return 1
		fi
		if [ -n "$SSAI" ]; then
			$IP netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle="$SSAI" || return 1
		fi
		$IP -n "$ns" link set lo up
		$IP -n "$ns" link set eth0 up
		$IP -n mb-sw link set p$n master br0
		$IP -n mb-sw link set p$n up
		n=$((n + 1))
	done <<< "$(hosts)"
	# every host knows every other: no ARP in the measured queues
	while read -r ns ip; do
		local mac
		mac=$($IP -n "$ns" link show eth0 | awk '/link\/ether/ { print $2 }')
		while read -r ns2 ip2; do
			[ "$ns2" = "$ns" ] && continue
			$IP -n "$ns2" neigh replace "$ip" lladdr "$mac" dev eth0 nud permanent
		done <<< "$(hosts)"
	done <<< "$(hosts)"
}

# set_qdiscs SCHEME NTENSORS
set_qdiscs() {
	local q ns ip parent=1:1 burst=$BURST
	[ -n "$burst" ] || burst=$(( 2 * (MTU + 14) > 15000 ? 2 * (MTU + 14) : 15000 ))
	case $1 in
	vanilla|fifo|fifo-stream|bytesched) q=(pfifo_fast) ;;
	prio) q=(prio bands 16 priomap 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15) ;;
	mercury) q=(mercury levels "$(( LEVELS < $2 ? LEVELS : $2 ))") ;;
	esac
	while read -r ns ip; do
		$IP netns exec "$ns" $TC qdisc del dev eth0 root 2>/dev/null
		$IP netns exec "$ns" $TC qdisc add dev eth0 root handle 1: tbf rate "$RATE" \
			burst "$burst" limit 10000000 || return 1
		if [ -n "$DELAY" ]; then
			$IP netns exec "$ns" $TC qdisc add dev eth0 parent 1:1 handle 2: \
				netem delay "$DELAY" limit 100000 || return 1
			parent=2:1
		fi
		# netem's child: the scheme's qdisc orders what waits for the link
		$IP netns exec "$ns" $TC qdisc add dev eth0 parent $parent handle 10: "${q[@]}" || return 1
	done <<< "$(hosts)"
}

cpu_busy() {	# "busy total" jiffies of all CPUs
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

# run_case MODEL SCHEME PROFILE SCALE X CHUNK CREDIT -> "mean_ms verified cpu% note"
run_case() {
	local model=$1 scheme=$2 prof=$3 f=$4 x=$5 chunk=$6 fcredit=$7
	local list="" i pids=() rc=0 args b0 t0 b1 t1
	for ((i = 0; i < S; i++)); do list="$list${list:+,}10.77.0.$((101 + i)):$PORT"; done
	args=(--profile "$prof" --servers "$list" --workers "$W" --scheme "$scheme"
	      --iterations "$ITER" --time-scale "$x" --bytes-scale "$f"
	      --chunk "$chunk" --partition 4000000 --credit "$fcredit"
	      --channels "$CHANNELS" --levels "$LEVELS"
	      --inflight "${INFLIGHT:-$((4 * (MTU + 14)))}" --timeout 20)
	rm -f $TMPD/w*.json $TMPD/w*.err $TMPD/s*.out $TMPD/s*.err
	read -r b0 t0 <<< "$(cpu_busy)"
	for ((i = 0; i < S; i++)); do
		$IP netns exec mb-s$i $PS server --server-id $i "${args[@]}" \
			> $TMPD/s$i.out 2> $TMPD/s$i.err &
		pids+=($!)
	done
	for ((i = 0; i < W; i++)); do
		$IP netns exec mb-w$i $PS worker --worker-id $i -j "${args[@]}" \
			> $TMPD/w$i.json 2> $TMPD/w$i.err &
		pids+=($!)
	done
	if [ -n "$DIAG" ]; then
		sleep "$DIAG"
		{ for ns in mb-w0 mb-s0; do
			echo "$ns:"; $IP netns exec $ns ss -tin; $IP netns exec $ns $TC -s qdisc show dev eth0
		  done; } 2>&1 | sed 's/^/# diag /' >&2
	fi
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	read -r b1 t1 <<< "$(cpu_busy)"
	if [ $rc != 0 ]; then
		cat $TMPD/*.err | sed 's/^/# /' >&2
		echo "- 0 - -"
		return
	fi
	# the Mercury sender's counters (picks, SIOCOUTQ readings, waits)
	[ "$scheme" = mercury ] && sed -n 's/.*"sender":{\([^}]*\)},"inversions":\([0-9]*\).*/# sender worker 0: \1, "inversions":\2/p' \
		$TMPD/w0.json >&2
	# steady iterations: every worker's per-iteration times after the
	# first measured one (slow start), averaged over the workers
	cat $TMPD/w*.json | sed -n 's/.*"iteration_ms":\[\([^]]*\)\].*/\1/p' |
		awk -F, '{ for (i = (NF > 2 ? 2 : 1); i <= NF; i++) { s += $i; n++ } }
			END { printf "%.3f ", s / n }'
	if [ "$(grep -c '"verified":true' $TMPD/w*.json | awk -F: '{ s += $NF } END { print s }')" = "$W" ]; then
		printf "1 "
	else
		printf "0 "
	fi
	# CPU busy share of the whole guest (both vCPUs) over the run
	awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.0f ", t ? 100 * b / t : 0 }'
	# bytesched: the share of the iteration its window was full
	# (partitions waiting for credit), worker 0
	if [ "$scheme" = bytesched ]; then
		sed -n 's/.*"mean_ms":\([0-9.]*\).*"credit_wait_ms":\([0-9.]*\).*/\1 \2/p' $TMPD/w0.json |
			awk '{ printf "credit-wait=%.0f%%\n", ($1 > 0 ? 100 * $2 / $1 : 0) }'
		sed -n 's/.*"bytesched":{\([^}]*\)}.*/# bytesched worker 0: \1/p' $TMPD/w0.json >&2
	else
		echo "-"
	fi
}

# bench_all LABEL: every model and scheme with the current settings,
# one raw row per case (the median of REPEAT runs, with min, max, all).
bench_all() {
	local label=$1 model orig gbytes f prof b1 x part credit ntens simj compute sbytes
	local idealms ok scheme simms r res ms ver cpu all vers cpus med mn mx chunk schunk
	local note notes fcredit
	cleanup
	setup_topology || { ktap_fail "$label: topology"; return 1; }
	log "$label: $W workers, $S servers, uplinks $RATE${DELAY:+ + $DELAY}, mtu $MTU, burst ${BURST:-auto}, slow_start_after_idle ${SSAI:-default}, tcp_limit_output_bytes ${TSQ:-default}, $ITER iterations x $REPEAT runs, ~$TARGET_BYTES gradient bytes per iteration, chunk $CHUNK (scaled, at least $CHUNK_MIN), channels $CHANNELS, levels $LEVELS, inflight ${INFLIGHT:-$((4 * (MTU + 14)))}, bytesched credit $BS_CREDIT (partition round trip ${PART_RTT}us), simulator: frame cost ${FRAME_COST}us, latency ${LATENCY}us"
	for model in $MODELS; do
		orig=$PROFILES/$model.json
		if [ ! -r "$orig" ]; then
			ktap_fail "$label$model: no profile $orig"
			continue
		fi
		gbytes=$($SIM --profile "$orig" --scheme fifo -j | tr -d ' \n' | sed -n 's/.*"gradient_bytes":\([0-9]*\).*/\1/p')
		f=$(awk -v t=$TARGET_BYTES -v g=$gbytes 'BEGIN { printf "%.6g", t / g }')
		prof=$TMPD/$model-scaled.json
		$PS profile --profile "$orig" --bytes-scale "$f" --out "$prof" || { ktap_fail "$label$model: scaling"; continue; }
		# balanced point at time scale 1 for the scaled bytes; the time
		# scale that puts it at RATE keeps compute:communication as on
		# the cluster
		b1=$($SIM --profile "$prof" --workers $W --servers $S --bandwidth balanced --scheme fifo -j |
			tr -d ' \n' | sed -n 's/.*"bandwidth_bps":\([0-9.e+]*\).*/\1/p')
		x=$(awk -v b=$b1 -v r=$RATE_BPS 'BEGIN { printf "%.6g", b / r }')
		# sizes as mercury-ps scales them: 4 * max(1, round(bytes / 4 * f))
		scaled() { awk -v b=$1 -v f=$f 'BEGIN { n = int(b / 4 * f + 0.5); printf "%d", 4 * (n < 1 ? 1 : n) }'; }
		part=$(scaled 4000000)
		fcredit=16000000
		if [ "$BS_CREDIT" = rtt ]; then
			# round trips 16 MB covers at full size, times this
			# guest's bandwidth-delay product, back at full size
			fcredit=$(awk -v b1=$b1 -v f=$f -v r=$RATE_BPS -v rtt=$PART_RTT 'BEGIN {
				n = 16e6 / (b1 / f / 8 * (2 * 10e-6 + 2 * 4.4e-6))
				c = n * r / 8 * rtt * 1e-6 / f
				printf "%.0f", (c > 16e6 ? c : 16e6) }')
		fi
		credit=$(scaled $fcredit)
		chunk=$CHUNK
		schunk=$(scaled $chunk)
		if [ "$schunk" -lt "$CHUNK_MIN" ]; then
			chunk=$(awk -v m=$CHUNK_MIN -v f=$f 'BEGIN { printf "%d", 4 * int(m / 4 / f + 0.5) }')
			schunk=$(scaled $chunk)
		fi
		ntens=$(grep -o '"param"' "$prof" | wc -l)
		simj=$($SIM --profile "$prof" --workers $W --servers $S --bandwidth $RATE_BPS \
			--latency ${LATENCY}us --time-scale $x --iterations $ITER --partition $part \
			--credit $credit --chunk $schunk --msg-overhead 0 --frame-cost ${FRAME_COST}us \
			--frame-header 32 --mtu $MTU --scheme all -j | tr -d ' \n')
		echo "$simj" > $TMPD/$model-sim.json
		compute=$(echo "$simj" | sed -n 's/.*"compute_ms":\([0-9.e+]*\).*/\1/p')
		sbytes=$(echo "$simj" | sed -n 's/.*"gradient_bytes":\([0-9]*\).*/\1/p')
		log "$model: bytes x$f ($sbytes B), time x$x (compute $compute ms), chunk $schunk, partition $part, credit $credit, $ntens tensors"
		idealms=$(echo "$simj" | tr '{' '\n' | grep '"scheme":"ideal"' |
			sed -n 's/.*"iteration_ms":\([0-9.e+]*\).*/\1/p')
		printf "%s\t%s\tideal\t-\t-\t-\t-\t%s\t-\t-\t%s\t%s\t%s\t%s\t\n" "$label" $model $idealms \
			$f $x $compute $sbytes >> $RAW
		ok=1
		for scheme in $SCHEMES; do
			done_runs=$((done_runs + 1))
			echo "# progress $done_runs/$total ${label:+$label }$model $scheme"
			simms=$(echo "$simj" | tr '{' '\n' | grep "\"scheme\":\"$scheme\"" |
				sed -n 's/.*"iteration_ms":\([0-9.e+]*\).*/\1/p')
			if ! set_qdiscs $scheme $ntens; then
				ok=0
				log "$model $scheme: qdisc setup failed"
				continue
			fi
			all="" vers=1 cpus="" notes=""
			for ((r = 0; r < REPEAT; r++)); do
				res=$(run_case $model $scheme "$orig" $f $x $chunk $fcredit)
				read -r ms ver cpu note <<< "$res"
				[ "$ver" = 1 ] || vers=0
				all="$all${all:+,}$ms"
				cpus="$cpus${cpus:+,}$cpu"
				[ "$note" != - ] && notes="$notes${notes:+,}${note#credit-wait=}"
			done
			[ -n "$notes" ] && notes="credit-wait $notes"
			[ $vers = 1 ] || ok=0
			read -r med mn mx <<< "$(echo "$all" | tr ',' '\n' | grep -v '^-$' | sort -g |
				awk '{ v[NR] = $1 } END { if (!NR) { print "- - -"; exit }
					m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
					printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }')"
			log "$model $scheme: measured $med ms (runs $all; cpu% $cpus${notes:+; $notes}), simulated $simms ms, sums $([ $vers = 1 ] && echo verified || echo FAILED)"
			printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$label" $model $scheme \
				$med $mn $mx "$all" $simms $vers "$cpus" $f $x $compute $sbytes "$notes" >> $RAW
		done
		ktap_check "$label$model: all schemes ran with exact sums" [ $ok = 1 ]
	done
}

mercury_load
trap cleanup EXIT
header="config\tmodel\tscheme\tmeasured_ms\tmin_ms\tmax_ms\truns_ms\tsim_ms\tverified\tcpu_pct\tbytes_scale\ttime_scale\tcompute_ms\tgradient_bytes\tnote"
# The start-up costs of this guest's data plane, for the simulator
# (bench/frame-cost.py: loopback, no compute, fastest of 3 runs).
if [ -z "$FRAME_COST" ] || [ -z "$LATENCY" ] || [ -z "$PART_RTT" ]; then
	echo "# progress measuring the frame cost"
	python3 -u "$MERCURY_ROOT/bench/frame-cost.py" --bytes 1000000 --repeat 3 2>&1 |
		tee "$OUT/frame-cost.txt" | sed 's/^/# frame-cost: /'
	eval "$(grep -E '^(FRAME_COST_US|PART_EXTRA_US|PART_RTT_US|LATENCY_US)=[0-9.-]+$' "$OUT/frame-cost.txt")"
	FRAME_COST=${FRAME_COST:-${FRAME_COST_US:-}}
	LATENCY=${LATENCY:-${LATENCY_US:-}}
	PART_RTT=${PART_RTT:-${PART_RTT_US:-}}
	[ -n "$FRAME_COST" ] && [ -n "$LATENCY" ] && [ -n "$PART_RTT" ] ||
		{ ktap_fail "frame cost: not measured (see $OUT/frame-cost.txt)"; ktap_finish; }
fi
done_runs=0
if [ -r "$OUT/calib.list" ]; then
	# Calibration: one line per setting, "LABEL VAR=VALUE ...", each
	# run in a subshell over the defaults above.
	RAW=$OUT/calib-raw.tsv
	printf "$header\n" > $RAW
	ncfg=$(grep -cv '^\s*\(#\|$\)' "$OUT/calib.list")
	total=$(( ncfg * $(echo $MODELS | wc -w) * $(echo $SCHEMES | wc -w) ))
	while read -r label assigns; do
		case $label in ''|'#'*) continue ;; esac
		(
			for a in $assigns; do export "${a%%=*}=${a#*=}"; done
			RATE_BPS=$(rate_bps "$RATE")
			bench_all "$label "
			exit $_ktap_fail
		)
		_ktap_fail=$((_ktap_fail + $?))
		n=$(( $(echo $MODELS | wc -w) * $(echo $SCHEMES | wc -w) ))
		done_runs=$((done_runs + n))
		_ktap_n=$((_ktap_n + $(echo $MODELS | wc -w)))
	done < "$OUT/calib.list"
	python3 "$MERCURY_ROOT/bench/report.py" --raw $RAW --text $OUT/calib.txt --json $OUT/calib.json \
		--meta "calibration: $MODE defaults, $(echo $MODELS), $(echo $SCHEMES)" &&
		sed 's/^/# /' $OUT/calib.txt
	ktap_finish
fi

RAW=$OUT/bench-raw.tsv
printf "$header\n" > $RAW
total=$(( $(echo $MODELS | wc -w) * $(echo $SCHEMES | wc -w) ))
bench_all "" || { ktap_finish; }
python3 "$MERCURY_ROOT/bench/report.py" --raw $RAW --text $OUT/bench.txt --json $OUT/bench.json \
	--meta "workers=$W servers=$S rate=$RATE mtu=$MTU delay=${DELAY:-none} iterations=$ITER runs=$REPEAT mode=$MODE" &&
	sed 's/^/# /' $OUT/bench.txt
ktap_finish
