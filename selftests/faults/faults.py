#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""mercury-ps against peers that misbehave; TAP on stdout.

Each case puts a fake peer on loopback in place of the real server (for a
worker) or of a real worker (for a server): one that closes at once, one
that stalls, one that sends garbage, and one that sends the start of a
frame and then resets the connection. The tool under test must exit
non-zero within its --timeout (plus slack for a loaded, sanitized run),
never by a signal or a sanitizer report, and say which peer failed.

    faults.py --ps PATH/mercury-ps --profile tiny.json
"""
import argparse
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

TIMEOUT = 3		# the tool's --timeout, seconds
SLACK = 30		# a sanitized binary on a busy 2-core machine
SANITIZER_EXIT = 99	# ASAN_OPTIONS/UBSAN_OPTIONS exitcode (faults.sh)

n = 0
failed = 0


def tap(ok, what, why=""):
    global n, failed
    n += 1
    if not ok:
        failed += 1
        for line in why.splitlines()[-15:]:
            print("# " + line)
    print("%sok %d %s" % ("" if ok else "not ", n, what), flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rst(c):
    """Close with a reset, as a crashed or rebooted host's stack does."""
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def behave(c, mode, stop):
    """What the fake peer does on one connection."""
    try:
        if mode == "close":
            c.close()
        elif mode == "stall":
            # read nothing, write nothing: the window closes, time passes
            stop.wait(TIMEOUT + SLACK + 5)
            c.close()
        elif mode == "garbage":
            r = random.Random(1)
            c.sendall(bytes(r.getrandbits(8) for _ in range(4096)))
            stop.wait(TIMEOUT + SLACK + 5)
            c.close()
        elif mode == "reset":
            # let the peer start talking, then half a frame header and RST
            c.settimeout(2)
            try:
                c.recv(100)
            except OSError:
                pass
            c.sendall(b"\x4d\x52\x43\x01\x00\x00\x00")
            time.sleep(0.2)
            rst(c)
    except OSError:
        pass


def run(argv):
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT + SLACK)
        hung = False
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        hung = True
    return p.returncode, out + err, time.time() - t0, hung


def judge(what, rc, text, took, hung, peer_re):
    why = "exit %s after %.1f s:\n%s" % (rc, took, text)
    print("# %s: exit %s after %.1f s: %s" % (what, rc, took,
                                             text.strip().splitlines()[-1:]))
    tap(not hung, "%s: ends within its timeout" % what, why)
    tap(rc == 1, "%s: exit 1, no signal, no sanitizer report" % what, why)
    tap(re.search(peer_re, text) is not None,
        "%s: the error names the peer" % what, why)


def worker_case(a, mode):
    """A worker whose server misbehaves."""
    port = free_port()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    stop = threading.Event()
    conns = []

    def serve():
        ls.settimeout(0.5)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conns.append(c)
            threading.Thread(target=behave, args=(c, mode, stop),
                             daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    rc, text, took, hung = run([a.ps, "worker", "--worker-id", "0", "--servers",
                                "127.0.0.1:%d" % port, "--workers", "1",
                                "--profile", a.profile, "--scheme", a.scheme,
                                "--timeout", str(TIMEOUT)])
    stop.set()
    ls.close()
    t.join()
    judge("worker, server that %s" % desc[mode], rc, text, took, hung,
          r"127\.0\.0\.1:%d" % port)


def server_case(a, mode):
    """A server one of whose two workers misbehaves (the other is real)."""
    port = free_port()
    common = ["--servers", "127.0.0.1:%d" % port, "--workers", "2",
              "--profile", a.profile, "--scheme", a.scheme,
              "--timeout", str(TIMEOUT)]
    srv = [a.ps, "server", "--server-id", "0"] + common
    good = subprocess.Popen([a.ps, "worker", "--worker-id", "0"] + common,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    holder = {}

    def fake():
        # connect once the server listens, then misbehave
        deadline = time.time() + SLACK
        while time.time() < deadline and not stop.is_set():
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=1)
            except OSError:
                time.sleep(0.1)
                continue
            holder["port"] = c.getsockname()[1]
            behave(c, mode, stop)
            return

    t = threading.Thread(target=fake, daemon=True)
    t.start()
    rc, text, took, hung = run(srv)
    stop.set()
    t.join()
    good.send_signal(signal.SIGKILL)
    good.wait()
    judge("server, worker that %s" % desc[mode], rc, text, took, hung,
          r"127\.0\.0\.1:%d" % holder.get("port", -1))


desc = {
    "close": "closes at once",
    "stall": "stalls",
    "garbage": "sends garbage",
    "reset": "resets mid-frame",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--scheme", default="mercury")
    a = ap.parse_args()
    if not os.access(a.ps, os.X_OK):
        print("not ok 1 %s is not built" % a.ps)
        return 1
    for mode in desc:
        worker_case(a, mode)
        server_case(a, mode)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
