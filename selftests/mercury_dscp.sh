#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# DSCP as the tag source, from a container-style namespace to the host.
#
#   +---- ns mrc-c ----+      +---------- ns mrc-s (host) ----------+      +--- ns mrc-r ---+
#   | send: IP_TOS /   |      |  forwarding                         |      | recv: arrival  |
#   | IPV6_TCLASS and  |      |                                     |      | order          |
#   | SO_MARK per flow |      |  veth0: tbf (stalled, then raised)  |      |                |
#   | vethc            |------| vethh   -> mercury tag dscp (10:)   |------| veth1          |
#   +------------------+      +-------------------------------------+      +----------------+
#
# Crossing the veth into the host's namespace scrubs skb->mark and
# skb->priority; the DSCP travels in the IP header. Each case queues a
# burst of less urgent packets and then urgent ones while tbf holds the
# link (everything but its first burst stays queued), raises the link,
# and checks the order of arrival and the per-level class counters.
source "$(dirname "$0")/lib.sh"
mercury_load
NS_C=mrc-c-$$
ADDR_C=10.199.1.1
ADDR_H=10.199.1.2
ADDR6_C=fd00:198::1
ADDR6_H=fd00:198::2
cleanup() { $IP netns del $NS_C 2>/dev/null; cleanup_pair; }
trap cleanup EXIT

setup() {
	PAIR_IPV6=1 setup_pair || return 1
	$IP netns add $NS_C || return 1
	quiet_ipv6 $NS_C
	$IP netns exec $NS_S sysctl -qw net.ipv4.ip_forward=1 &&
	$IP netns exec $NS_S sysctl -qw net.ipv6.conf.all.forwarding=1 || return 1
	$IP -n $NS_C link add vethc type veth peer name vethh netns $NS_S || return 1
	$IP -n $NS_C addr add $ADDR_C/24 dev vethc &&
	$IP -n $NS_C -6 addr add $ADDR6_C/64 dev vethc nodad &&
	$IP -n $NS_S addr add $ADDR_H/24 dev vethh &&
	$IP -n $NS_S -6 addr add $ADDR6_H/64 dev vethh nodad || return 1
	$IP -n $NS_C link set lo up && $IP -n $NS_C link set vethc up &&
	$IP -n $NS_S link set vethh up || return 1
	$IP -n $NS_C route add default via $ADDR_H &&
	$IP -n $NS_C -6 route add default via $ADDR6_H &&
	$IP -n $NS_R route add 10.199.1.0/24 via $ADDR_S &&
	$IP -n $NS_R -6 route add fd00:198::/64 via $ADDR6_S || return 1
	$IP -n $NS_C neigh replace $ADDR_H lladdr "$(lladdr $NS_S vethh)" \
		dev vethc nud permanent &&
	$IP -n $NS_C -6 neigh replace $ADDR6_H lladdr "$(lladdr $NS_S vethh)" \
		dev vethc nud permanent || return 1
	# one receive backlog on the host side too, so the host forwards in
	# the order the container sent
	rx_one_cpu $NS_S vethh
}

# quiet DEV: wait until DEV sent nothing for 3 s (the MLD reports of
# joining groups at setup are over), at most 60 s.
quiet() {
	local last=-1 now same=0 i
	for ((i = 0; i < 120; i++)); do
		now=$($IP netns exec $NS_S cat /sys/class/net/"$1"/statistics/tx_packets)
		if [ "$now" = "$last" ]; then
			same=$((same + 1))
			[ $same -ge 6 ] && return 0
		else
			same=0
		fi
		last=$now
		sleep 0.5
	done
	return 1
}

setup || { echo "not ok 1 setup"; exit 1; }
quiet veth0 || log "veth0 never went quiet"

R=/tmp/dscp.$$.json
SEND_NS=$NS_C

