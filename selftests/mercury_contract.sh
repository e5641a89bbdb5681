#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The drop contract and the real peek, with queues filled deterministically.
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | mercury_traffic.py send            |      | ... recv         |
#   | veth0: tbf (stalled) -> mercury 10:|------| veth1            |
#   +------------------------------------+      +------------------+
#
# tbf starts at 8 bit/s: one "plug" packet spends its bucket, and every
# packet after it waits in mercury, whose queue is then filled exactly as
# the test says. Raising the rate releases the queue; tbf_change() neither
# cancels the watchdog (due in minutes at 8 bit/s) nor reschedules the
# device, so one more packet (the "kick", least urgent, with mercury's
# limits raised first so that it drops nothing) starts the drain. The
# receiver records the order in which packets left. Counters are read once the qdisc is
# empty again. Under tbf, mercury is peeked whenever tbf waits for tokens:
# a peek that held a packet (qdisc_peek_dequeued) would send that packet
# first, before more urgent arrivals.
#
# Two cases send TCP instead: one reads what enqueue returned from the
# sender's congestion state, one counts GSO packets (mercury at the root).
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/contract.json

# tbf's bucket, and the plug that empties it (bytes)
BURST=1600
PLUG_SIZE=1000

# stalled MERCURY-OPTIONS...: tbf at 8 bit/s over mercury 10:.
stalled() {
	tcs qdisc replace dev veth0 root handle 1: tbf rate 8bit burst $BURST limit 10000000 &&
	tcs qdisc add dev veth0 parent 1:1 handle 10: mercury "$@"
}

release() {
	tcs qdisc change dev veth0 parent 1:1 handle 10: mercury limit 100000 memory_limit 32Mb &&
	tcs qdisc change dev veth0 root handle 1: tbf rate 100mbit burst $((BURST + 3000)) limit 10000000 &&
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --burst kick:1000:1
}

# fill_release QUEUED SEND-ARGS... [++ SEND-ARGS...]: start the receiver,
# send the plug, then each group of SEND-ARGS (one sender each) into the
# stalled queue, check that QUEUED packets wait in mercury, release, and
# wait for the queue to drain and the receiver to stop. Sets $queued to
# what waited. $BEFORE_SEND, if set, runs after the plug left, and
# $AFTER_SEND once everything was sent.
fill_release() {
	local want=$1 i pid args=()
	shift
	# the receiver stops once the queue drained, never on a timer: a
	# busy machine can take many seconds between the plug and the drain
	start_receiver "$R" 1000 600
	pid=$recv_pid
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size $PLUG_SIZE --burst plug:20:1
	# the plug leaves at once; wait until tbf has sent it
	for ((i = 0; i < 100; i++)); do
		[ "$(qdisc_stat veth0 1: packets)" = 1 ] && break
		sleep 0.1
	done
	[ -z "$BEFORE_SEND" ] || $BEFORE_SEND
	for a in "$@" ++; do
		if [ "$a" = ++ ]; then
			$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R "${args[@]}"
			args=()
		else
			args+=("$a")
		fi
	done
	[ -z "$AFTER_SEND" ] || $AFTER_SEND
	queued=$(qdisc_stat veth0 10: qlen)
	log "queued in mercury before release: $queued (want $want)"
	release
	wait_backlog_zero veth0 10:
	wait_backlog_zero veth0 1:
	touch "$R.stop"
	wait $pid
	log "after the drain: mercury sent $(qdisc_stat veth0 10: packets) dropped $(qdisc_stat veth0 10: drops) qlen $(qdisc_stat veth0 10: qlen)"
	tcs -s class show dev veth0 | grep -E "^class|Sent|tag" | sed 's/^/# /'
}

# arrived EXPECTED: the packets between the plug and the kick (which,
# least urgent, must come last), as "name:tag:seq" words, are exactly
# EXPECTED, in that order.
arrived() {
	python3 - "$R" "$1" <<'EOF'
import json, sys
got = ["%s:%d:%d" % tuple(p) for p in json.load(open(sys.argv[1]))]
want = ["plug:20:0"] + sys.argv[2].split() + ["kick:1000:0"]
print("# arrived: " + " ".join(got))
sys.exit(0 if got == want else 1)
EOF
}

# --- flow_order off: the least urgent packets go, the newest first --------
# The issue's example: 10 10 9 9 8 8 queued (limit 6), 7 7 7 6 6 6 arrive.
stalled flow_order off limit 6
fill_release 6 --burst a:10:2 --burst a:9:2 --burst a:8:2 --burst b:7:3 --burst b:6:3
ktap_check "flow_order off: the six more urgent arrivals stay, in rank order" \
	arrived "b:6:3 b:6:4 b:6:5 b:7:0 b:7:1 b:7:2"
