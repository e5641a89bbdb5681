#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""A plain bulk TCP program that knows nothing about tags, for mercury-run.

send:  each --bulk PORT:BYTES:DELAY is one thread that waits DELAY seconds,
       connects to DST:PORT, writes BYTES and closes. Default socket
       options: nothing here sets a mark, a priority or a buffer size.
recv:  listens on every --port, accepts one connection per port and
       records (time, port, bytes) for every read until all are closed.
check: did the data of --urgent overtake the queued data of --bulk?
       Prints "# key value" lines; exit 1 if the --expect condition fails.
       With --classes, also checks the bytes per qdisc class.
"""
import argparse
import json
import selectors
import socket
import sys
import threading
import time

from tcclass import class_sent

PROG = "plain.py"


def cmd_send(a):
    errors = []

    def one(port, nbytes, delay):
        try:
            time.sleep(delay)
            s = socket.create_connection((a.dst, port))
            s.sendall(b"\x5a" * nbytes)
            s.close()
        except OSError as e:
            errors.append("port %d: %s" % (port, e))

    threads = []
    for spec in a.bulk:
        port, nbytes, delay = spec.split(":")
        th = threading.Thread(target=one,
                              args=(int(port), int(nbytes), float(delay)))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    for e in errors:
        print("%s: %s" % (PROG, e), file=sys.stderr)
    return 1 if errors else 0


def cmd_recv(a):
    sel = selectors.DefaultSelector()
    for p in a.port:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", p))
        ls.listen(1)
        sel.register(ls, selectors.EVENT_READ, ("listen", p))
    with open(a.ready, "w") as f:
        f.write("ready\n")
    log = []
    t0 = time.monotonic()
    open_conns, closed = 0, 0
    deadline = t0 + a.timeout
    while closed < len(a.port) and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            kind, port = key.data
            if kind == "listen":
                c, _ = key.fileobj.accept()
                sel.unregister(key.fileobj)
                key.fileobj.close()
                sel.register(c, selectors.EVENT_READ, ("conn", port))
                open_conns += 1
                continue
            data = key.fileobj.recv(1 << 16)
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                closed += 1
                continue
            log.append((round(time.monotonic() - t0, 4), port, len(data)))
    with open(a.out, "w") as f:
        json.dump(log, f)
    if closed < len(a.port):
        print("%s: recv: %d of %d connections done before the timeout"
              % (PROG, closed, len(a.port)), file=sys.stderr)
        return 1
    return 0


def cmd_check(a):
    with open(a.rec) as f:
        log = json.load(f)
    tot = {}
    for _, p, n in log:
        tot[p] = tot.get(p, 0) + n
    u = [i for i, e in enumerate(log) if e[1] == a.urgent]
    if not u:
        print("# no data from port %d" % a.urgent)
        return 1
    first, last = u[0], u[-1]
    # Bytes of the bulk port that arrived while the urgent port's data was
    # arriving, and bulk bytes still to come when the urgent data was done.
    during = sum(e[2] for e in log[first:last + 1] if e[1] == a.bulk)
    after = sum(e[2] for e in log[last + 1:] if e[1] == a.bulk)
    res = {"bytes": tot, "urgent_first_s": log[first][0],
           "urgent_done_s": log[last][0],
           "bulk_during_urgent": during, "bulk_after_urgent": after,
           "bulk_during_per_urgent_byte": round(during / tot[a.urgent], 3)}
    for k, v in res.items():
        print("# %s %s" % (k, v))
    if a.expect == "overtake":
        # The urgent transfer got (almost) the whole link and finished while
        # much of the bulk data was still queued.
        ok = (res["bulk_during_per_urgent_byte"] <= a.max_share and
              after >= a.min_after)
    else:
        # Control: no priority, the bulk flow keeps its share.
        ok = res["bulk_during_per_urgent_byte"] > a.max_share
    if a.classes:
        ok &= check_classes(a.classes, a.expect_class, a.max_ratio)
    return 0 if ok else 1


def check_classes(path, expect, max_ratio):
    """`tc -s class show` of the mercury qdisc in path: each expected
    TAG:BYTES class sent between BYTES and BYTES * max_ratio, and no other
    class sent anything."""
    want = {}
    for e in expect:
        tag, nbytes = e.split(":")
        want[int(tag)] = int(nbytes)
    sent = {minor: b for minor, (b, _) in class_sent(path).items()}
    ok = True
    for tag in sorted(set(want) | set(sent)):
        b, lo = sent.get(tag, 0), want.get(tag, 0)
        good = lo <= b <= lo * max_ratio
        print("# class 0x%x: sent %d bytes, payload %d%s"
              % (tag, b, lo, "" if good else " (WRONG)"))
        ok &= good
    return ok


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--bulk", action="append", required=True,
                   help="PORT:BYTES:DELAY")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, action="append", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--ready", required=True)
    r.add_argument("--timeout", type=float, default=60)
    c = sub.add_parser("check")
    c.add_argument("--rec", required=True)
    c.add_argument("--urgent", type=int, required=True)
    c.add_argument("--bulk", type=int, required=True)
    c.add_argument("--expect", choices=("overtake", "share"), required=True)
    c.add_argument("--max-share", type=float, default=0.25,
                   help="bulk bytes per urgent byte while urgent arrives")
    c.add_argument("--min-after", type=int, default=100000,
                   help="bulk bytes that must arrive after the urgent data")
    c.add_argument("--classes", metavar="FILE",
                   help="also check `tc -s class show` output in FILE")
    c.add_argument("--expect-class", action="append", default=[],
                   help="TAG:PAYLOAD_BYTES, the only classes with bytes")
    c.add_argument("--max-ratio", type=float, default=1.25,
                   help="class bytes per payload byte at most")
    a = ap.parse_args()
    try:
        return {"send": cmd_send, "recv": cmd_recv, "check": cmd_check}[a.cmd](a)
    except (OSError, ValueError, KeyError) as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
