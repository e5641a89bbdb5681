#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stress: random tags on colliding flow buckets, overflow drops, and a
# storm of tc qdisc change on the live queue; then every counter must add
# up, the queue must be empty, order inside each flow kept, and no skb
# may have leaked. The overflow does not depend on the sender outpacing
# the link (a slow guest's sender never did): the first 40 bursts are
# queued behind a stalled link, more than the limit, then the link is
# raised to 4 Mbit/s and the other 120 bursts go out while the qdisc is
# changed 25 times.
#
#   +-------------- ns mrc-s ---------------+      +---- ns mrc-r ----+
#   | 16 sockets, random tags 0..80         |      |                  |
#   | veth0: tbf 8bit, then 4mbit ->        |------| veth1 recv       |
#   |   mercury (10:)                       |      |                  |
#   |   flows 4..64, limit 60..400, levels  |      |                  |
#   |   8..1024 changed 25 times meanwhile  |      |                  |
#   +---------------------------------------+      +------------------+
source "$(dirname "$0")/lib.sh"
mercury_load
trap cleanup_pair EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }

R=/tmp/stress.json
skbs() { awk '$1 == "skbuff_head_cache" { print $2 }' /proc/slabinfo; }

setup_tbf "$STALL_RATE" mercury levels 64 flows 4 limit 100 ||
	{ echo "not ok 1 qdisc setup"; exit 1; }
before=$(skbs)

# 160 bursts: the first 40 (--burst) into the stalled link, the other 120
# (--kick) after the release
bursts=$(python3 -c '
import random
r = random.Random(7)
out = []
for i in range(160):
    out.append("--%s f%d:%d:%d" % ("burst" if i < 40 else "kick", r.randrange(16),
                                   r.randrange(81), r.randrange(5, 25)))
print(" ".join(out))')
total=$(echo "$bursts" | tr ' ' '\n' | awk -F: '/^f/ { s += $3 } END { print s }')
first=$(echo "$bursts" | tr ' ' '\n' | awk -F: '/^f/ && n++ < 40 { s += $3 } END { print s }')
log "sending $total packets in 160 bursts, $first of them into the stalled link"

# The receiver stops once the link drained, never on a short idle timer:
# on a loaded machine the sender may start more than seconds late, and a
# receiver gone early answers with ICMP, whose ARP reply then enters the
# queue under test (the reverse neighbour is pinned against that too).
pin_reverse_neigh
start_receiver $R "$total" 600
RECV=$recv_pid
rm -f $R.queued $R.release
# shellcheck disable=SC2086
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --gap 0.005 $bursts \
	--queued $R.queued --release $R.release &
SEND=$!
wait_queued $R "$first"
queued=$(tc_count veth0 1:)
stalled_drops=$(qdisc_stat veth0 10: drops)
log "stalled: $queued of $first packets reached the link, mercury dropped $stalled_drops"
ktap_check "the stalled link overflowed the limit of 100 (drops > 0)" \
	test "$queued" -ge "$first" -a "$stalled_drops" -gt 0
tcs qdisc change dev veth0 root handle 1: tbf rate 4mbit burst 3000 limit 10000000
touch $R.release

changes_ok=0
for i in $(seq 25); do
	opts=$(python3 -c "
import random
r = random.Random($i)
print('levels %d flows %d limit %d untagged %s quantum %d' % (
    r.choice([8, 16, 64, 255, 1024]), r.choice([4, 16, 64, 1, 33]),
    r.choice([60, 100, 400]), r.choice(['first', 'last']), r.choice([300, 1514, 9000])))")
	if tcs qdisc change dev veth0 parent 1:1 handle 10: mercury $opts; then
		changes_ok=$((changes_ok + 1))
	else
		log "change $i ($opts) failed"
	fi
	sleep 0.2
done
wait $SEND
rm -f $R.queued $R.release
wait_backlog_zero veth0 1: 120
touch $R.stop
wait $RECV

got=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' $R)
wait_backlog_zero veth0 10:
pk=$(qdisc_stat veth0 10: packets)
dr=$(qdisc_stat veth0 10: drops)
log "sent $total received $got; qdisc packets $pk drops $dr; changes $changes_ok/25"
ktap_check "all 25 changes applied on the live queue" test $changes_ok = 25
ktap_check "sent = received + dropped, exactly" test "$pk" = "$got" -a "$dr" = $((total - got))
ktap_check "queue empty: qlen, backlog, memory, flows, levels all 0" \
	test "$(qdisc_stat veth0 10: qlen)" = 0 -a "$(qdisc_stat veth0 10: backlog)" = 0 \
	-a "$(qdisc_stat veth0 10: memory_usage)" = 0 -a "$(qdisc_stat veth0 10: flows)" = 0 \
	-a "$(qdisc_stat veth0 10: levels_active)" = 0
ktap_check "order inside every flow kept" check in-flow-order --rec $R
teardown_qdisc
cleanup_pair
sleep 1
after=$(skbs)
log "skbuff_head_cache active objects: before $before, after $after"
# A leak of the dropped packets alone would be hundreds of objects.
ktap_check "no skb leaked" test $((after - before)) -lt 200
ktap_finish