ktap_check "flow_order off: queue was full before the release" test "$queued" = 6
ktap_check "flow_order off: six limit drops, two per old level" \
	test "$(qdisc_stat veth0 10: drops_limit)" = 6 -a "$(qdisc_stat veth0 10: drops)" = 6 \
	-a "$(class_stat drops 10)" = 2 -a "$(class_stat drops 9)" = 2 -a "$(class_stat drops 8)" = 2
ktap_check "flow_order off: the arrivals were never dropped" \
	test "$(class_stat drops 7)" = 0 -a "$(class_stat drops 6)" = 0
teardown_qdisc

# --- one socket, many times: no urgent packet is ever lost ---------------
# The same twelve packets from one socket: its six flows (one per tag)
# share a key. Run many times, since a loss that depends on when tbf peeks
# would show in some runs only. Every eviction must take a less urgent
# packet, so the six most urgent arrive, and mercury counts exactly the
# six drops. The kick must not be able to evict: a kick of tag 6 sent into
# the full queue (as run_stalled's kick, one more packet of the last
# burst, would be) legitimately evicts a tag-7 packet, and so would any
# urgent arrival before the link drains.
for run in 1 2 3 4 5 6; do
	stalled flow_order off limit 6
	fill_release 6 --burst a:10:2 --burst a:9:2 --burst a:8:2 --burst a:7:3 --burst a:6:3
	ktap_check "one socket, run $run: the six most urgent arrive, in rank order" \
		arrived "a:6:9 a:6:10 a:6:11 a:7:6 a:7:7 a:7:8"
	ktap_check "one socket, run $run: six drops, none of tag 7 or 6" \
		test "$(qdisc_stat veth0 10: drops)" = 6 -a "$(class_stat drops 7)" = 0 \
		-a "$(class_stat drops 6)" = 0
	teardown_qdisc
done

# --- flow_order on: the victim is the least urgent newest packet ----------
# Flow a queues 5 x tag 5 then 5 x tag 60 (limit 10); flow b sends 10 x tag
# 10. a's tag-60 tail goes first; then b's own newest tag 10 is the least
# urgent tail, so the rest of b's arrivals are dropped.
stalled limit 10
fill_release 10 --burst a:5:5 --burst a:60:5 --burst b:10:10
ktap_check "flow_order on: a's tag-5 packets, then the first five of b" \
	arrived "a:5:0 a:5:1 a:5:2 a:5:3 a:5:4 b:10:0 b:10:1 b:10:2 b:10:3 b:10:4"
ktap_check "flow_order on: a's five tag-60 packets and five of b's dropped" \
	test "$(class_stat drops 60)" = 5 -a "$(class_stat drops 10)" = 5 \
	-a "$(class_stat drops 5)" = 0 -a "$(qdisc_stat veth0 10: drops_limit)" = 10
ktap_check "flow_order on: per-level sent counters" \
	test "$(class_stat packets 5)" = 5 -a "$(class_stat packets 10)" = 5
teardown_qdisc

# --- a real peek: urgent arrivals overtake while tbf waits ----------------
stalled limit 100
fill_release 6 --burst lo:10:3 --burst hi:1:3
ktap_check "peek holds nothing: the urgent packets leave first" \
	arrived "hi:1:0 hi:1:1 hi:1:2 lo:10:0 lo:10:1 lo:10:2"
ktap_check "peek: nothing dropped, counters at dequeue" \
	test "$(qdisc_stat veth0 10: drops)" = 0 -a "$(class_stat packets 1)" = 3 \
	-a "$(class_stat packets 10)" = 3 -a "$(qdisc_stat veth0 10: packets)" = 8
teardown_qdisc

# --- a packet larger than memory_limit drops alone -------------------------
# An 8000-byte datagram in one skb (MTU 9000) does not fit memory_limit
# 6000; the two small less urgent packets queued before it must stay. The
# plug is as large (tbf's bucket must pass it), so the limit is lowered
# only once the plug has left.
$IP -n $NS_S link set veth0 mtu 9000
$IP -n $NS_R link set veth1 mtu 9000
BURST=9000 PLUG_SIZE=8900
lower_memory() { tcs qdisc change dev veth0 parent 1:1 handle 10: mercury memory_limit 6000; }
BEFORE_SEND=lower_memory
stalled
fill_release 2 --burst lo:10:2 ++ --size 8000 --burst big:1:1
BEFORE_SEND=
ktap_check "oversize: the small packets arrive, the big one does not" \
	arrived "lo:10:0 lo:10:1"
