#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# mercuryctl (userspace/ctl, libnl-route) against the real qdisc: its
# add/change/replace/delete cross-checked with tc -j, its JSON, its
# Prometheus output checked against tc -s numbers while packets are
# queued, and its errors (no module, no device, bad option, no
# permission); apply (the boot-time applier, through scripts/mercury-apply)
# on dummy0; then check: a plan against the qdisc (mercuryctl check)
# and a channel set's tagger at creation (libmercury, same rule).
#
#   +------------- ns mrc-s -------------+      +---- ns mrc-r ----+
#   | dummy0: mercury (provisioning)      |      |                  |
#   | veth0: tbf 8bit -> mercury (10:)    |------| veth1            |
#   |   mercury_traffic.py send, SO_MARK  |      |  listener :5500  |
#   | veth0: mercury 30: tag dscp, and a  |      |                  |
#   |   channel set to mrc-r (check)      |      |                  |
#   +-------------------------------------+      +------------------+
source "$(dirname "$0")/lib.sh"
CREL=userspace/ctl/mercuryctl
C=$MERCURY_ROOT/$CREL
[ -x "$C" ] || { echo "not ok 1 $C not built (make -C userspace/ctl)"; exit 1; }
W=$(mktemp -d /tmp/mercury-ctl.XXXXXX)
NB=$(nobody_tree $CREL) || { echo "not ok 1 copy for nobody"; exit 1; }
trap 'cleanup_pair; rm -rf "$W" "$NB"' EXIT
setup_pair || { echo "not ok 1 setup"; exit 1; }
$IP -n $NS_S link add dummy0 type dummy && $IP -n $NS_S link set dummy0 up ||
	{ echo "not ok 1 setup dummy0"; exit 1; }

mc() { "$C" -n $NS_S "$@"; }
# expect NAME RC PATTERN CMD...: CMD exits RC and its output matches PATTERN.
expect() {
	local name=$1 want=$2 pat=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ] && echo "$out" | grep -Eq -- "$pat"; then
		ktap_ok "$name"
	else
		log "$name: exit $rc, said: $out"
		ktap_fail "$name"
	fi
}
# JSON field helper: python expression over j (the parsed document).
jcheck() {
	local name=$1 file=$2 expr=$3
	if python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$file" "$expr"; then
		ktap_ok "$name"
	else
		log "$name: $(head -c 600 "$file")"
		ktap_fail "$name"
	fi
}
no_mercury() { ! tcs qdisc show dev "$1" | grep -q "qdisc mercury"; }

# ---- module not loaded: first, before we load it ------------------------
if grep -q '^sch_mercury ' /proc/modules && ! rmmod sch_mercury 2>/dev/null; then
	ktap_skip "add without the module names sch_mercury (module busy)"
	ktap_skip "JSON error without the module"
else
	expect "add without the module names sch_mercury" 1 \
		"^mercuryctl: .*module sch_mercury is not loaded" mc add dummy0
	expect "JSON error without the module" 1 \
		'^\{"error":".*sch_mercury is not loaded' mc -j add dummy0
fi
mercury_load

# ---- errors ----------------------------------------------------------
expect "no such device" 1 "^mercuryctl: no such device: eth9$" mc add eth9
expect "no such device in JSON" 1 '^\{"error":"no such device: eth9"\}$' mc -j show eth9
expect "no such network namespace" 1 "no such network namespace: mrc-none" \
	"$C" -n mrc-none show
expect "bad option value is named (levels 0), exit 2" 2 \
	"^mercuryctl: levels must be 1\.\.65534, not '0'$" mc add dummy0 levels 0
expect "bad size is named (quantum 100), exit 2" 2 \
	"^mercuryctl: quantum must be 256\.\.1048576 bytes" mc add dummy0 quantum 100
expect "options checked against each other (levels above mask), exit 2" 2 \
	"levels 300 exceeds the largest tag mask 0xff" mc add dummy0 levels 300 mask 0xff
expect "untagged_share needs untagged last, exit 2" 2 \
	"untagged_share needs untagged last" mc add dummy0 untagged_share 10
