#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""mercury-ps, and a program under mercury-run, against peers that
misbehave; TAP on stdout.

Each mercury-ps case puts a fake peer on loopback in place of the real
server (for a worker) or of a real worker (for a server): one that closes
at once, one that stalls, one that sends garbage, and one that sends the
start of a frame and then resets the connection. The tool under test must
exit non-zero within its --timeout (plus slack for a loaded, sanitized
run), never by a signal or a sanitizer report, and say which peer failed.

Each mercury-run case runs a plain program (tests/probe talk: read a
greeting, send a 1 MiB request, read a reply) against a fake server, once
alone and once under mercury-run and its LD_PRELOAD shim: a server that
is not there, closes at once, stalls, sends garbage or resets mid-reply,
and one that behaves. Under the shim the program must end within its
timeout and see exactly what it sees alone (the shim must not turn an
error into a hang or a crash, nor hide it), and the shim must have tagged
its connection.

    faults.py --ps PATH/mercury-ps --profile tiny.json
    faults.py --run PATH/mercury-run --probe PATH/tests/probe \
              [--asan-runtime PATH/libasan.so.N]
    faults.py --py-lib PATH/libmercury.so.0 --py-path userspace/python \
              [--asan-runtime PATH/libasan.so.N]

The Python cases run libmercury's binding over the (sanitized) library:
a ChannelSet whose receiver closes, stalls, sends garbage or resets, and
a Receiver whose sender does; each must end within the timeout, exit 1
with the library's error naming the peer's address (a stalled sender:
poll() returns, and the program gives up on its own).
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


def garbage():
    """4 KB of random bytes, the same each run."""
    r = random.Random(1)
    return bytes(r.getrandbits(8) for _ in range(4096))


GARBAGE = garbage()


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
            c.sendall(GARBAGE)
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


def run(argv, env=None):
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
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


def fake_server(handler, rcvbuf=None):
    """Listen on 127.0.0.1 and run handler(conn, stop) on each connection,
    in a thread of its own. Returns the port and a function that stops it."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf:
        # before listen(): accepted sockets inherit it, window scale too
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    stop = threading.Event()

    def serve():
        ls.settimeout(0.5)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=handler, args=(c, stop),
                             daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    def finish():
        stop.set()
        t.join()
        ls.close()

    return ls.getsockname()[1], finish


def fake_client(port, mode):
    """Connect to 127.0.0.1:port once it listens (retrying for SLACK
    seconds), then misbehave (behave()), in a thread of its own. Returns
    a dict that gets the client's own port ("port") once connected, and
    a function that stops it."""
    stop = threading.Event()
    holder = {}

    def fake():
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

    def finish():
        stop.set()
        t.join()

    return holder, finish


def worker_case(a, mode):
    """A worker whose server misbehaves."""
    port, finish = fake_server(lambda c, stop: behave(c, mode, stop))
    rc, text, took, hung = run([a.ps, "worker", "--worker-id", "0", "--servers",
                                "127.0.0.1:%d" % port, "--workers", "1",
                                "--profile", a.profile, "--scheme", a.scheme,
                                "--timeout", str(TIMEOUT)])
    finish()
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
    # connects once the server listens, then misbehaves
    holder, finish = fake_client(port, mode)
    rc, text, took, hung = run(srv)
    finish()
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

# probe talk's protocol (tests/probe.c)
GREETING = b"hello\n"
REQUEST = 1 << 20
REPLY = b"done\n"

# what the program sees of each server, shim or no shim
talk_desc = {
    "refuse": ("is not there", "connect: Connection refused"),
    "close": ("closes at once", "greeting: end of stream after 0 of 6 bytes"),
    "stall": ("greets, then never reads", "request: timed out"),
    "garbage": ("sends garbage for a reply", "reply: garbage: " +
                " ".join("%02x" % b for b in GARBAGE[:len(REPLY)])),
    "reset": ("resets mid-reply",
              "reply: Connection reset by peer after 2 of 5 bytes"),
    "good": ("behaves", "done"),
}


def talk_peer(c, mode, stop):
    """The server side of probe talk, or one of its misbehaviours."""
    try:
        if mode in ("close", "stall"):
            if mode == "stall":
                c.sendall(GREETING)
            behave(c, mode, stop)
            return
        c.sendall(GREETING)
        left = REQUEST
        while left > 0:
            b = c.recv(min(left, 65536))
            if not b:
                return
            left -= len(b)
        if mode == "garbage":
            behave(c, mode, stop)
        elif mode == "reset":
            c.sendall(REPLY[:2])
            rst(c)
        else:
            c.sendall(REPLY)
            c.close()
    except OSError:
        pass


def run_case(a, mode):
    """probe talk against a fake server, alone and under mercury-run."""
    if mode == "refuse":
        port, finish = free_port(), lambda: None
    else:
        # a small window, so that a server that stops reading blocks
        # the 1 MiB request whatever the host's tcp_rmem
        port, finish = fake_server(lambda c, stop: talk_peer(c, mode, stop),
                                   rcvbuf=65536)
    probe = [a.probe, "talk", str(port), str(TIMEOUT)]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    alone = run(probe, env)
    if a.asan_runtime:
        # the launcher keeps it first, where ASan must be
        env["LD_PRELOAD"] = a.asan_runtime
    shim = run([a.run, "-v", "-s", "priority", "-r", "port=%d:tag=3" % port,
                "--"] + probe, env)
    finish()

    what, want = talk_desc[mode]
    what = "server that %s" % what
    rc, text, took, hung = shim
    # the shim's own lines (-v) apart, its output must be the program's
    seen = "".join(l for l in text.splitlines(True)
                   if not l.startswith("mercury-preload: "))
    why = "alone: exit %s after %.1f s:\n%s\nunder mercury-run: exit %s " \
          "after %.1f s:\n%s" % (alone[0], alone[2], alone[1], rc, took, text)
    print("# %s: alone: %s after %.1f s; under mercury-run: %s after %.1f s"
          % (what, alone[1].strip().splitlines()[-1:], alone[2],
             seen.strip().splitlines()[-1:], took))
    tap(not hung and not alone[3], "%s: ends within its timeout" % what, why)
    tap(alone[1] == want + "\n" and seen == alone[1] and rc == alone[0] and
        rc == (0 if mode == "good" else 1),
        "%s: the program sees \"%s\", as without the shim" % (what, want),
        why)
    tap(re.search(r"^mercury-preload: connect: fd \d+ port %d tag 3$" % port,
                  text, re.M) is not None and
        not re.search(r"Sanitizer|runtime error", text),
        "%s: the shim tagged the connection, no sanitizer report" % what, why)


# libmercury's Python binding (userspace/python/mercury) over the
# sanitized library: a child python3 per case, so that a crash or a
# sanitizer report ends the child, not this script.
PY_CHILD = r"""
import socket, sys, time
sys.path.insert(0, sys.argv[1])
import mercury
role, port, timeout = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
try:
    if role == "send":
        cs = mercury.ChannelSet.connect("127.0.0.1", port, 2,
                                        source="priority", qdisc_check="off",
                                        timeout_ms=int(timeout * 1000))
        for i in range(32):
            cs.send(i, 1 + i % 2, b"\x5a" * (1 << 20))
        cs.close()
    else:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(1)
        ls.settimeout(timeout + 30)
        c, _ = ls.accept()
        rx = mercury.Receiver([c])
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rx.poll(100)
            for t in rx:
                print("tensor %d" % t[0])
        print("error: nothing but silence for %.0f s" % timeout)
        sys.exit(1)