ktap_check "oversize: one memory drop, at the big packet's level only" \
	test "$(qdisc_stat veth0 10: drops_memory)" = 1 -a "$(qdisc_stat veth0 10: drops)" = 1 \
	-a "$(class_stat drops 1)" = 1 -a "$(class_stat drops 10)" = 0
teardown_qdisc

# --- flow_limit: a flow's arrivals beyond it go, whatever their urgency -----
# Flow a (tag 5) sends 6, flow b (tag 9, less urgent) 2, with flow_limit
# 3 and room for all: a keeps its first 3 and loses the other 3, b
# keeps both; nothing is evicted and the limit is not what dropped.
stalled flow_limit 3 limit 100
fill_release 5 --burst a:5:6 --burst b:9:2
ktap_check "flow_limit: the urgent flow keeps its first 3, the short less urgent flow both" \
	arrived "a:5:0 a:5:1 a:5:2 b:9:0 b:9:1"
ktap_check "flow_limit: 3 drops, all counted as flow_limit's and tag 5's" \
	test "$(qdisc_stat veth0 10: drops_flow_limit)" = 3 -a "$(qdisc_stat veth0 10: drops)" = 3 \
	-a "$(qdisc_stat veth0 10: drops_limit)" = 0 -a "$(class_stat drops 5)" = 3 \
	-a "$(class_stat drops 9)" = 0
teardown_qdisc

# --- memory_limit: never evict for a packet that is then dropped -----------
# One tag-20 packet and two small tag-60 ones queued; a tag-30 packet as
# large as the tag-20 one arrives under a memory_limit that holds two large
# packets' truesize less one byte. Evicting both tag-60 packets cannot make
# room (the tag-20 one is more urgent than the arrival), so only the arrival
# is dropped.
mem_setup() {
	local one all
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size 4000 --burst a:20:1
	one=$(qdisc_stat veth0 10: memory_usage)
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size 200 --burst b:60:2
	all=$(qdisc_stat veth0 10: memory_usage)
	log "truesize: one large packet $one, all three $all; memory_limit $((2 * one - 1))"
	tcs qdisc change dev veth0 parent 1:1 handle 10: mercury memory_limit $((2 * one - 1))
}
BEFORE_SEND=mem_setup
stalled
fill_release 3 --size 4000 --burst c:30:1
BEFORE_SEND=
ktap_check "memory_limit: the queued packets all arrive, the arrival does not" \
	arrived "a:20:0 b:60:0 b:60:1"
ktap_check "memory_limit: one memory drop, the arrival's, nothing evicted" \
	test "$(qdisc_stat veth0 10: drops_memory)" = 1 -a "$(qdisc_stat veth0 10: drops)" = 1 \
	-a "$(class_stat drops 30)" = 1 -a "$(class_stat drops 60)" = 0
teardown_qdisc

# --- a lower quantum waits for an empty queue -------------------------------
# Three flows of 30000-byte packets at one level are served one packet per
# flow and round: the DRR quantum in use is the largest packet (the
# configured 1514 is less; the default would follow the MTU).
# Lowering the configured quantum to 256 while they wait must not lower
# it: a quantum below the queued packets' length would leave flows at the
# head with a negative deficit, and tbf's peek and its dequeue would then
# pick different flows.
$IP -n $NS_S link set veth0 mtu 32000
$IP -n $NS_R link set veth1 mtu 32000
BURST=40000 PLUG_SIZE=30000
RR="x:5:0 y:5:0 z:5:0 x:5:1 y:5:1 z:5:1 x:5:2 y:5:2 z:5:2 x:5:3 y:5:3 z:5:3"
xyz=()
for ((i = 0; i < 4; i++)); do xyz+=(--burst x:5:1 --burst y:5:1 --burst z:5:1); done
stalled quantum 1514
fill_release 12 --size 30000 "${xyz[@]}"
ktap_check "quantum: one packet per flow and round" arrived "$RR"
teardown_qdisc
AFTER_SEND="tcs qdisc change dev veth0 parent 1:1 handle 10: mercury quantum 256"
stalled quantum 1514
fill_release 12 --size 30000 "${xyz[@]}"
AFTER_SEND=
ktap_check "quantum lowered under load: still one packet per flow and round" \
	arrived "$RR"