expect "unknown option, exit 2" 2 "unknown option 'bogus'" mc add dummy0 bogus 1
expect "unknown command, exit 2" 2 "unknown command 'frobnicate'" mc frobnicate
expect "ambiguous command prefix, exit 2" 2 "ambiguous command 's'" mc s dummy0
ktap_check "nothing was created by the bad commands" no_mercury dummy0
expect "permission denied without CAP_NET_ADMIN" 1 \
	"^mercuryctl: permission denied: adding a qdisc on dummy0 needs CAP_NET_ADMIN" \
	$IP netns exec $NS_S setpriv --reuid=65534 --regid=65534 --clear-groups "$NB/$CREL" add dummy0
ktap_check "nothing was created without permission" no_mercury dummy0
expect "show of a device without mercury fails" 1 "no mercury qdisc on dummy0" mc show dummy0

# ---- provisioning, cross-checked with tc -j --------------------------
ALL="levels 4096 tag priority shift 4 mask 0x1fff untagged last untagged_share 15 flow_order off flows 2048 limit 777 memory_limit 4Mb quantum 9000 bypass off flow_limit 40"
ALLJ='{"levels": 4096, "tag": "priority", "shift": 4, "mask": 8191, "untagged": "last", "untagged_share": 15, "flow_order": False, "flows": 2048, "limit": 777, "memory_limit": 4194304, "quantum": 9000, "bypass": False, "flow_limit": 40}'
expect "add with defaults" 0 "" mc add dummy0 handle 1:
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "tc sees the defaults mercuryctl set" $W/tc.json \
	'j[0]["kind"] == "mercury" and j[0]["handle"] == "1:" and j[0]["options"] == {"levels": 1024, "tag": "mark", "shift": 0, "mask": 65535, "untagged": "first", "untagged_share": 0, "flow_order": True, "flows": 1024, "limit": 10000, "memory_limit": 33554432, "quantum": 3028, "bypass": True, "flow_limit": 0}'
expect "add where one exists fails" 1 "already there" mc add dummy0
expect "delete" 0 "" mc delete dummy0
ktap_check "tc sees it deleted" no_mercury dummy0
expect "delete again fails (dummy0 has noqueue now)" 1 "not mercury" mc delete dummy0

expect "add with every option" 0 "" mc add dummy0 root handle 1: $ALL
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "tc sees every option mercuryctl set" $W/tc.json "j[0]['options'] == $ALLJ"
mc -j show dummy0 > $W/mc.json
jcheck "mercuryctl -j show has the same options as tc -j" $W/mc.json \
	"j[0]['options'] == $ALLJ and j[0]['dev'] == 'dummy0' and j[0]['handle'] == '1:' and j[0]['parent'] == 'root' and len(j[0]['xstats']) == 12"
printed=$(mc show dummy0 | sed -n 2p)
expect "printed options change back to the same state" 0 "" mc change dummy0 $printed
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "state unchanged after the round trip" $W/tc.json "j[0]['options'] == $ALLJ"

expect "change one option" 0 "" mc change dummy0 limit 42 memory_limit 512kb
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "tc sees the change, the rest kept" $W/tc.json \
	"j[0]['options'] == dict($ALLJ, limit=42, memory_limit=524288)"
expect "change checks against the current state (levels above mask 0x1fff), exit 2" 2 \
	"levels 10000 exceeds the largest tag mask 0x1fff" mc change dummy0 levels 10000
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "rejected change left everything as it was" $W/tc.json \
	"j[0]['options'] == dict($ALLJ, limit=42, memory_limit=524288)"
expect "replace mercury by mercury" 0 "" mc replace dummy0 handle 1: levels 64 untagged first untagged_share 0
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "tc sees the replace" $W/tc.json \
	"j[0]['options'] == dict($ALLJ, limit=42, memory_limit=524288, levels=64, untagged='first', untagged_share=0)"
