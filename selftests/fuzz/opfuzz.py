#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Operation-sequence fuzzer for sch_mercury (run in the guest, as root).

Each sequence picks a placement (mercury as root, as the child of tbf, of
htb, or one mercury per tx queue under mq), starts tagged TCP and UDP
traffic (mercury-blast) and applies 4..10 random operations: change,
replace (same kind: a change), graft (a pfifo takes the place, mercury
replaces it), delete + add, class dump, qdisc dump, link down/up and
rmmod/insmod (after deleting every mercury). A valid request must succeed
and an invalid one (levels above the mask, untagged_share with untagged
first) must fail; after every delete the parent must hold nothing.

Each sequence ends, traffic stopped, with the accounting check: a
structural change (fresh level counters, no bypass, room for everything),
then COUNT datagrams at tags 1, 2 and 0 through the drained queues:
  - sent + dropped + queued = enqueued (COUNT), with nothing queued after;
  - the levels sum to the qdisc, COUNT / 3 at each tag;
  - the receiver got what the qdiscs sent;
  - every mercury and its parent: qlen 0, backlog 0, memory_usage 0;
and, after the qdiscs are deleted, the skb-leak check: skbuff_head_cache
plus skbuff_fclone_cache allocated objects, after a slab flush, back to
the run's starting value within --skb-slack.

Prints KTAP-style "# " progress and one summary line; exits 1 at the
first failing sequence, naming the seed that replays it.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

TC = "/usr/sbin/tc"
IP = "/usr/sbin/ip"
TAGS = [0, 1, 2, 3, 5, 8, 63, 64, 65, 1000, 1024, 1025, 65535, 65536, 70000]
PROBE_PORT = 9100
PROBE_TAGS = (1, 2, 0)


class Failure(Exception):
    pass