except mercury.MercuryError as e:
    print("error: %s" % e)
    sys.exit(1)
print("done")
"""

py_desc = {
    "close": "closes at once",
    "stall": "stalls",
    "garbage": "sends garbage",
    "reset": "resets mid-frame",
}


def py_case(a, role, mode):
    """A ChannelSet (send) whose receiver, or a Receiver (recv) whose
    sender, misbehaves. The error must name the peer's address; a
    receiver's stalled peer makes no error in the library (poll returns
    0), so there the child's own timeout ends it."""
    env = dict(os.environ, MERCURY_LIB=a.py_lib,
               ASAN_OPTIONS="exitcode=%d:detect_leaks=0" % SANITIZER_EXIT)
    if a.asan_runtime:
        env["LD_PRELOAD"] = a.asan_runtime
    if role == "send":
        port, finish = fake_server(lambda c, st: behave(c, mode, st),
                                   rcvbuf=65536)
        peer = r"127\.0\.0\.1:%d" % port
    else:
        port = free_port()
        holder, finish = fake_client(port, mode)
        peer = None
    rc, text, took, hung = run([sys.executable, "-c", PY_CHILD, a.py_path,
                                role, str(port), str(TIMEOUT)], env)
    finish()
    if peer is None:
        peer = r"127\.0\.0\.1:%d" % holder.get("port", -1)
    what = "python %s, %s that %s" % (
        "ChannelSet" if role == "send" else "Receiver",
        "receiver" if role == "send" else "sender", py_desc[mode])
    if role == "recv" and mode == "stall":
        print("# %s: exit %s after %.1f s: %s" % (what, rc, took,
                                                 text.strip().splitlines()[-1:]))
        why = "exit %s after %.1f s:\n%s" % (rc, took, text)
        tap(not hung, "%s: ends within its timeout" % what, why)
        tap(rc == 1 and "nothing but silence" in text,
            "%s: poll() keeps returning, no signal, no sanitizer report" % what,
            why)
        return
    judge(what, rc, text, took, hung, peer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps")
    ap.add_argument("--profile")
    ap.add_argument("--scheme", default="mercury")
    ap.add_argument("--run", help="mercury-run")
    ap.add_argument("--probe", help="its tests/probe")
    ap.add_argument("--asan-runtime",
                    help="preloaded for a sanitized shim or library "
                    "(ASan comes first)")
    ap.add_argument("--py-lib", help="libmercury.so.0 for the Python cases")
    ap.add_argument("--py-path", help="userspace/python, the mercury module")
    a = ap.parse_args()
    if (not (a.ps and a.profile) and not (a.run and a.probe) and
            not (a.py_lib and a.py_path)):
        ap.error("give --ps and --profile, --run and --probe, or --py-lib "
                 "and --py-path")
    for tool in (a.ps, a.run, a.probe):
        if tool and not os.access(tool, os.X_OK):
            print("not ok 1 %s is not built" % tool)
            return 1
    if a.ps:
        for mode in desc:
            worker_case(a, mode)
            server_case(a, mode)
    if a.run:
        for mode in talk_desc:
            run_case(a, mode)
    if a.py_lib:
        for role in ("send", "recv"):
            for mode in py_desc:
                py_case(a, role, mode)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