ktap_check "quantum lowered under load: the configured quantum is the new one" \
	test "$(tcs -j qdisc show dev veth0 | jq -r '.[] | select(.handle == "10:") | .options.quantum')" = 256
teardown_qdisc
$IP -n $NS_S link set veth0 mtu 1500
$IP -n $NS_R link set veth1 mtu 1500
BURST=1600 PLUG_SIZE=1000

# --- untagged last: a sparse untagged source gets its share, no more -------
# Forty tagged packets wait; the link is raised to 100 kbit/s (one packet
# per 83 ms); an untagged source then sends one packet every 100 ms, so it
# never has two queued unless mercury holds them back. With untagged_share
# 10 and packets of about one size, at least nine tagged packets must leave
# between two untagged ones while tagged packets still wait.
sparse_share() {
	python3 - "$R" <<'EOF'
import json, sys
got = [p[0] for p in json.load(open(sys.argv[1]))]
print("# arrived: " + "".join({"u": "U", "t": "t"}.get(n, ".") for n in got))
last_t = max(i for i, n in enumerate(got) if n == "t")
us = [i for i, n in enumerate(got) if n == "u" and i < last_t]
gaps = [sum(1 for n in got[a + 1:b] if n == "t") for a, b in zip(us, us[1:])]
print("# untagged packets while tagged ones waited: %d, tagged between: %s"
      % (len(us), gaps))
sys.exit(0 if len(us) >= 3 and min(gaps) >= 9 else 1)
EOF
}
stalled untagged last untagged_share 10
start_receiver "$R" 1000 600
pid=$recv_pid
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size $PLUG_SIZE --burst plug:20:1
for ((i = 0; i < 100; i++)); do
	[ "$(qdisc_stat veth0 1: packets)" = 1 ] && break
	sleep 0.1
done
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --burst t:5:40
log "tagged packets waiting: $(qdisc_stat veth0 10: qlen)"
# tbf restarts at the next enqueue: the first untagged packet
tcs qdisc change dev veth0 root handle 1: tbf rate 100kbit burst $BURST limit 10000000
u=()
for ((i = 0; i < 20; i++)); do u+=(--burst u:0:1); done
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --gap 0.1 "${u[@]}"
wait_backlog_zero veth0 10:
touch "$R.stop"
wait $pid
ktap_check "untagged share: a sparse untagged source gets one packet in ten" sparse_share
ktap_check "untagged share: all 61 packets sent, none dropped" \
	test "$(qdisc_stat veth0 10: drops)" = 0 -a "$(qdisc_stat veth0 10: packets)" = 61
teardown_qdisc

# --- evicting from the arrival's own flow: NET_XMIT_CN ---------------------
# TCP enters congestion window reduction (tcpi_ca_state CWR) when the
# qdisc answers NET_XMIT_CN, and never on NET_XMIT_SUCCESS. One connection
# (flow_order on, limit 1) queues a segment of tag 10 behind the stalled
# tbf, then one of tag 5, which evicts its own flow's newest segment: the
# arrival is queued with a hole ahead of it, so enqueue must say
# NET_XMIT_CN; tbf, which then does not count the arrival, must still
# agree with mercury. (One segment waiting, not more: TCP small queues
# would hold a second one back in the socket. Retransmissions that follow
# are tag 5 too: they are dropped on arrival and evict nothing.)
cn_case() {
	local i
	rm -f /tmp/cn.up /tmp/cn.stalled /tmp/cn.out /tmp/cn.done
	# one segment per send, also while earlier ones wait in the qdisc,
	# and no tail loss probe among them
	$IP netns exec $NS_S sysctl -qw net.ipv4.tcp_autocorking=0
	$IP netns exec $NS_S sysctl -qw net.ipv4.tcp_early_retrans=0
	$IP netns exec $NS_R python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5602)); s.listen(1); open("/tmp/cn.up", "w").close()
c, _ = s.accept(); c.settimeout(120)
try:
    while c.recv(1 << 16):
        pass
except OSError:
    pass
' &
	cn_rpid=$!
	for ((i = 0; i < 300; i++)); do [ -e /tmp/cn.up ] && break; sleep 0.1; done
	rm -f /tmp/cn.up
	$IP netns exec $NS_S python3 -c '
import os, socket, sys, time
SO_MARK = 36
def wait_for(f):
    for _ in range(6000):
        if os.path.exists(f):
            return
        time.sleep(0.05)