class Fuzz:
    def __init__(self, a):
        self.a = a
        self.r = random.Random()
        self.log_ops = []
        self.send = None

    # ---- commands --------------------------------------------------------
    def run(self, argv, ok=True, what=None):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        self.log_ops.append("%s -> %d%s" % (" ".join(argv[3:] if argv[0] == TC else argv),
                                            p.returncode,
                                            (" " + p.stderr.strip()) if p.returncode else ""))
        if ok is True and p.returncode != 0:
            raise Failure("%s failed: %s" % (what or " ".join(argv), p.stderr.strip()))
        if ok is False and p.returncode == 0:
            raise Failure("%s succeeded but must fail" % (what or " ".join(argv)))
        return p

    def tc(self, *args, ok=True, what=None):
        return self.run([TC, "-n", self.a.ns_s] + list(args), ok, what)

    def qdiscs(self):
        out = self.tc("-s", "-j", "qdisc", "show", "dev", "veth0").stdout
        return {q["handle"]: q for q in json.loads(out)}

    def classes(self):
        """Per mercury class: (handle, tag, packets, drops, qlen)."""
        out = self.tc("-s", "class", "show", "dev", "veth0").stdout
        res = []
        for block in re.split(r"\n(?=class )", out):
            if not block.startswith("class mercury "):
                continue
            m = re.search(r"^class mercury (\S+) .*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+)"
                          r".*?backlog \S+ (\d+)p.*?tag (\d+) ", block, re.S)
            if not m:
                raise Failure("cannot parse class dump:\n" + block)
            res.append((m.group(1), int(m.group(6)), int(m.group(3)),
                        int(m.group(4)), int(m.group(5))))
        return res

    # ---- options -----------------------------------------------------------
    def rand_opts(self):
        r = self.r
        o = {}
        pool = {
            "levels": [1, 2, 3, 8, 64, 1024, 65535, 65536],
            "flows": [1, 2, 16, 1024, 65536],
            "limit": [1, 2, 10, 100, 1000, 10000],
            "memory_limit": [3000, 100000, 33554432],
            "tag": ["mark", "priority"],
            "shift": [0, 1, 4, 8],
            "mask": [1, 0xf, 0xff, 0xffff, 0xffffffff],
            "untagged": ["first", "last"],
            "untagged_share": [0, 10, 50, 90],
            "flow_order": ["on", "off"],
            "quantum": [256, 1514, 3028, 65536, 1048576],
            "bypass": ["on", "off"],
        }
        for k in r.sample(sorted(pool), r.randint(0, 6)):
            o[k] = r.choice(pool[k])
        # mostly valid: pull the cross-option rules right most of the time
        if r.random() < 0.85:
            if o.get("untagged_share"):
                o["untagged"] = "last"
            if "levels" in o and "mask" in o and o["levels"] > o["mask"]:
                o["mask"] = 0xffffffff
        return o

    @staticmethod
    def argv(o):
        out = []
        for k, v in o.items():
            out += [k, "0x%x" % v if k == "mask" else str(v)]
        return out

    @staticmethod
    def valid(base, o):
        c = dict(base)
        c.update(o)
        if c["levels"] > c["mask"]:
            return False
        if c["untagged_share"] and c["untagged"] != "last":
            return False
        return True

    DEFAULTS = {"levels": 1024, "mask": 0xffff, "untagged": "first", "untagged_share": 0}

    def current(self, handle):
        q = self.qdiscs().get(handle)
        if not q or q["kind"] != "mercury":
            raise Failure("no mercury %s (found %s)" % (handle, q and q["kind"]))
        o = q["options"]
        return {"levels": o["levels"], "mask": o["mask"], "untagged": o["untagged"],
                "untagged_share": o.get("untagged_share", 0)}

    # ---- placements --------------------------------------------------------
    def setup(self, placement):
        self.placement = placement
        self.tc("qdisc", "del", "dev", "veth0", "root", ok=None)
        if placement == "root":
            self.inst = [("root", "10:")]
        elif placement == "tbf":
            rate = self.r.choice(["5mbit", "50mbit"])
            self.tc("qdisc", "add", "dev", "veth0", "root", "handle", "1:", "tbf",
                    "rate", rate, "burst", "20k", "limit", "2000000")
            self.inst = [("1:1", "10:")]
        elif placement == "htb":
            rate = self.r.choice(["5mbit", "50mbit"])
            self.tc("qdisc", "add", "dev", "veth0", "root", "handle", "1:", "htb", "default", "1")
            self.tc("class", "add", "dev", "veth0", "parent", "1:", "classid", "1:1", "htb",
                    "rate", rate, "burst", "20k")
            self.inst = [("1:1", "10:")]
        else:
            self.tc("qdisc", "add", "dev", "veth0", "root", "handle", "1:", "mq")
            self.inst = [("1:%x" % i, "%x:" % (0x10 + i)) for i in range(1, 5)]
        for parent, handle in self.inst:
            self.add(parent, handle)

    def pargs(self, parent):
        return ["root"] if parent == "root" else ["parent", parent]

    def add(self, parent, handle):
        o = self.rand_opts()
        ok = self.valid(self.DEFAULTS, o)
        self.tc("qdisc", "add", "dev", "veth0", *self.pargs(parent), "handle", handle,
                "mercury", *self.argv(o), ok=ok)
        if not ok:
            self.tc("qdisc", "add", "dev", "veth0", *self.pargs(parent), "handle", handle,
                    "mercury")

    def parent_empty(self, what):
        """After mercury is deleted, its parent must not count a packet that
        no child holds. Under traffic a reading proves nothing: htb grafts a
        default pfifo into the class and keeps queueing (tbf grafts noop).
        So the sender is stopped, and the parent must drain to empty while
        the packets its sockets already hold go out."""
        if self.placement not in ("tbf", "htb"):
            return
        if self.send:
            self.send.send_signal(signal.SIGSTOP)
        try:
            deadline = time.time() + 60
            while True:
                q = self.qdiscs()["1:"]
                if q["qlen"] == 0 and q["backlog"] == 0:
                    return
                if time.time() > deadline:
                    raise Failure("%s: %s parent holds qlen %d backlog %d 60 s after "
                                  "the sender stopped" %
                                  (what, self.placement, q["qlen"], q["backlog"]))
                time.sleep(0.2)
        finally:
            if self.send:
                self.send.send_signal(signal.SIGCONT)

    def deleted(self, parents, what):
        """The parent holds nothing once mercury was deleted. tbf puts
        noop in its place, but htb a default pfifo, which the traffic still
        flowing fills at once: what htb counts then is that pfifo's. So
        under htb a pfifo that admits nothing replaces it first (the purge
        reports exactly what the default pfifo held), and is deleted again
        after the check (back to htb's default child, which add replaces).
        No random draw: a seed replays the same operations."""
        tmp = ["%x:" % (0x1f0 + i) for i in range(len(parents))]
        if self.placement == "htb":
            for parent, h in zip(parents, tmp):
                self.tc("qdisc", "replace", "dev", "veth0", "parent", parent,
                        "handle", h, "pfifo", "limit", "0")
        self.parent_empty(what)
        if self.placement == "htb":
            for parent, h in zip(parents, tmp):
                self.tc("qdisc", "del", "dev", "veth0", "parent", parent, "handle", h)

    # ---- operations --------------------------------------------------------
    def op_change(self, verb):
        parent, handle = self.r.choice(self.inst)
        o = self.rand_opts()
        ok = self.valid(self.current(handle), o)
        self.tc("qdisc", verb, "dev", "veth0", *self.pargs(parent), "handle", handle,
                "mercury", *self.argv(o), ok=ok)

    def op_graft(self):
        parent, handle = self.r.choice(self.inst)
        tmp = "%x:" % (int(handle[:-1], 16) + 0x100)
        self.tc("qdisc", "replace", "dev", "veth0", *self.pargs(parent), "handle", tmp,
                "pfifo", "limit", "100")
        o = self.rand_opts()
        ok = self.valid(self.DEFAULTS, o)
        self.tc("qdisc", "replace", "dev", "veth0", *self.pargs(parent), "handle", handle,
                "mercury", *self.argv(o), ok=ok)
        if not ok:
            self.tc("qdisc", "replace", "dev", "veth0", *self.pargs(parent), "handle", handle,
                    "mercury")

    def delete_all(self):
        if self.placement == "root":
            self.tc("qdisc", "del", "dev", "veth0", "root")
            return
        for parent, handle in self.inst:
            self.tc("qdisc", "del", "dev", "veth0", "parent", parent, "handle", handle)
        self.deleted([parent for parent, _ in self.inst], "after deleting mercury")

    def readd_all(self):
        for parent, handle in self.inst:
            self.add(parent, handle)

    def op_delete_add(self):
        parent, handle = self.r.choice(self.inst)
        self.tc("qdisc", "del", "dev", "veth0", *self.pargs(parent), "handle", handle)
        self.deleted([parent], "after deleting mercury %s" % handle)
        time.sleep(self.r.choice([0, 0.05, 0.2]))
        self.add(parent, handle)

    def op_link(self):
        self.run([IP, "-n", self.a.ns_s, "link", "set", "veth0", "down"])
        time.sleep(self.r.choice([0, 0.1, 0.3]))
        self.run([IP, "-n", self.a.ns_s, "link", "set", "veth0", "up"])
        self.pin_neighbours()

    def pin_neighbours(self):
        """Permanent neighbours both ways: no ARP request, and no ARP reply
        (an untagged packet at any moment) through the queue. A link down
        flushes even permanent entries."""
        self.run([IP, "-n", self.a.ns_s, "neigh", "replace", self.a.dst, "lladdr",
                  self.a.lladdr, "dev", "veth0", "nud", "permanent"])
        self.run([IP, "-n", self.a.ns_r, "neigh", "replace", self.a.src, "lladdr",
                  self.a.lladdr_s, "dev", "veth1", "nud", "permanent"])

    def op_rmmod(self):
        self.delete_all()
        self.run(["rmmod", "sch_mercury"], what="rmmod with no mercury qdisc left")
        self.run(["insmod", self.a.ko])
        if self.placement == "root":
            self.add("root", "10:")
        else:
            self.readd_all()

    def op_class_dump(self):
        for h, tag, pk, dr, ql in self.classes():
            if pk < 0 or dr < 0 or ql < 0:
                raise Failure("class %s: negative counter" % h)

    def op_qdisc_dump(self):
        for parent, handle in self.inst:
            q = self.qdiscs()[handle]
            if q["qlen"] < 0 or q["backlog"] < 0:
                raise Failure("%s: negative qlen/backlog" % handle)

    # ---- traffic -----------------------------------------------------------
    def start_traffic(self):
        r = self.r
        tags = ",".join(str(t) for t in r.sample(TAGS, r.randint(1, 6)))
        self.send = subprocess.Popen(
            [IP, "netns", "exec", self.a.ns_s, self.a.blast, "send", "-a", self.a.dst,
             "-p", "9000", "-T", str(r.randint(1, 4)), "-b", str(r.choice([20000, 100000])),
             "-U", str(r.randint(1, 4)),
             "-g", tags, "-r", str(r.choice([100, 300, 1000])), "-l",
             str(r.choice([64, 600, 1400]))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop_traffic(self):
        if self.send:
            self.send.send_signal(signal.SIGTERM)
            self.send.wait()
            self.send = None

    def wait_drained(self, seconds=60):
        deadline = time.time() + seconds
        while True:
            qs = self.qdiscs()
            if all(qs.get(h, {}).get("qlen", 0) == 0 for _, h in self.inst):
                return qs
            if time.time() > deadline:
                raise Failure("queues did not drain in %ds" % seconds)
            time.sleep(0.2)

    # ---- checks ------------------------------------------------------------
    def final_check(self):
        self.stop_traffic()
        self.wait_drained()
        time.sleep(0.5)		# late TCP resets and their answers
        self.wait_drained()
        for parent, handle in self.inst:
            levels = 100 if self.current(handle)["levels"] != 100 else 101
            self.tc("qdisc", "change", "dev", "veth0", *self.pargs(parent), "handle", handle,
                    "mercury", "levels", str(levels), "mask", "0xffff", "shift", "0",
                    "tag", "mark", "untagged", "first", "untagged_share", "0",
                    "limit", "10000", "memory_limit", "33554432", "bypass", "off",
                    "flows", "1024", "quantum", "3028", "flow_order", "on")
        q0 = self.qdiscs()
        c0 = self.classes()
        n = self.a.count
        sink = subprocess.Popen(
            [IP, "netns", "exec", self.a.ns_r, self.a.blast, "sink", "-p", str(PROBE_PORT),
             "-c", str(n), "-t", "30"], stdout=subprocess.PIPE, universal_newlines=True)
        sink.stdout.readline()		# "# sink ready"
        self.run([IP, "netns", "exec", self.a.ns_s, self.a.blast, "send", "-a", self.a.dst,
                  "-p", str(PROBE_PORT), "-U", str(len(PROBE_TAGS)),
                  "-g", ",".join(map(str, PROBE_TAGS)), "-c", str(n), "-r", "0", "-l", "200"])
        got = int(re.search(r"udp_packets (\d+)", sink.communicate()[0]).group(1))
        q1 = self.wait_drained()
        sent = sum(q1[h]["packets"] - q0[h]["packets"] for _, h in self.inst)
        dropped = sum(q1[h]["drops"] - q0[h]["drops"] for _, h in self.inst)
        queued = sum(q1[h]["qlen"] for _, h in self.inst)
        if sent + dropped + queued != n or dropped:
            raise Failure("accounting: sent %d + dropped %d + queued %d != enqueued %d"
                          " (no drop expected)" % (sent, dropped, queued, n))
        if got != sent:
            raise Failure("receiver got %d, the qdiscs sent %d" % (got, sent))
        # deltas: a level may have counted a stray packet between the
        # change and q0 (the qdisc's delta does not see it either)
        per_tag = {}
        cl_drops = 0
        for sign, cls in ((-1, c0), (1, self.classes())):
            for h, tag, pk, dr, ql in cls:
                per_tag[tag] = per_tag.get(tag, 0) + sign * pk
                cl_drops += sign * dr
        per_tag = {t: v for t, v in per_tag.items() if v}
        want = {t: n // len(PROBE_TAGS) for t in PROBE_TAGS}
        if per_tag != want or cl_drops != dropped:
            raise Failure("levels do not sum to the qdisc: %s (drops %d), want %s" %
                          (per_tag, cl_drops, want))
        for _, h in self.inst:
            q = q1[h]
            x = q.get("memory_usage", 0)
            if q["qlen"] or q["backlog"] or x or q.get("flows", 0):
                raise Failure("%s not empty: qlen %d backlog %d memory %s flows %s" %
                              (h, q["qlen"], q["backlog"], x, q.get("flows")))
        self.parent_empty("after the probe")

    def skb_objects(self):
        for c in ("skbuff_head_cache", "skbuff_fclone_cache"):
            try:
                with open("/sys/kernel/slab/%s/shrink" % c, "w") as f:
                    f.write("1")
            except OSError:
                pass
        total = 0
        found = False
        with open("/proc/slabinfo") as f:
            for line in f:
                w = line.split()
                if w and w[0] in ("skbuff_head_cache", "skbuff_fclone_cache"):
                    total += int(w[1])
                    found = found or w[0] == "skbuff_head_cache"
        if not found:
            raise Failure("no skbuff_head_cache in /proc/slabinfo")
        return total

    # ---- one sequence --------------------------------------------------------
    def sequence(self, seed):
        self.r.seed(seed)
        self.log_ops = []
        placement = self.r.choice(["root", "tbf", "htb", "mq"])
        self.setup(placement)
        self.start_traffic()
        ops = []
        for _ in range(self.r.randint(4, 10)):
            op = self.r.choices(
                ["change", "replace", "graft", "delete_add", "class_dump", "qdisc_dump",
                 "link", "rmmod"], [35, 10, 8, 12, 12, 8, 8, 7])[0]
            ops.append(op)
            if op == "change":
                self.op_change("change")
            elif op == "replace":
                self.op_change("replace")
            else:
                getattr(self, "op_" + op)()
            time.sleep(self.r.choice([0, 0.05, 0.2]))
        self.final_check()
        self.tc("qdisc", "del", "dev", "veth0", "root")
        return placement, ops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns-s", required=True)
    ap.add_argument("--ns-r", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--src", required=True, help="the sender's address")
    ap.add_argument("--lladdr", required=True, help="the receiver's MAC")
    ap.add_argument("--lladdr-s", required=True, help="the sender's MAC")
    ap.add_argument("--ko", required=True)
    ap.add_argument("--blast", required=True)
    ap.add_argument("--seqs", type=int, default=20)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=150, help="probe datagrams")
    ap.add_argument("--skb-slack", type=int, default=64)
    a = ap.parse_args()
    f = Fuzz(a)
    try:
        base = f.skb_objects()
    except Failure as e:
        print("# opfuzz: %s" % e)
        return 1
    f.pin_neighbours()
    print("# opfuzz: seed %d, %d sequences, skb objects at start %d" % (a.seed, a.seqs, base),
          flush=True)
    counts = {}
    t0 = time.time()
    for i in range(a.seqs):
        s = a.seed + i
        try:
            placement, ops = f.sequence(s)
            now = f.skb_objects()
            if now - base >= a.skb_slack:
                raise Failure("skb objects %d at the end, %d at the start" % (now, base))
        except Failure as e:
            f.stop_traffic()
            print("# opfuzz: sequence %d FAILED (replay: --seed %d --seqs 1): %s" % (i, s, e))
            for line in f.log_ops[-40:]:
                print("#   " + line)
            sys.stdout.flush()
            return 1
        counts[placement] = counts.get(placement, 0) + 1
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
        if a.seqs < 10 or (i + 1) % (a.seqs // 10) == 0:
            print("# opfuzz: %d sequences in %.0fs, skb objects %d (start %d)" %
                  (i + 1, time.time() - t0, now, base))
            sys.stdout.flush()
    print("# opfuzz: %d sequences clean in %.0fs: %s" %
          (a.seqs, time.time() - t0, " ".join("%s %d" % kv for kv in sorted(counts.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