expect "delete by handle" 0 "" mc delete dummy0 handle 1:
ktap_check "tc sees it deleted" no_mercury dummy0
tcs qdisc add dev dummy0 root handle 1: pfifo
expect "delete refuses a qdisc that is not mercury" 1 "not mercury" mc delete dummy0
expect "replace pfifo with mercury" 0 "" mc replace dummy0 handle 2: tag priority
tcs -j qdisc show dev dummy0 > $W/tc.json
jcheck "tc sees mercury 2: in place of pfifo" $W/tc.json \
	"len(j) == 1 and j[0]['kind'] == 'mercury' and j[0]['handle'] == '2:' and j[0]['options']['tag'] == 'priority'"
tcs qdisc del dev dummy0 root

# ---- apply: the boot-time applier, as mercury@.service runs it ---------
# scripts/mercury-apply runs mercuryctl apply; options are read by the
# grammar tc's plugin links, compared with what the kernel reports.
A=$W/apply.conf
apply_s() { $IP netns exec $NS_S "$MERCURY_ROOT/scripts/mercury-apply" "$@"; }
# the same, its lines joined into one (to match them in order)
apply_1() { local o rc; o=$(apply_s "$@" 2>&1); rc=$?; echo $o; return $rc; }
opts_j() { tcs -j qdisc show dev dummy0 root > $W/tc.json; }
handle_of() { tcs -j qdisc show dev dummy0 root | sed -n 's/.*"handle":"\([^"]*\)".*/\1/p'; }
echo "dummy0  levels 64 memory_limit 1.5m   # the test's line" > $A
expect "apply: noqueue replaced by mercury with the line's options" 0 \
	"dummy0: replacing root qdisc noqueue with mercury levels 64 memory_limit 1.5m.*dummy0: mercury applied" \
	apply_1 -c $A
opts_j
jcheck "apply: tc sees levels 64, memory_limit 1.5m = 1572864, the rest default" $W/tc.json \
	"j[0]['kind'] == 'mercury' and j[0]['options']['levels'] == 64 and j[0]['options']['memory_limit'] == 1572864 and j[0]['options']['limit'] == 10000"
h=$(handle_of)
expect "apply again: already in place, nothing sent" 0 "dummy0: mercury already in place \(levels 64 memory_limit 1.5m\), nothing to do" \
	apply_s -c $A
tcs qdisc change dev dummy0 root mercury limit 555
echo "dummy0 levels 64 memory_limit 1536kb flow_order off" > $A
expect "apply: only what differs is sent (1536kb is 1.5m)" 0 "dummy0: changing mercury options: flow_order on -> off$" \
	apply_s -c $A
opts_j
jcheck "apply: changed in place, an option the line does not name kept" $W/tc.json \
	"j[0]['handle'] == '$h' and j[0]['options']['flow_order'] == False and j[0]['options']['limit'] == 555 and j[0]['options']['memory_limit'] == 1572864"
echo "dummy0 levels 8" > $A
expect "apply -n: says what it would send" 0 "dummy0: dry run: mercuryctl replace dummy0 root levels 8" apply_s -n -c $A
opts_j
jcheck "apply -n: nothing changed" $W/tc.json "j[0]['options']['levels'] == 64"
echo "dummy0 levels 300 mask 0xff" > $A
expect "apply: options against each other, on the qdisc as it would be (exit 1)" 1 \
	"dummy0: levels 300 exceeds the largest tag mask 0xff can give" apply_s -c $A
echo "dummy0 untagged_share 10" > $A
expect "apply: untagged_share on a qdisc with untagged first (exit 1)" 1 \
	"dummy0: untagged_share needs untagged last" apply_s -c $A
printf 'mrc-nodev0 levels 8\ndummy0 levels 64\n' > $A
expect "apply: a missing device fails, the other is still handled" 1 \
	"mrc-nodev0: no such network device" apply_s -c $A
opts_j
jcheck "apply: nothing changed by the refused lines" $W/tc.json \
	"j[0]['options']['levels'] == 64 and j[0]['options']['untagged_share'] == 0"