# case NAME EXPECT QDISC-ARGS -- SEND-ARGS -- CHECK-ARGS: EXPECT lists
# "TAG=PACKETS" per class that must have sent exactly that many packets
# ("0=" is the untagged class), every other level none.
case_run() {
	local name=$1 expect=$2 qargs=() sargs=() cargs=() total=0 b last
	local tag want got bad=
	shift 2
	while [ "$1" != "--" ]; do qargs+=("$1"); shift; done
	shift
	while [ "$1" != "--" ]; do sargs+=("$1"); shift; done
	shift
	cargs=("$@")
	for b in "${sargs[@]}"; do
		case $b in *:*:*)
			total=$((total + ${b##*:}))
			last=${b%:*} ;;
		esac
	done
	total=$((total + 1))	# the kick: one more packet of the last flow
	log "$name: qdisc ${qargs[*]}; send ${sargs[*]}"
	if ! setup_tbf $STALL_RATE mercury "${qargs[@]}"; then
		ktap_fail "$name (qdisc setup)"
		return
	fi
	if ! run_stalled $R $total "$last:1" "${sargs[@]}"; then
		ktap_fail "$name (traffic)"
		teardown_qdisc
		return
	fi
	check "${cargs[@]}" --rec $R --expect $total || bad="arrival order"
	wait_backlog_zero veth0 10: || bad="$bad backlog"
	[ "$(qdisc_stat veth0 10: packets)" = $total ] &&
		[ "$(qdisc_stat veth0 10: drops)" = 0 ] || bad="$bad qdisc counters"
	for tag in 0 1 5 10 63; do
		want=none
		for b in $expect; do [ "${b%=*}" = $tag ] && want=${b#*=}; done
		got=$(class_stat packets $tag)
		log "$name: class tag $tag sent $got packets, want $want"
		[ "$got" = "$want" ] || bad="$bad class-$tag"
	done
	if [ -z "$bad" ]; then
		ktap_ok "$name"
	else
		log "$name: wrong: $bad"
		ktap_fail "$name"
	fi
	teardown_qdisc
}

# 60 less urgent then 20 urgent packets, tagged both ways; 3 less urgent
# leave first (tbf's first burst of two and the one it holds while the
# link is stalled), then every urgent one, then the rest.
BURSTS=(--burst lo:10:60 --burst hi:1:20)

case_run "IPv4 from the container: DSCP tags survive the veth" "1=21 10=60" \
	tag dscp levels 63 -- \
	--source mark,dscp "${BURSTS[@]}" -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 50

case_run "IPv4 from the container: skb->mark does not survive the veth (untagged)" "0=81" \
	tag mark levels 63 -- \
	--source mark,dscp "${BURSTS[@]}" -- \
	count --urgent hi --count 21

DST=$ADDR6_R RECV_ARGS="--family 6" case_run \
	"IPv6 from the container: traffic class tags survive the veth" "1=21 10=60" \
	tag dscp levels 63 -- \
	--family 6 --source mark,dscp "${BURSTS[@]}" -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 50

DST=$ADDR6_R RECV_ARGS="--family 6" case_run \
	"IPv6 from the container: skb->mark does not survive the veth (untagged)" "0=81" \
	tag mark levels 63 -- \
	--family 6 --source mark,dscp "${BURSTS[@]}" -- \
	count --urgent hi --count 21

# shift 3: the class selector (CS5 = DSCP 40, CS1 = DSCP 8) is the tag
case_run "DSCP with shift 3: class selectors as tags" "1=21 5=60" \
	tag dscp shift 3 mask 7 levels 7 -- \
	--source dscp --shift 3 --burst lo:5:60 --burst hi:1:20 -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 50

# DSCP 0 (best effort) is untagged, served last here
case_run "DSCP 0 is untagged" "0=60 10=21" \
	tag dscp levels 63 untagged last -- \
	--source dscp --burst lo:0:60 --burst hi:10:20 -- \
	urgent-first --urgent hi --max-before 3 --min-overtaken 50

ktap_finish
