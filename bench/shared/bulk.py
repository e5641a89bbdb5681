#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The background bulk transfer of make bench-shared (a checkpoint
upload): one untagged TCP connection (DSCP 0) that sends for as long as
it runs, and a receiver that counts the bytes it gets in fixed windows.

    bulk.py recv --bind ADDR --port P -o FILE [--window 5]
    bulk.py send --to ADDR:P
    bulk.py echo --bind ADDR --port P -o FILE.ready
    bulk.py rtt --to ADDR:P [--count 50]

recv listens, writes FILE.ready, accepts one connection and appends to
FILE one line "START END BYTES" (epoch seconds) per window once the
window is over: window k is [t0 + k*W, t0 + (k+1)*W), t0 the moment the
connection was accepted. A window in which nothing arrived is written
with 0 bytes (a starved transfer shows as zeros, not as a gap). The open
window is dropped at the end (SIGTERM or the sender closing): only
whole windows are written. send writes zeros until SIGTERM and prints
the bytes it sent.

Scenario 2 (the shallow buffer) sizes it from the link's round trip:
echo answers every byte of one connection with that byte; rtt sends
COUNT single bytes one at a time (TCP_NODELAY), each after the previous
answer, and prints "rtt_ms min MIN median MED max MAX n COUNT" (the
minimum is the idle link's round trip, host and guest wake-ups
included). Standard library only.
"""
import argparse
import os
import signal
import socket
import statistics
import sys
import time

WINDOW = 5.0


class Windows:
    """Bytes per window of width seconds from t0: add(t, n) counts n bytes
    received at t in the window holding t; closed holds every window
    that has ended, as (start, end, bytes), in order, empty ones
    included. Time must not go backwards."""

    def __init__(self, t0, width=WINDOW):
        if width <= 0:
            raise ValueError("window width must be > 0")
        self.t0, self.width = t0, width
        self.index = 0          # the open window
        self.bytes = 0          # its bytes so far
        self.closed = []

    def advance(self, t):
        """Close every window that ended by t; return the ones closed now."""
        k = int((t - self.t0) // self.width)
        new = []
        while self.index < k:
            s = self.t0 + self.index * self.width
            new.append((s, s + self.width, self.bytes))
            self.bytes = 0
            self.index += 1
        self.closed.extend(new)
        return new

    def add(self, t, n):
        new = self.advance(t)
        self.bytes += n
        return new


def recv(a):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(1)
    with open(a.output + ".ready", "w") as f:
        f.write("%d\n" % os.getpid())
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ls.settimeout(0.25)
    conn = None
    while conn is None and not stop:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            pass
    if conn is None:
        return 0
    w = Windows(time.time(), a.window)
    conn.settimeout(0.25)
    buf = bytearray(1 << 18)
    with open(a.output, "w") as out:
        while not stop:
            eof = False
            try:
                n = conn.recv_into(buf)
                eof = n == 0            # the sender closed
            except socket.timeout:
                n = 0
            except InterruptedError:
                continue
            except OSError:
                break
            for s, e, b in w.add(time.time(), n):
                out.write("%.3f %.3f %d\n" % (s, e, b))
                out.flush()
            if eof:
                break
        for s, e, b in w.advance(time.time()):
            out.write("%.3f %.3f %d\n" % (s, e, b))
    conn.close()
    return 0


def connect(to, stop=()):
    """A connection to HOST:PORT, retried for 30 s (the receiver may
    not listen yet) or until stop is non-empty; None, said, if none."""
    host, port = to.rsplit(":", 1)
    deadline = time.time() + 30
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            if time.time() > deadline or stop:
                print("bulk.py: cannot connect to %s" % to, file=sys.stderr)
                return None
            time.sleep(0.2)


def send(a):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    s = connect(a.to, stop)
    if s is None:
        return 1
    s.settimeout(None)
    # untagged, as a checkpoint upload is: DSCP 0
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0)
    buf = bytes(1 << 20)
    sent = 0
    while not stop:
        try:
            sent += s.send(buf)
        except InterruptedError:
            continue
        except OSError:
            break
    s.close()
    print("bulk.py: sent %d bytes" % sent)
    return 0


def echo(a):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(1)
    with open(a.ready, "w") as f:
        f.write("%d\n" % os.getpid())
    ls.settimeout(30)
    try:
        conn, _ = ls.accept()
    except socket.timeout:
        return 1
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(30)
    while True:
        try:
            b = conn.recv(1)
        except OSError:
            break
        if not b:
            break
        conn.sendall(b)
    conn.close()
    return 0


def rtt_summary(times):
    """"rtt_ms min MIN median MED max MAX n N" of round trips in seconds."""
    ms = [t * 1000 for t in times]
    return "rtt_ms min %.3f median %.3f max %.3f n %d" % (
        min(ms), statistics.median(ms), max(ms), len(ms))


def rtt(a):
    s = connect(a.to)
    if s is None:
        return 1
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    times = []
    for _ in range(a.count):
        t0 = time.perf_counter()
        s.sendall(b"x")
        if s.recv(1) != b"x":
            break
        times.append(time.perf_counter() - t0)
        time.sleep(0.02)
    s.close()
    if not times:
        return 1
    print(rtt_summary(times))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", default="0.0.0.0")
    r.add_argument("--port", type=int, default=5201)
    r.add_argument("--window", type=float, default=WINDOW)
    r.add_argument("-o", "--output", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True, metavar="ADDR:PORT")
    e = sub.add_parser("echo")
    e.add_argument("--bind", default="0.0.0.0")
    e.add_argument("--port", type=int, default=5202)
    e.add_argument("-o", "--ready", required=True)
    t = sub.add_parser("rtt")
    t.add_argument("--to", required=True, metavar="ADDR:PORT")
    t.add_argument("--count", type=int, default=50)
    a = ap.parse_args()
    return {"recv": recv, "send": send, "echo": echo, "rtt": rtt}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