tcs qdisc replace dev dummy0 root handle 5: pfifo
expect "apply: another root qdisc is replaced" 0 "dummy0: replacing root qdisc pfifo with mercury levels 64" \
	apply_s -c $A dummy0
expect "apply --remove: back to the default qdisc" 0 "dummy0: mercury removed" apply_s --remove dummy0
ktap_check "apply --remove: tc sees no mercury" no_mercury dummy0
expect "apply --remove again: noqueue left alone" 0 "dummy0: root qdisc is noqueue, not mercury, left alone" \
	apply_s --remove dummy0

# ---- statistics under real traffic: tbf at 8 bit/s holds the queue -----
# Packets beyond tbf's 3000 byte burst stay queued in mercury while we
# read, so tc and mercuryctl see the same frozen state.
tcs qdisc replace dev veth0 root handle 1: tbf rate 8bit burst 3000 limit 10000000
expect "add as child of tbf (parent 1:1 handle 10:)" 0 "" \
	mc add veth0 parent 1:1 handle 10: levels 16 limit 50 untagged last
tcs qdisc show dev veth0 > $W/tc.txt
expect "tc sees mercury 10: under tbf" 0 "qdisc mercury 10: parent 1:1 levels 16 " cat $W/tc.txt
$IP netns exec $NS_S $TRAFFIC send --dst $ADDR_R --size 1000 \
	--burst lo:9:30 --burst hi:2:20 --burst un:0:10
# Compare counters of a quiescent qdisc only: tbf lets a packet go now
# and then (its bucket refills a byte a second), so every reading is
# taken between two identical snapshots of tc -s, or taken again.
snapshot() { tcs -s -j qdisc show dev veth0; tcs -s class show dev veth0; }
for ((try = 0; try < 10; try++)); do
	before=$(snapshot)
	mc -p show veth0 > $W/prom.txt
	tcs -s class show dev veth0 > $W/class.txt
	tcs -s -j qdisc show dev veth0 > $W/tc.json
	mc -j show veth0 > $W/mc.json
	"$C" -n $NS_S stats --prometheus veth0 > $W/prom2.txt
	[ "$before" = "$(snapshot)" ] && break
	log "the qdisc changed while it was read; reading again"
	sleep 1
done
ktap_check "prometheus: the qdisc stayed quiescent while read" test $try -lt 10
log "$(grep -E '^mercury_(level_|packets|drops|backlog)' $W/prom.txt | tr '\n' ' ')"
ktap_check "stats --prometheus prints what -p show prints" cmp -s $W/prom.txt $W/prom2.txt

python3 - "$W" > $W/check.txt 2>&1 <<'PY'
import json, re, sys
w = sys.argv[1]
prom = open(w + "/prom.txt").read()
tc = [q for q in json.load(open(w + "/tc.json")) if q["handle"] == "10:"][0]
mc = json.load(open(w + "/mc.json"))[0]
classes = {}
for m in re.finditer(r"class mercury 10:(\w+) parent 10: *\n Sent (\d+) bytes (\d+) pkt \(dropped (\d+), "
                     r"overlimits \d+ requeues \d+\) *\n backlog (\S+) (\d+)p[^\n]*\n  tag (\d+) flows (\d+)",
                     open(w + "/class.txt").read()):
    classes[m.group(7) if m.group(7) != "0" else "untagged"] = dict(
        bytes=int(m.group(2)), packets=int(m.group(3)), drops=int(m.group(4)),
        qlen=int(m.group(6)), flows=int(m.group(8)))

# Exposition format: HELP and TYPE once per family, before its samples.
fams, samples = {}, {}
for line in prom.splitlines():
    m = re.match(r"# (HELP|TYPE) (\w+) (.*)$", line)
    if m:
        fams.setdefault(m.group(2), {})[m.group(1)] = m.group(3)
        assert m.group(2) not in samples or m.group(1) == "TYPE", "HELP after samples: " + line
        continue
    m = re.match(r'(\w+)\{((?:\w+="[^"]*",?)+)\} (\d+)$', line)
    assert m, "bad line: " + line
    name = m.group(1)
    assert name in fams and fams[name].keys() == {"HELP", "TYPE"}, "no HELP/TYPE before " + name
    assert fams[name]["TYPE"] in ("counter", "gauge")
    assert name.endswith("_total") == (fams[name]["TYPE"] == "counter"), name
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
    assert labels["dev"] == "veth0" and labels["handle"] == "10:", line
    samples[(name, labels.get("tag"), labels.get("reason"))] = int(m.group(3))