s = socket.create_connection((sys.argv[1], 5602))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
open("/tmp/cn.up", "w").close()
wait_for("/tmp/cn.stalled")
def ca_state():
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)[1]
# the plug, which leaves with the bucket, from a UDP socket: a TCP plug
# would stay charged to the connection until the receiver reads it, and
# TCP small queues would then hold the tag-5 segment back
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"p" * 1000, (sys.argv[1], 5603))
s.setsockopt(socket.SOL_SOCKET, SO_MARK, 10)
s.send(b"a" * 1000)         # queued: the limit is reached
before = ca_state()
s.setsockopt(socket.SOL_SOCKET, SO_MARK, 5)
s.send(b"b" * 1000)         # evicts the tag-10 segment before it
open("/tmp/cn.out", "w").write("%d %d" % (before, ca_state()))
wait_for("/tmp/cn.done")
' $ADDR_R &
	cn_spid=$!
	for ((i = 0; i < 300; i++)); do [ -e /tmp/cn.up ] && break; sleep 0.1; done
	tcs qdisc change dev veth0 root handle 1: tbf rate 8bit burst $BURST limit 10000000
	touch /tmp/cn.stalled
	for ((i = 0; i < 300; i++)); do [ -e /tmp/cn.out ] && break; sleep 0.1; done
	log "tcpi_ca_state before and after the tag-5 segment: $(cat /tmp/cn.out)"
}
cn_done() {
	touch /tmp/cn.done
	wait $cn_spid
	kill $cn_rpid 2>/dev/null
	wait $cn_rpid 2>/dev/null
	$IP netns exec $NS_S sysctl -qw net.ipv4.tcp_autocorking=1
	$IP netns exec $NS_S sysctl -qw net.ipv4.tcp_early_retrans=3
}
tcs qdisc replace dev veth0 root handle 1: tbf rate 100mbit burst $BURST limit 10000000
tcs qdisc add dev veth0 parent 1:1 handle 10: mercury limit 1
cn_case
ktap_check "own flow evicted: enqueue said NET_XMIT_CN (TCP entered CWR)" \
	test "$(cat /tmp/cn.out)" = "0 2"
log "$(tcs -s -j qdisc show dev veth0 | jq -c '[.[] | {handle, packets, drops, qlen, backlog}]')"
ktap_check "own flow evicted: one tag-10 drop, tbf and mercury agree on 1 packet" \
	test "$(class_stat drops 10)" = 1 -a "$(qdisc_stat veth0 10: qlen)" = 1 \
	-a "$(qdisc_stat veth0 1: qlen)" = 1 -a "$(qdisc_stat veth0 1: backlog)" = \
	"$(qdisc_stat veth0 10: backlog)"
cn_done
teardown_qdisc

# --- untagged last: untagged GSO packets queue as their segments -----------
# With untagged last, an untagged GSO packet is queued as its segments, so
# a tagged packet waits behind one segment, not behind 64 KB. An untagged
# TCP connection (set up while the link runs) writes 64 KB into the
# stalled link: what waits in mercury must be MTU-sized, and tbf, which
# counted one packet for each GSO packet it handed down, must agree with
# mercury's qlen and backlog. With untagged first, GSO packets stay whole.
# tbf itself segments a GSO packet larger than its bucket, so here the
# bucket is 30000 bytes, veth0's GSO packets at most 16384, and the plug
# a 28500-byte datagram (its fragments leave tbf under 1514 bytes of
# tokens: nothing more fits).
GSO_BURST=30000
gso_split_case() {
	local i n last
	rm -f /tmp/gsos.up /tmp/gsos.go /tmp/gsos.done /tmp/gsos.got
	$IP -n $NS_S link set veth0 gso_max_size 16384
	tcs qdisc replace dev veth0 root handle 1: tbf rate 100mbit burst $GSO_BURST limit 10000000
	tcs qdisc add dev veth0 parent 1:1 handle 10: mercury untagged "$1"
	$IP netns exec $NS_R python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5602)); s.listen(1)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    n += len(b)
open("/tmp/gsos.got", "w").write(str(n))
' &
	gsos_rpid=$!
	$IP netns exec $NS_S python3 -c '
import os, socket, sys, time
def wait(path):
    for _ in range(6000):
        if os.path.exists(path):
            return
        time.sleep(0.1)
    sys.exit("gso sender: timed out waiting for " + path)
for _ in range(100):
    try:
        s = socket.create_connection((sys.argv[1], 5602)); break
    except OSError:
        time.sleep(0.1)
