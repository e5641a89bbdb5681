#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Traffic for Mercury's selftests: tagged UDP senders, a recording
receiver, and the checks on what arrived.

send:   each --burst NAME:TAG:COUNT sends COUNT packets from the socket NAME
        (one socket = one flow) tagged TAG << shift by SO_MARK, SO_PRIORITY
        or the DSCP (IP_TOS / IPV6_TCLASS), or several of them (--source
        mark,dscp), in the order given. Each payload carries "NAME TAG SEQ".
        With --queued Q --release R, after the bursts it creates Q, waits
        for R, then sends the --kick bursts: the test stalls the link,
        lets the sender queue everything, then releases the link, and the
        kick restarts a parent qdisc that does not restart itself.
recv:   records "NAME TAG SEQ" per arriving packet, in arrival order, until
        --count packets, --idle seconds without a packet, or (--stop F)
        one second without a packet once the file F exists.
check:  assertions over a recording, printing the reason on failure.
classes: the class handles of one qdisc as an rtnetlink dump lists them,
        read one message batch at a time; after --inject-after batches it
        sends one packet tagged --inject-tag by SO_MARK, so a level gains a
        class while the dump is half done. Prints {"batches", "minors"}.
"""
import argparse
import json
import os
import socket
import sys
import time

SO_MARK = 36
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33


def family(a):
    return socket.AF_INET6 if a.family == 6 else socket.AF_INET


def tag_socket(a, s, tag):
    v = tag << a.shift
    for src in a.source.split(","):
        if src == "mark":
            s.setsockopt(socket.SOL_SOCKET, SO_MARK, v)
        elif src == "priority":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, v)
        elif src == "dscp":
            if v > 63:
                raise SystemExit("DSCP %d out of range 0..63" % v)
            # the DSCP is the top six bits of the TOS / traffic class
            if a.family == 6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, v << 2)
            else:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, v << 2)
        else:
            raise SystemExit("unknown tag source " + src)


def send_bursts(a, bursts, socks, seq):
    pad = b"x" * max(0, a.size - 40)
    for spec in bursts:
        name, tag, count = spec.split(":")
        tag, count = int(tag), int(count)
        s = socks.get(name)
        if s is None:
            s = socket.socket(family(a), socket.SOCK_DGRAM)
            # room for a whole burst in the qdisc without blocking
            s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
            socks[name] = s
            seq[name] = 0
        tag_socket(a, s, tag)
        for _ in range(count):
            msg = ("%s %d %d " % (name, tag, seq[name])).encode() + pad
            s.sendto(msg, (a.dst, a.port))
            seq[name] += 1
        if a.gap:
            time.sleep(a.gap)


def cmd_send(a):
    socks = {}
    seq = {}
    send_bursts(a, a.burst, socks, seq)
    if a.queued:
        with open(a.queued, "w") as f:
            f.write("queued\n")
    if a.release:
        deadline = time.time() + 600
        while not os.path.exists(a.release):
            if time.time() > deadline:
                raise SystemExit("no release after 600 s")
            time.sleep(0.05)
        send_bursts(a, a.kick or [], socks, seq)
    return 0


def cmd_recv(a):
    s = socket.socket(family(a), socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    s.bind(("::" if a.family == 6 else "0.0.0.0", a.port))
    # with --stop, wake up often to look for the file
    step = min(a.idle, 0.5) if a.stop else a.idle
    s.settimeout(step)
    got = []
    with open(a.ready, "w") as f:
        f.write("ready\n")
    deadline = time.time() + a.max_time
    quiet = 0.0
    while len(got) < a.count and time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            quiet += step
            if quiet >= a.idle or (a.stop and os.path.exists(a.stop) and
                                   quiet >= 1.0):
                break
            continue
        quiet = 0.0
        name, tag, seq = data.split(b" ")[:3]
        got.append((name.decode(), int(tag), int(seq)))
    with open(a.out, "w") as f:
        json.dump(got, f)
    return 0


def cmd_classes(a):
    import struct
    RTM_NEWTCLASS, RTM_GETTCLASS = 40, 42
    NLMSG_ERROR, NLMSG_DONE = 2, 3
    NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
    parent = int(a.parent.rstrip(":"), 16) << 16
    nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    nl.bind((0, 0))
    tcm = struct.pack("BBHiIII", socket.AF_UNSPEC, 0, 0,
                      socket.if_nametoindex(a.dev), 0, parent, 0)
    nl.send(struct.pack("IHHII", 16 + len(tcm), RTM_GETTCLASS,
                        NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + tcm)
    minors, batches, done = [], 0, False
    while not done:
        data = nl.recv(1 << 16)
        batches += 1
        off = 0
        while off + 16 <= len(data):
            length, typ = struct.unpack_from("IH", data, off)
            if typ == NLMSG_DONE:
                done = True
                break
            if typ == NLMSG_ERROR:
                err = struct.unpack_from("i", data, off + 16)[0]
                raise SystemExit("dump failed: %s" % os.strerror(-err))
            if typ == RTM_NEWTCLASS:
                handle = struct.unpack_from("I", data, off + 16 + 8)[0]
                minors.append(handle & 0xffff)
            off += (length + 3) & ~3
        if batches == a.inject_after:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, SO_MARK, a.inject_tag)
            s.sendto(b"inject 0 0 ", (a.dst, a.port))
    json.dump({"batches": batches, "minors": minors}, sys.stdout)
    print()
    return 0


def load(path):
    with open(path) as f:
        return json.load(f)


def fail(msg):
    print("# check failed: " + msg)
    return 1


def cmd_check(a):
    got = load(a.rec)
    print("# received %d packets: %s" % (len(got), summary(got)))
    if a.expect is not None and len(got) != a.expect:
        return fail("expected %d packets, got %d" % (a.expect, len(got)))

    if a.what == "urgent-first":
        # Every urgent packet arrived before every less urgent packet still
        # queued when it came: once urgent packets start arriving, no less
        # urgent packet arrives until the last urgent one; and some less
        # urgent packets were still queued (arrive after them).
        urg = [i for i, p in enumerate(got) if p[0] == a.urgent]
        if not urg:
            return fail("no urgent packet arrived")
        first, last = urg[0], urg[-1]
        between = [p for p in got[first:last + 1] if p[0] != a.urgent]
        after = [p for p in got[last + 1:] if p[0] != a.urgent]
        if between:
            return fail("%d less urgent packets arrived between the urgent ones"
                        % len(between))
        if len(after) < a.min_overtaken:
            return fail("only %d less urgent packets were overtaken (want >= %d)"
                        % (len(after), a.min_overtaken))
        if a.max_before is not None and first > a.max_before:
            return fail("%d less urgent packets arrived before the first urgent one (want <= %d)"
                        % (first, a.max_before))
        print("# urgent block at %d..%d, %d less urgent overtaken"
              % (first, last, len(after)))
    elif a.what == "fifo":
        # Arrival order equals sending order across all flows.
        order = [(p[0], p[2]) for p in got]
        names = []
        for p in got:
            if p[0] not in names:
                names.append(p[0])
        want = sorted(order, key=lambda x: (a.send_order.split(",").index(x[0]), x[1]))
        if order != want:
            return fail("arrival order is not the sending order")
    elif a.what == "in-flow-order":
        last = {}
        for p in got:
            if p[2] <= last.get(p[0], -1):
                return fail("flow %s: seq %d after %d" % (p[0], p[2], last[p[0]]))
            last[p[0]] = p[2]
    elif a.what == "reordered":
        # Within one flow, some packet of tag a.urgent_tag overtook an older
        # packet of the same flow.
        last = {}
        inversions = 0
        for p in got:
            if p[2] < last.get(p[0], -1):
                inversions += 1
            last[p[0]] = max(p[2], last.get(p[0], -1))
        if inversions < a.min_overtaken:
            return fail("only %d packets overtook older ones of their flow" % inversions)
        print("# %d packets overtook older ones of their flow" % inversions)
    elif a.what == "urgent-last":
        # Packets of flow a.urgent all arrive after every other packet.
        urg = [i for i, p in enumerate(got) if p[0] == a.urgent]
        other = [i for i, p in enumerate(got) if p[0] != a.urgent]
        if not urg or not other:
            return fail("need both kinds of packets")
        if urg[0] < other[-1]:
            return fail("packet of %s at %d before the last other at %d"
                        % (a.urgent, urg[0], other[-1]))
    elif a.what == "share":
        # While both were queued, flow a.urgent got at least a.share percent
        # of the packets: its k-th packet arrived by about k*100/share.
        urg = [i for i, p in enumerate(got) if p[0] == a.urgent]
        if not urg:
            return fail("no packet of %s arrived" % a.urgent)
        for k, pos in enumerate(urg, 1):
            bound = k * 100.0 / a.share + a.slack
            if pos + 1 > bound:
                return fail("packet %d of %s arrived at %d, later than %.0f"
                            % (k, a.urgent, pos + 1, bound))
        print("# %s packets at %s" % (a.urgent, urg[:10]))
    elif a.what == "count":
        n = sum(1 for p in got if p[0] == a.urgent)
        if n != a.count:
            return fail("%d packets of %s, want %d" % (n, a.urgent, a.count))
    return 0


def summary(got):
    runs = []
    for p in got:
        if runs and runs[-1][0] == p[0]:
            runs[-1][1] += 1
        else:
            runs.append([p[0], 1])
    return " ".join("%s*%d" % (n, c) for n, c in runs[:30])


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=5555)
    s.add_argument("--size", type=int, default=1000)
    s.add_argument("--source", default="mark",
                   help="mark, priority, dscp or a comma list of them")
    s.add_argument("--family", type=int, choices=[4, 6], default=4)
    s.add_argument("--shift", type=int, default=0)
    s.add_argument("--gap", type=float, default=0.0)
    s.add_argument("--burst", action="append", required=True)
    s.add_argument("--queued")
    s.add_argument("--release")
    s.add_argument("--kick", action="append")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=5555)
    r.add_argument("--family", type=int, choices=[4, 6], default=4)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--idle", type=float, default=10.0)
    r.add_argument("--stop", help="once this file exists, stop after one"
                   " quiet second: the test knows nothing more will come")
    r.add_argument("--max-time", type=float, default=120.0)
    r.add_argument("--out", required=True)
    r.add_argument("--ready", required=True)
    c = sub.add_parser("check")
    c.add_argument("what", choices=["urgent-first", "fifo", "in-flow-order",
                                    "reordered", "urgent-last", "share",
                                    "count"])
    c.add_argument("--rec", required=True)
    c.add_argument("--urgent")
    c.add_argument("--expect", type=int)
    c.add_argument("--count", type=int)
    c.add_argument("--min-overtaken", type=int, default=1)
    c.add_argument("--max-before", type=int)
    c.add_argument("--send-order", default="")
    c.add_argument("--share", type=float, default=10)
    c.add_argument("--slack", type=float, default=5)
    k = sub.add_parser("classes")
    k.add_argument("--dev", required=True)
    k.add_argument("--parent", required=True, help="the qdisc's handle, 10:")
    k.add_argument("--inject-after", type=int, default=0)
    k.add_argument("--inject-tag", type=int, default=1)
    k.add_argument("--dst", default="127.0.0.1")
    k.add_argument("--port", type=int, default=5555)
    a = ap.parse_args()
    return {"send": cmd_send, "recv": cmd_recv, "check": cmd_check,
            "classes": cmd_classes}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