print("ok: exposition format")

def p(name, tag=None, reason=None):
    return samples[(name, tag, reason)]
x = tc["xstats"] if "xstats" in tc else tc
checks = [
    ("packets", p("mercury_packets_total"), tc["packets"]),
    ("bytes", p("mercury_bytes_total"), tc["bytes"]),
    ("backlog bytes", p("mercury_backlog_bytes"), tc["backlog"]),
    ("backlog packets", p("mercury_backlog_packets"), tc["qlen"]),
    ("drops limit", p("mercury_drops_total", reason="limit"), x["drops_limit"]),
    ("drops memory", p("mercury_drops_total", reason="memory"), x["drops_memory"]),
    ("memory usage", p("mercury_memory_usage_bytes"), x["memory_usage"]),
    ("levels active", p("mercury_levels_active"), x["levels_active"]),
    ("most urgent", p("mercury_most_urgent_tag"), x["most_urgent"]),
    ("untagged packets", p("mercury_untagged_packets_total"), x["untagged_packets"]),
    ("inversions", p("mercury_inversions_avoided_total"), x["inversions_avoided"]),
]
bad = [c for c in checks if c[1] != c[2]]
print(("ok" if not bad else "FAIL") + ": qdisc metrics equal tc -s -j " + repr(checks))
tags = {k[1] for k in samples if k[0] == "mercury_level_packets_total"}
lv = []
for t in sorted(tags):
    c = classes.get(t)
    lv.append((t, c, {k: p("mercury_level_" + n, tag=t) for k, n in
                      (("packets", "packets_total"), ("bytes", "bytes_total"), ("drops", "drops_total"),
                       ("qlen", "backlog_packets"), ("flows", "flows"))}))
lbad = [l for l in lv if l[1] != l[2]]
ok_levels = tags == set(classes) == {"2", "9", "untagged"} and not lbad
print(("ok" if ok_levels else "FAIL") + ": level metrics equal tc -s class show " + repr(lv) + " " + repr(classes))
# tbf peeks: the packet it holds is counted once more in the qdisc's
# qlen/backlog (qdisc_peek_dequeued) and already as sent by its level.
lq = {t: p("mercury_level_backlog_packets", tag=t) for t in tags}
lb = sum(p("mercury_level_backlog_bytes", tag=t) for t in tags)
held = tc["qlen"] - sum(lq.values())
total = {t: p("mercury_level_packets_total", tag=t) + lq[t] + p("mercury_level_drops_total", tag=t) for t in tags}
sums = (held in (0, 1) and (held == 0) == (lb == tc["backlog"]) and tc["qlen"] > 0 and
        sum(p("mercury_level_packets_total", tag=t) for t in tags) == tc["packets"] and
        sum(p("mercury_level_drops_total", tag=t) for t in tags) == tc["drops"] > 0 and
        total["2"] == 20 and total["9"] == 30 and total["untagged"] >= 10)
print(("ok" if sums else "FAIL") + ": levels add up to the qdisc, packets queued and dropped: qlen %d (held by tbf %d) drops %d sent %d per level %r"
      % (tc["qlen"], held, tc["drops"], tc["packets"], total))
js = (mc["stats"]["packets"] == tc["packets"] and mc["stats"]["backlog"] == tc["backlog"] and
      mc["stats"]["drops"] == tc["drops"] and mc["xstats"]["drops_limit"] == x["drops_limit"] and
      [str(l["tag"] or "untagged") for l in mc["levels"]] == ["2", "9", "untagged"] and
      all(l["qlen"] == p("mercury_level_backlog_packets", tag=str(l["tag"] or "untagged")) and
          l["backlog"] == p("mercury_level_backlog_bytes", tag=str(l["tag"] or "untagged")) and
          l["class"] == "10:" + ("%x" % l["tag"] if l["tag"] else "ffff") for l in mc["levels"]))