open("/tmp/gsos.up", "w").close()
wait("/tmp/gsos.go")
s.sendall(b"x" * 65536)
wait("/tmp/gsos.done")
s.close()
' $ADDR_R &
	gsos_spid=$!
	for ((i = 0; i < 300; i++)); do [ -e /tmp/gsos.up ] && break; sleep 0.1; done
	# stall: a full bucket, spent by the plug
	n=$(qdisc_stat veth0 1: packets)
	tcs qdisc change dev veth0 root handle 1: tbf rate 8bit burst $GSO_BURST limit 10000000
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size 28500 --burst plug:20:1
	for ((i = 0; i < 100; i++)); do
		[ "$(qdisc_stat veth0 1: packets)" -gt "$n" ] &&
			[ "$(qdisc_stat veth0 1: qlen)" = 0 ] && break
		sleep 0.1
	done
	touch /tmp/gsos.go
	# the writes have reached the qdisc once its queue stops growing
	last=-1
	for ((i = 0; i < 60; i++)); do
		sleep 0.5
		n=$(qdisc_stat veth0 10: qlen)
		[ "$n" -gt 0 ] && [ "$n" = "$last" ] && break
		last=$n
	done
	gsos_q=$(qdisc_stat veth0 10: qlen) gsos_b=$(qdisc_stat veth0 10: backlog)
	gsos_tq=$(qdisc_stat veth0 1: qlen) gsos_tb=$(qdisc_stat veth0 1: backlog)
	log "untagged $1: mercury holds $gsos_q packets, $gsos_b bytes; tbf $gsos_tq, $gsos_tb"
	tcs qdisc change dev veth0 parent 1:1 handle 10: mercury limit 100000 memory_limit 32Mb
	tcs qdisc change dev veth0 root handle 1: tbf rate 100mbit burst $((GSO_BURST + 3000)) limit 10000000
	$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --burst kick:1000:1
	touch /tmp/gsos.done
	wait $gsos_spid
	for ((i = 0; i < 300; i++)); do [ -e /tmp/gsos.got ] && break; sleep 0.1; done
	kill $gsos_rpid 2>/dev/null
	wait $gsos_rpid 2>/dev/null
	gsos_got=$(cat /tmp/gsos.got 2>/dev/null || echo none)
	log "untagged $1: the receiver read $gsos_got bytes"
	$IP -n $NS_S link set veth0 gso_max_size 65536
}
for placement in last first; do
	gso_split_case $placement
	if [ $placement = last ]; then
		ktap_check "untagged last: untagged GSO packets wait as MTU-sized segments" \
			test "$gsos_q" -ge 2 -a "$gsos_b" -le $((gsos_q * 1514))
	else
		ktap_check "untagged first: GSO packets stay whole" \
			test "$gsos_q" -ge 1 -a "$gsos_b" -gt $((gsos_q * 1514))
	fi
	ktap_check "untagged $placement: tbf above agrees with mercury's qlen and backlog" \
		test "$gsos_tq" = "$gsos_q" -a "$gsos_tb" = "$gsos_b"
	ktap_check "untagged $placement: all 64 KB arrived, nothing dropped" \
		test "$gsos_got" = 65536 -a "$(qdisc_stat veth0 10: drops)" = 0
	teardown_qdisc
done

# --- untagged_packets counts GSO segments ----------------------------------
# Untagged TCP over veth leaves in GSO packets of many segments; the
# untagged class counts segments, as the qdisc does, and so must
# untagged_packets.
tcs qdisc replace dev veth0 root handle 10: mercury bypass off
$IP netns exec $NS_R python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5601)); s.listen(1); open("/tmp/gso.ready", "w").close()
c, _ = s.accept()
while c.recv(1 << 16):
    pass
' &
gso_pid=$!
for ((i = 0; i < 100; i++)); do [ -e /tmp/gso.ready ] && break; sleep 0.1; done
$IP netns exec $NS_S python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 5601))
s.sendall(b"x" * (4 << 20)); s.close()
' $ADDR_R
wait $gso_pid
rm -f /tmp/gso.ready
wait_backlog_zero veth0 10:
gso_counts() {
	local u c
	u=$(qdisc_stat veth0 10: untagged_packets)
	c=$(class_stat packets 0)
	log "untagged_packets $u, untagged class packets $c, qdisc packets $(qdisc_stat veth0 10: packets)"
	[ "$u" = "$c" ] && [ "$u" -gt 100 ]
}
ktap_check "untagged_packets counts GSO segments, as the class does" gso_counts
teardown_qdisc

ktap_finish
