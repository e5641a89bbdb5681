#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""One backward pass of gradients through libmercury, end to end.

send:  reads an h200 profile, builds the default plan from it
       (mercury.Plan.from_profile, optionally squeezed to --levels), makes
       one pseudo-random buffer per grad_ready entry (4 * numel bytes
       divided by --scale, at least --min-bytes) and sends them in
       grad_ready (backward) order through a mercury.ChannelSet of --conns
       TCP connections, each chunk tagged with its tensor's plan tag.
       Writes a manifest: per tensor id, name, tag, forward rank (the tag
       of the unsqueezed default plan), length, SHA-256 and the time the
       last byte was handed to the kernel.
recv:  accepts --conns connections, reassembles with mercury.Receiver and
       records, in completion order, id, tag, length, SHA-256 and time:
       by default the kernel's arrival time of the tensor's last byte
       (pieces fed to the library in arrival order), with --poll the time
       mercury_rx_poll() returned it.
check: compares a recording with the manifest (every tensor, right bytes,
       right tag) and measures how close the completion order is to the
       forward order; prints the numbers as "# key value" lines and, with
       -j FILE, writes them to FILE as one JSON object.
       With --classes, also checks that each tag's qdisc class sent at
       least the bytes of its frames (`tc -s class show` output).
"""
import argparse
import errno
import hashlib
import json
import os
import random
import selectors
import socket
import struct
import sys
import time

from tcclass import class_sent

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "userspace", "python"))
mercury = None      # imported by send and recv only: check runs without it


def load_mercury():
    global mercury
    import mercury as m
    mercury = m

SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35             # SO_TIMESTAMPNS_OLD: struct timespec
PROG = "tensors.py"


def err(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr)
    return 1


def big_buffer(s, opt_force, opt, size):
    """As much socket buffer as we may have: FORCE as root, else the cap."""
    try:
        s.setsockopt(socket.SOL_SOCKET, opt_force, size)
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, opt, size)


def tensor_bytes(tid, n):
    return random.Random(tid).randbytes(n)


def cmd_send(a):
    load_mercury()
    try:
        plan = mercury.Plan.from_profile(a.profile, levels=a.levels)
        full = mercury.Plan.from_profile(a.profile)
        with open(a.profile) as f:
            order = [(g["param"], 4 * g["numel"])
                     for g in json.load(f)["grad_ready"]]
    except (OSError, ValueError) as e:
        return err("%s: %s" % (a.profile, e))

    manifest = []
    bufs = []
    for tid, (name, nbytes) in enumerate(order):
        n = max(a.min_bytes, nbytes // a.scale)
        data = tensor_bytes(tid, n)
        tag = plan.get(name)
        if tag is None:
            return err("plan has no tag for %s" % name)
        manifest.append({"id": tid, "name": name, "tag": tag,
                         "rank": full[name], "len": n,
                         "sha256": hashlib.sha256(data).hexdigest()})
        bufs.append(data)

    socks = []
    for _ in range(a.conns):
        s = socket.create_connection((a.dst, a.port))
        # The whole pass must fit in the kernel so a blocked write never
        # holds an urgent tensor back: the ordering is the qdisc's job.
        big_buffer(s, SO_SNDBUFFORCE, socket.SO_SNDBUF, 64 << 20)
        socks.append(s)
    try:
        chans = mercury.ChannelSet(socks, source=a.source,
                                   chunk_size=a.chunk)
        t0 = time.monotonic()
        for m, data in zip(manifest, bufs):
            chans.send(m["id"], m["tag"], data)
            # all of it is in the kernel now (wall clock, like the
            # receiver's SO_TIMESTAMPNS; one kernel, so one clock)
            m["sent"] = time.time()
        elapsed = time.monotonic() - t0
        st = chans.stats
        chans.close()
    except mercury.MercuryError as e:
        return err("send: %s" % e.strerror)
    finally:
        with open(a.manifest, "w") as f:
            json.dump(manifest, f)
    for s in socks:
        s.close()
    print("# sender: %d tensors, %d bytes handed to the kernel in %.2f s; "
          "chunks %d, setsockopt %d, chunks behind less urgent bytes %d"
          % (len(manifest), sum(m["len"] for m in manifest), elapsed,
             st["chunks"], st["tag_syscalls"], st["inversions"]))
    return 0


def record(got, t0, tid, tag, data, when):
    got.append({"id": tid, "tag": tag, "len": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "t": round(when - t0, 4), "done": when})


def recv_poll(rx, conns, got, t0, deadline):
    """The library reads (mercury_rx_poll); completion time = when this
    process saw it."""
    for c in conns:
        rx.add(c)
    while time.time() < deadline:
        try:
            rx.poll(1000)
        except mercury.MercuryError as e:
            if e.errno != errno.ENOTCONN:   # else: all closed cleanly
                return err("recv: %s" % e.strerror)
            return 0
        for tid, tag, data in rx:
            record(got, t0, tid, tag, data, time.time())
    return err("recv: timeout after %d tensors" % len(got))


def recv_feed(rx, conns, got, t0, deadline):
    """Completion order by the kernel's arrival time, not by when this
    process ran: read every connection in pieces of at most one segment
    with SO_TIMESTAMPNS, merge the pieces of all connections by their
    timestamps and feed them to the library in that order. A tensor
    completes at the arrival time of its last piece. Without this, a
    receiver descheduled for a moment would see a burst of tensors
    complete in the order it happens to read the connections."""
    idx = {}
    for c in conns:
        c.setblocking(False)
        idx[c] = rx.add(None)
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c, selectors.EVENT_READ)
    space = socket.CMSG_SPACE(16)
    last = {}
    unstamped = [0]
    while sel.get_map() and time.time() < deadline:
        pieces = []
        for key, _ in sel.select(1):
            c = key.fileobj
            while True:
                try:
                    data, anc, _, _ = c.recvmsg(1448, space)
                except BlockingIOError:
                    break
                if not data:
                    sel.unregister(c)
                    break
                ts = None
                for level, kind, raw in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = struct.unpack("qq", raw[:16])
                        ts = sec + nsec / 1e9
                if ts is None:          # not stamped: now is the best bound
                    ts = time.time()
                    unstamped[0] += 1
                # A read's stamp is that of its last segment; after a
                # retransmission filled a hole, the next read may end on
                # an older segment. Keep each stream's stamps monotonic
                # so the merge below never reorders bytes of one stream.
                ts = last[c] = max(ts, last.get(c, 0))
                pieces.append((ts, idx[c], data))
        pieces.sort(key=lambda p: p[0])         # stable: stream order kept
        for ts, conn, data in pieces:
            if rx.feed(conn, data):
                for tid, tag, body in rx:
                    record(got, t0, tid, tag, body, ts)
    if unstamped[0]:
        print("# receiver: %d reads without a kernel time stamp" % unstamped[0])
    if sel.get_map():
        return err("recv: timeout after %d tensors" % len(got))
    return 0


def cmd_recv(a):
    load_mercury()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", a.port))
    # Accepted sockets inherit the flag. Set before any data arrives: the
    # kernel turns receive stamps on with a delay (a deferred static key).
    ls.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    ls.listen(a.conns)
    ls.settimeout(a.timeout)
    with open(a.ready, "w") as f:
        f.write("ready\n")
    conns = []
    try:
        for _ in range(a.conns):
            c, _ = ls.accept()
            big_buffer(c, SO_RCVBUFFORCE, socket.SO_RCVBUF, 16 << 20)
            conns.append(c)
    except socket.timeout:
        return err("recv: only %d of %d connections" % (len(conns), a.conns))
    rx = mercury.Receiver()
    got = []
    t0 = time.time()            # all connected: the sender starts now
    deadline = t0 + a.timeout
    result = (recv_poll if a.poll else recv_feed)(rx, conns, got, t0,
                                                  deadline)
    with open(a.out, "w") as f:
        json.dump(got, f)
    return result


def inversions(seq):
    """Pairs i < j with seq[i] > seq[j] (merge sort, O(n log n))."""
    def sort(v):
        if len(v) < 2:
            return v, 0
        mid = len(v) // 2
        left, x = sort(v[:mid])
        right, y = sort(v[mid:])
        out, inv, i, j = [], x + y, 0, 0
        while i < len(left) and j < len(right):
            if left[i] <= right[j]:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                inv += len(left) - i
                j += 1
        return out + left[i:] + right[j:], inv
    return sort(list(seq))[1]


def cmd_check(a):
    with open(a.manifest) as f:
        man = {m["id"]: m for m in json.load(f)}
    with open(a.rec) as f:
        got = json.load(f)
    bad = []
    seen = set()
    for g in got:
        m = man.get(g["id"])
        if m is None:
            bad.append("unknown tensor id %d" % g["id"])
        elif g["id"] in seen:
            bad.append("tensor %d completed twice" % g["id"])
        elif (g["len"], g["sha256"]) != (m["len"], m["sha256"]):
            bad.append("%s: %d bytes sha256 %s, sent %d bytes sha256 %s"
                       % (m["name"], g["len"], g["sha256"][:12], m["len"],
                          m["sha256"][:12]))
        elif g["tag"] != m["tag"]:
            bad.append("%s: tag %d, plan says %d"
                       % (m["name"], g["tag"], m["tag"]))
        seen.add(g["id"])
    missing = [man[i]["name"] for i in man if i not in seen]
    if missing:
        bad.append("%d tensors missing, e.g. %s"
                   % (len(missing), ", ".join(missing[:3])))
    if a.classes:
        bad += check_classes(man.values(), a.classes, a.chunk)

    n = len(got)
    pairs = n * (n - 1) // 2
    ranks = [man[g["id"]]["rank"] for g in got if g["id"] in man]
    tags = [man[g["id"]]["tag"] for g in got if g["id"] in man]
    # Inversions against the forward order (the full plan's rank) ...
    inv = inversions(ranks)
    # ... against the send (backward) order: the ids ...
    inv_send = inversions([g["id"] for g in got])
    # ... and among pairs whose tags differ (the qdisc cannot order
    # equal tags against each other beyond FIFO per connection).
    ties = sum(c * (c - 1) // 2 for c in
               (tags.count(t) for t in set(tags)))
    inv_tag = inversions(tags)
    # Avoidable: a pair with different tags completed less urgent first
    # although the more urgent tensor was already in the kernel (sent)
    # before the less urgent one could have started arriving: its
    # completion minus its own time on the link (payload, frame header
    # and ~5% packet headers at --rate-bps). What the link carried before
    # the urgent data existed is not counted.
    avoidable = 0
    for i, gb in enumerate(got):
        mb = man.get(gb["id"])
        if not mb:
            continue
        wire = (mb["len"] + 32) * 1.05 * 8 / a.rate_bps if a.rate_bps else 0
        start = gb["done"] - wire
        for ga in got[i + 1:]:
            ma = man.get(ga["id"])
            if (ma and ma["tag"] < mb["tag"] and
                    ma.get("sent", 1e300) < start):
                avoidable += 1
    # The k most urgent vs the k least urgent tags: how many of the
    # (urgent, least urgent) pairs complete urgent first.
    maxtag = max(m["tag"] for m in man.values())
    k = a.k
    pos = {g["id"]: i for i, g in enumerate(got)}
    urg = [pos[i] for i, m in man.items() if m["tag"] <= k and i in pos]
    lst = [pos[i] for i, m in man.items()
           if m["tag"] > maxtag - k and i in pos]
    ahead = sum(1 for u in urg for v in lst if u < v)
    tot = len(urg) * len(lst)
    # When the last of the k most urgent tags completed, in seconds since
    # the connections were up and as a fraction of the whole transfer.
    udone = max((g["t"] for g in got
                 if g["id"] in man and man[g["id"]]["tag"] <= k), default=0)
    done = got[-1]["t"] if got else 0
    res = {
        "tensors": n, "pairs": pairs,
        "inversions": inv, "inversions_frac": round(inv / max(1, pairs), 4),
        "send_order_inversions": inv_send,
        "tag_pairs": pairs - ties, "tag_inversions": inv_tag,
        "avoidable_inversions": avoidable,
        "urgent_ahead": ahead, "urgent_pairs": tot,
        "urgent_ahead_frac": round(ahead / max(1, tot), 4),
        "first": [man[g["id"]]["name"] for g in got[:3] if g["id"] in man],
        "last": [man[g["id"]]["name"] for g in got[-3:] if g["id"] in man],
        "urgent_done_s": udone, "all_done_s": done,
        "urgent_done_frac": round(udone / done, 4) if done else 0,
        "errors": bad,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
    for key, v in res.items():
        print("# %s %s" % (key, v))
    return 1 if bad else 0


def check_classes(man, path, chunk):
    """Bytes per qdisc class (`tc -s class show` text in path) against the
    frames the manifest put on each tag: every tag's class must have sent
    at least its frames' bytes (header + payload), so the tags were on the
    wire (retransmissions may add more). The untagged class may hold bare
    control packets only (SYN and ACK before the first tag): at most 100
    bytes each on average. Returns a list of errors."""
    want = {}
    for m in man:
        chunks = max(1, -(-m["len"] // chunk))
        want[m["tag"]] = want.get(m["tag"], 0) + m["len"] + 32 * chunks
    sent = class_sent(path)
    bad = []
    for tag in sorted(want):
        b = sent.get(tag, (0, 0))[0]
        print("# class %d: sent %d bytes, frames %d bytes (x%.3f)"
              % (tag, b, want[tag], b / want[tag]))
        if b < want[tag]:
            bad.append("class %d sent %d bytes < %d" % (tag, b, want[tag]))
    for t, (b, p) in sorted(sent.items()):
        if t in want:
            continue
        print("# class 0x%x (no tensor has this tag): %d bytes %d packets"
              % (t, b, p))
        if t != 0xffff or b > 100 * p:
            bad.append("class 0x%x sent %d bytes in %d packets" % (t, b, p))
    return bad


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=5301)
    s.add_argument("--conns", type=int, default=8)
    s.add_argument("--profile", required=True)
    s.add_argument("--levels", type=int, default=0,
                   help="squeeze the plan into 1..LEVELS (0: one per tensor)")
    s.add_argument("--scale", type=int, default=64)
    s.add_argument("--min-bytes", type=int, default=4096)
    s.add_argument("--chunk", type=int, default=0)
    s.add_argument("--source", choices=("mark", "priority"), default="mark")
    s.add_argument("--manifest", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=5301)
    r.add_argument("--conns", type=int, default=8)
    r.add_argument("--out", required=True)
    r.add_argument("--ready", required=True)
    r.add_argument("--timeout", type=float, default=60)
    r.add_argument("--poll", action="store_true",
                   help="let the library read (mercury_rx_poll) instead of "
                   "feeding it pieces in kernel arrival order")
    c = sub.add_parser("check")
    c.add_argument("--manifest", required=True)
    c.add_argument("--rec", required=True)
    c.add_argument("-k", type=int, default=1,
                   help="compare tags 1..K with the K least urgent tags")
    c.add_argument("--rate-bps", type=float, default=0,
                   help="link rate, for the avoidable inversions")
    c.add_argument("--classes", metavar="FILE",
                   help="also check `tc -s class show` output in FILE")
    c.add_argument("--chunk", type=int, default=256 * 1024,
                   help="the sender's chunk size (frames per tensor)")
    c.add_argument("-j", "--json", metavar="FILE",
                   help="also write the results as one JSON object")
    a = ap.parse_args()
    if a.cmd in ("send", "recv") and not 1 <= a.conns <= 1024:
        ap.error("--conns must be 1..1024")
    try:
        return {"send": cmd_send, "recv": cmd_recv, "check": cmd_check}[a.cmd](a)
    except (OSError, ValueError, KeyError) as e:
        return err(str(e))


if __name__ == "__main__":
    sys.exit(main())