print(("ok" if js else "FAIL") + ": mercuryctl -j stats and levels equal tc and Prometheus")
PY
sed 's/^/# /' $W/check.txt
for what in "exposition format" "qdisc metrics equal tc -s -j" "level metrics equal tc -s class show" \
	"levels add up to the qdisc, packets queued and dropped" "mercuryctl -j stats and levels equal tc and Prometheus"; do
	if grep -q "^ok: $what" $W/check.txt; then ktap_ok "prometheus: $what"; else ktap_fail "prometheus: $what"; fi
done
mc stats veth0 > $W/stats.txt
expect "text stats list each level with its class" 0 "level 2 \(class 10:2\): sent [0-9]+ bytes [0-9]+ pkt dropped [0-9]+ backlog [0-9]+b [0-9]+p" cat $W/stats.txt
expect "delete the child of tbf" 0 "" mc delete veth0 parent 1:1 handle 10:
ktap_check "tc sees the child deleted" no_mercury veth0
teardown_qdisc

# check: a plan against the qdisc it is deployed on (plans written by
# mercury-place, as users write them).
PL=$MERCURY_ROOT/userspace/place/mercury-place
PLARGS="--profile $MERCURY_ROOT/profiles/h200/resnet50.json --cluster $MERCURY_ROOT/userspace/place/clusters/h100x4.json"
$PL $PLARGS --levels 8 --tag-source dscp -o $W/plan8.json > /dev/null &&
$PL $PLARGS -o $W/plan161.json > /dev/null ||
	ktap_fail "check: mercury-place writes the plans"
mc delete dummy0 2>/dev/null
mc add dummy0 root handle 20: levels 8 tag dscp mask 0x3f
expect "check: a plan squeezed to the qdisc's levels and source fits" 0 \
	"plan8.json: 161 tensors, tags 1\.\.8 by dscp, fit 1 mercury qdisc on dummy0" mc check dummy0 plan $W/plan8.json
expect "check: another tag source is named, exit 1" 1 \
	"mercury 20: on dummy0: the plan tags by mark, the qdisc reads dscp" mc check dummy0 plan $W/plan161.json
expect "check: a plan wider than the qdisc is named, exit 1" 1 \
	"the plan uses tags up to 161, the qdisc has 8 levels" mc check dummy0 plan $W/plan161.json
expect "check: -j lists the problems" 1 '^\{"ok":false,"qdiscs":1,"problems":\["mercury 20: on dummy0: ' \
	mc -j check dummy0 plan $W/plan161.json
expect "check: no mercury qdisc there, exit 1" 1 "no mercury qdisc there on dummy0" \
	mc check dummy0 handle 30: plan $W/plan8.json
mc delete dummy0

# check at channel-set creation: libmercury compares a channel set's
# tagger with the mercury qdisc on the device each connection leaves by
# (the same rule as mercuryctl check), through the Python binding.
mc replace veth0 root handle 30: levels 8 tag dscp mask 0x3f
$IP netns exec $NS_R python3 -S -c 'import socket, time
s = socket.socket(); s.bind(("0.0.0.0", 5500)); s.listen(64); time.sleep(900)' &
lpid_r=$!
$IP netns exec $NS_S python3 -S -c 'import socket, time
s = socket.socket(); s.bind(("'$ADDR_S'", 5501)); s.listen(64); time.sleep(900)' &
lpid_s=$!
for ((i = 0; i < 100; i++)); do
	$IP netns exec $NS_R ss -Hltn 'sport = :5500' | grep -q . &&
		$IP netns exec $NS_S ss -Hltn 'sport = :5501' | grep -q . && break
	sleep 0.2
done
MERCURY_LIB=$MERCURY_ROOT/userspace/lib/libmercury.so.0 $IP netns exec $NS_S \
	python3 -S - "$MERCURY_ROOT" $ADDR_R 5500 $ADDR_S 5501 > $W/qcheck.txt 2>&1 <<'PY'
import errno, os, socket, sys, tempfile
sys.path.insert(0, sys.argv[1] + "/userspace/python")
import mercury
host, port, me, myport = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
seen = []
mercury.set_log(lambda lvl, msg: seen.append((lvl, msg)))
WARN, INFO = 0, 1

def make(mode, h=host, p=port, **kw):
    del seen[:]
    try:
        mercury.ChannelSet.connect(h, p, 2, qdisc_check=mode, **kw).close()
        return None
    except mercury.MercuryError as e:
        return e

def report(name, ok, detail):
    print(("ok: " if ok else "FAIL: ") + name + ("" if ok else " " + repr(detail)))
    print("#   " + repr(detail))

MSG = "mercury 30: on veth0: the channel set tags by mark, the qdisc reads dscp: every packet is untagged there"
e = make("warn", source="mark", classes=[1, 2])
w = [m for l, m in seen if l == WARN]
report("warn: a mark tagger on a dscp qdisc is named at warning level, the set made",
       e is None and len(w) == 1 and w[0].startswith("chanset: " + MSG), seen)
e = make("strict", source="mark", classes=[1, 2])
report("strict: the same is EINVAL naming it, no set made",
       e is not None and e.errno == errno.EINVAL and MSG in str(e), (e, seen))
socks = [socket.create_connection((host, port)) for _ in range(2)]
try:
    del seen[:]
    mercury.ChannelSet(socks, source="mark", qdisc_check="strict").close()
    e = None
except mercury.MercuryError as x:
    e = x
alive = all(os.fstat(s.fileno()) and s.send(b"x") == 1 for s in socks)
report("strict on the caller's sockets: refused, the sockets left open",
       e is not None and e.errno == errno.EINVAL and alive, (e, alive))
for s in socks:
    s.close()
e = make("strict", source="dscp", classes=[1, 8])
report("a dscp tagger within the qdisc's levels: no warning, strict passes",
       e is None and not [m for l, m in seen if l == WARN], (e, seen))
e = make("warn", source="dscp", classes=[1, 12])
w = [m for l, m in seen if l == WARN]
report("classes above the qdisc's levels are named",
       e is None and len(w) == 1 and "the channel set uses tags up to 12, the qdisc has 8 levels" in w[0], seen)
e = make("off", source="mark", classes=[1, 2])
report("off: no look at the qdisc, no line", e is None and not seen, seen)
# no callback, as in every tool: warn still looks, and says it on stderr
mercury.set_log(None)
with tempfile.TemporaryFile() as f:
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        e = make("warn", source="mark", classes=[1, 2])
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    f.seek(0)
    err = f.read().decode()
mercury.set_log(lambda lvl, msg: seen.append((lvl, msg)))
report("warn with no log callback: the misfit on stderr, the set made",
       e is None and "libmercury: chanset: " + MSG in err, err)
# this namespace's own address is reached by loopback, not veth0
e = make("strict", h=me, p=myport, source="mark")
report("a connection leaving by lo (no mercury qdisc): a note, strict passes",
       e is None and (INFO, "chanset: no mercury qdisc on lo: its tags are not checked (the qdisc may sit on another host or namespace)") in seen
       and not [m for l, m in seen if l == WARN], (e, seen))
PY
kill $lpid_r $lpid_s 2>/dev/null
wait $lpid_r $lpid_s 2>/dev/null
sed 's/^/# /' $W/qcheck.txt
n_ok=0
while IFS= read -r line; do
	case $line in
	"ok: "*) ktap_ok "chanset check: ${line#ok: }"; n_ok=$((n_ok + 1)) ;;
	"FAIL: "*) ktap_fail "chanset check: ${line#FAIL: }" ;;
	esac
done < $W/qcheck.txt
ktap_check "chanset check: all 8 cases ran" test $n_ok -eq 8
mc delete veth0
ktap_finish
