# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Tests of the Python bindings; prints TAP (ok N - name / not ok N - name)."""
import ctypes
import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mercury  # noqa: E402

PROFILES = os.path.abspath(os.path.join(HERE, "..", "..", "..", "profiles"))
RESNET = os.path.join(PROFILES, "h200", "resnet50.json")


def tcp_pair():
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(4)
    c = socket.create_connection(l.getsockname())
    a, _ = l.accept()
    l.close()
    return c, a


def so(sock, opt):
    return sock.getsockopt(socket.SOL_SOCKET, opt)


class TestTagger(unittest.TestCase):
    def test_priority_lands(self):
        c, a = tcp_pair()
        with mercury.Tagger(source="priority") as t:
            for tag in range(7):
                t.tag(c, tag)
                self.assertEqual(so(c, socket.SO_PRIORITY), tag)
                self.assertEqual(t.get(c), tag)
            t.tag(c, 6)
            self.assertEqual(t.stats, {"calls": 8, "syscalls": 7})
        c.close()
        a.close()

    def test_value_and_range(self):
        t = mercury.Tagger(shift=8, mask=0xff)
        self.assertEqual(t.value(3), 0x300)
        with self.assertRaises(mercury.MercuryError) as cm:
            t.value(256)
        self.assertEqual(cm.exception.errno, errno.ERANGE)
        self.assertIn("does not fit mask 0xff", str(cm.exception))
        with self.assertRaises(ValueError):
            mercury.Tagger(source="tos")

    def test_dscp_lands(self):
        c, a = tcp_pair()
        with mercury.Tagger(source="dscp") as t:
            self.assertEqual(t.value(5), 5 << 2)
            for tag in (1, 7, 63):
                t.tag(c, tag)
                tos = c.getsockopt(socket.IPPROTO_IP, socket.IP_TOS)
                self.assertEqual(tos & 0xfc, tag << 2)
                self.assertEqual(t.get(c), tag)
            with self.assertRaises(mercury.MercuryError) as cm:
                t.tag(c, 64)
            self.assertEqual(cm.exception.errno, errno.ERANGE)
        c.close()
        a.close()

    @unittest.skipUnless(os.geteuid() == 0, "SO_MARK needs root")
    def test_mark_lands(self):
        c, a = tcp_pair()
        t = mercury.Tagger(source="mark", shift=4, mask=0xf)
        t.tag(c, 9)
        self.assertEqual(so(c, socket.SO_MARK), 0x90)
        c.close()
        a.close()

    def test_unprivileged_error(self):
        # A child without capabilities gets EPERM and the reason.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                t = mercury.Tagger(source="priority")
                t.probe(6)
                try:
                    t.probe(7)
                    out = "no error"
                except mercury.MercuryError as e:
                    out = "%d %s" % (e.errno, e.strerror)
            except BaseException as e:  # report, never run the parent's tests
                out = "crash %r" % e
            os.write(w, out.encode())
            os._exit(0)
        os.close(w)
        out = os.read(r, 4096).decode()
        os.close(r)
        os.waitpid(pid, 0)
        self.assertTrue(out.startswith("%d " % errno.EPERM), out)
        self.assertIn("SO_PRIORITY 7 needs CAP_NET_ADMIN", out)

    def test_env(self):
        os.environ.update(MERCURY_TAG_SOURCE="priority", MERCURY_SHIFT="1",
                          MERCURY_MASK="3")
        try:
            t = mercury.Tagger(from_env=True)
            self.assertEqual(t.value(3), 6)
        finally:
            for k in ("MERCURY_TAG_SOURCE", "MERCURY_SHIFT", "MERCURY_MASK"):
                del os.environ[k]

    def test_log_callback(self):
        seen = []
        mercury.set_log(lambda lvl, msg: seen.append(msg))
        try:
            with self.assertRaises(mercury.MercuryError):
                mercury.Tagger(mask=1).value(2)
        finally:
            mercury.set_log(None)
        self.assertEqual(seen, ["tag 2 does not fit mask 0x1"])


class TestPlan(unittest.TestCase):
    def test_loads_and_lookup(self):
        p = mercury.Plan.loads(json.dumps({
            "model": "x", "priorities": [
                {"tensor": "a.weight", "tag": 2, "bytes": 40},
                {"tensor": "b.weight", "tag": 1, "bytes": 8,
                 "src": "gpu0", "dst": "ps0"}]}))
        self.assertEqual(len(p), 2)
        self.assertEqual(p["a.weight"], 2)
        self.assertEqual(p.get("nope", 0), 0)
        self.assertNotIn("nope", p)
        with self.assertRaises(KeyError):
            p["nope"]
        self.assertEqual(list(p.entries())[1],
                         ("b.weight", 1, 8, "gpu0", "ps0"))

    def test_malformed(self):
        for text, err, msg in [
                ("{", errno.EINVAL, "truncated"),
                ('{"priorities": [{"tensor": "a", "tag": 0}]}', errno.ERANGE,
                 "tag 0 outside"),
                ('{"priorities": [{"tensor": "a", "tag": "1"}]}',
                 errno.EINVAL, '"tag" must be an integer')]:
            with self.assertRaises(mercury.MercuryError) as cm:
                mercury.Plan.loads(text)
            self.assertEqual(cm.exception.errno, err)
            self.assertIn(msg, cm.exception.strerror)
        with self.assertRaises(mercury.MercuryError) as cm:
            mercury.Plan.load("/nonexistent.json")
        self.assertEqual(cm.exception.errno, errno.ENOENT)

    def test_profile_and_save(self):
        p = mercury.Plan.from_profile(RESNET)
        with open(RESNET) as f:
            prof = json.load(f)
        self.assertEqual(len(p), len(prof["grad_ready"]))
        self.assertEqual(sorted(p[n] for n in p),
                         list(range(1, len(p) + 1)))
        # The forward pass's first module is the most urgent, fc the least.
        self.assertEqual(p["conv1.weight"], 1)
        self.assertEqual(p["fc.weight"], len(p))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.json")
            p.save(path)
            q = mercury.Plan.load(path)
            self.assertEqual(list(q.entries()), list(p.entries()))
        m = mercury.Plan.from_profile(RESNET, levels=8)
        self.assertEqual(m.max_tag, 8)

    def test_load_levels(self):
        full = mercury.Plan.from_profile(RESNET)
        want = mercury.Plan.from_profile(RESNET, levels=8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.json")
            full.save(path)
            # wider than the limit: refused with the reason...
            with self.assertRaises(mercury.MercuryError) as cm:
                mercury.Plan.load(path, levels=8)
            self.assertEqual(cm.exception.errno, errno.ERANGE)
            self.assertIn("tags go up to 161, more than the 8 levels",
                          cm.exception.strerror)
            # ...or squeezed, in the same order as squeezing the profile
            p = mercury.Plan.load(path, levels=8, squeeze=True)
        self.assertEqual(p.max_tag, 8)
        self.assertEqual(p.info["levels"], 8)
        self.assertEqual(p.info["format"], 1)
        self.assertEqual([e[0] for e in p.entries()],
                         [e[0] for e in full.entries()])
        self.assertEqual([p[n] for n in p], [want[n] for n in p])

    def test_mask_erasing_every_tag_is_refused(self):
        # under these masks tags 1..8 all read back as 0: nothing tagged
        for mask in (0xf0, 0x100, 0xffff0000):
            text = json.dumps({"mercury_plan": 1, "levels": 8, "mask": mask,
                               "priorities": [{"tensor": "a", "tag": 8}]})
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "plan.json")
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaises(mercury.MercuryError) as cm:
                    mercury.Plan.load(path)
            self.assertEqual(cm.exception.errno, errno.ERANGE)
            self.assertIn("8 levels do not fit mask %#x" % mask,
                          cm.exception.strerror)
            self.assertNotIn("\n", cm.exception.strerror)

    def test_wire_tag(self):
        # tags that fit go as they are; a wider plan is squeezed by rank
        p = mercury.Plan.build([("a", 1), ("b", 5), ("c", 100)])
        self.assertEqual([p.wire_tag(n) for n in "abc"], [1, 5, 100])
        p = mercury.Plan.build([("a", 1), ("b", 5), ("c", 100)], levels=8)
        self.assertEqual([p.wire_tag(n) for n in "abc"], [1, 2, 3])
        with self.assertRaises(KeyError):
            p.wire_tag("d")

    def test_build_and_format(self):
        b = mercury.Plan.build([("a", 1, 40, "gpu0", "ps0"), ("b", 2),
                                ("c", 9, 8)], levels=2, source="priority")
        self.assertEqual([b[n] for n in "abc"], [1, 1, 2])
        q = mercury.Plan.loads(self._text(b))
        self.assertEqual(q.info, {"format": 1, "levels": 2, "max_tag": 2,
                                  "tag_source": "priority", "shift": 0,
                                  "mask": 0xffff})
        self.assertEqual(list(q.entries())[0], ("a", 1, 40, "gpu0", "ps0"))
        # an old solver plan (no version key) is format 0
        old = mercury.Plan.loads('{"priorities": [{"tensor": "a", "tag": 3}]}')
        self.assertEqual(old.info["format"], 0)
        self.assertEqual(old.info["levels"], 3)
        with self.assertRaises(mercury.MercuryError) as cm:
            mercury.Plan.loads('{"mercury_plan": 9, "priorities": []}')
        self.assertEqual(cm.exception.errno, errno.EPROTONOSUPPORT)
        with self.assertRaises(KeyError) as cm:
            q["missing.weight"]

    @staticmethod
    def _text(plan):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.json")
            plan.save(path)
            with open(path) as f:
                return f.read()


class TestChannels(unittest.TestCase):
    def test_frame(self):
        h = mercury.frame_encode(7, 3, 100, 40, 60)
        self.assertEqual(len(h), mercury.FRAME_HDR_LEN)
        self.assertEqual(h[:4], b"MRCY")
        self.assertEqual(mercury.frame_decode(h), {
            "tensor_id": 7, "tag": 3, "total_len": 100, "offset": 40,
            "chunk_len": 60})
        with self.assertRaises(mercury.MercuryError) as cm:
            mercury.frame_decode(b"X" + h[1:])
        self.assertEqual(cm.exception.errno, errno.EBADMSG)

    def test_pick_never_behind_less_urgent(self):
        pairs = [socket.socketpair() for _ in range(2)]
        cs = mercury.ChannelSet([p[0] for p in pairs], no_tag=True,
                                outq=mercury.OUTQ_MANUAL)
        i = cs.pick(5)
        cs.commit(i, 5, 1000)
        self.assertEqual(cs.queued(i), (1000, 5))
        self.assertNotEqual(cs.pick(2), i)
        # 7 would fit behind 5, but tagging i for 7 would re-tag (demote)
        # the tag-5 bytes still there: the other connection
        self.assertEqual(cs.try_pick(7), 1 - i)
        self.assertEqual(cs.try_pick(5), i)
        cs.commit(1 - i, 2, 10)
        # both connections hold another tag's bytes
        self.assertIsNone(cs.try_pick(7))
        self.assertIn(cs.pick(7), (0, 1))    # the old call still answers
        with self.assertRaises(mercury.MercuryError) as cm:
            cs.send(1, 7, b"x" * 100)
        self.assertEqual(cm.exception.errno, errno.EAGAIN)
        self.assertEqual(cs.stats["waits"], 1)
        self.assertEqual(cs.stats["chunks"], 0)
        cs.drained(i, 1000)
        self.assertEqual(cs.queued(i), (0, 0))
        self.assertEqual(cs.try_pick(7), i)
        cs.close()
        for a, b in pairs:
            a.close()
            b.close()

    def test_qdisc_check(self):
        # No mercury qdisc on loopback: a note, never an error, even in
        # strict mode; "off" does not look at all.
        seen = []
        mercury.set_log(lambda lvl, msg: seen.append((lvl, msg)))
        c, a = tcp_pair()
        try:
            for mode in ("warn", "strict"):
                del seen[:]
                cs = mercury.ChannelSet([c], source="priority",
                                        qdisc_check=mode)
                cs.close()
                self.assertIn((1, "chanset: no mercury qdisc on lo: its "
                               "tags are not checked (the qdisc may sit on "
                               "another host or namespace)"), seen, mode)
            del seen[:]
            mercury.ChannelSet([c], source="priority",
                               qdisc_check="off").close()
            self.assertEqual(seen, [])
        finally:
            mercury.set_log(None)
            c.close()
            a.close()
        with self.assertRaises(ValueError):
            mercury.ChannelSet([], qdisc_check="loud")

    def test_send_receive(self):
        l = socket.socket()
        l.bind(("127.0.0.1", 0))
        l.listen(4)
        port = l.getsockname()[1]
        cs = mercury.ChannelSet.connect("127.0.0.1", port, 2,
                                        source="priority", chunk_size=4096)
        conns = [l.accept()[0] for _ in range(2)]
        rx = mercury.Receiver(conns)
        tensors = {i: os.urandom(10000 + i) for i in range(6)}
        got = {}

        def recv():
            try:
                while True:
                    rx.poll(5000)
                    for tid, tag, data in rx:
                        got[tid] = (tag, data)
            except mercury.MercuryError as e:
                if e.errno != errno.ENOTCONN:
                    raise

        th = threading.Thread(target=recv)
        th.start()
        for tid, data in tensors.items():
            # bytes, bytearray and memoryview all work, no copies needed
            buf = [data, bytearray(data), memoryview(data)][tid % 3]
            cs.send(tid, 6 - tid, buf)
        self.assertEqual(cs.stats["bytes"], sum(map(len, tensors.values())))
        for i in range(len(cs)):
            with socket.socket(fileno=os.dup(cs.fileno(i))) as s:
                self.assertIn(so(s, socket.SO_PRIORITY), range(1, 7))
        cs.close()
        th.join(10)
        self.assertEqual(got, {t: (6 - t, d) for t, d in tensors.items()})
        for c in conns:
            c.close()
        l.close()

    def test_receiver_poll_rotates(self):
        # every connection holds a whole tensor (a stall): the one that
        # completes first rotates instead of always being connection 0
        pairs = [socket.socketpair() for _ in range(3)]
        rx = mercury.Receiver([p[1] for p in pairs])
        for batch in range(4):
            for i, (a, _) in enumerate(pairs):
                tid = 10 * batch + i
                a.sendall(mercury.frame_encode(tid, 1, 4, 0, 4) + b"abcd")
            self.assertEqual(rx.poll(1000), 3)
            self.assertEqual([t[0] for t in rx],
                             [10 * batch + (batch + k) % 3 for k in range(3)])
        rx.close()
        for a, b in pairs:
            a.close()
            b.close()

    def test_receiver_feed(self):
        rx = mercury.Receiver()
        rx.add()
        data = b"0123456789"
        stream = (mercury.frame_encode(1, 2, 10, 5, 5) + data[5:] +
                  mercury.frame_encode(1, 2, 10, 0, 5) + data[:5])
        done = sum(rx.feed(0, stream[i:i + 3])
                   for i in range(0, len(stream), 3))
        self.assertEqual(done, 1)
        self.assertEqual(rx.next(), (1, 2, data))
        self.assertIsNone(rx.next())


# Every ctypes mirror in the bindings and the mercury.h struct it mirrors.
MIRRORS = {
    "_TagOpts": "mercury_tag_opts",
    "_TaggerStats": "mercury_tagger_stats",
    "_PlanEntry": "mercury_plan_entry",
    "_PlanOpts": "mercury_plan_opts",
    "_PlanLoadOpts": "mercury_plan_load_opts",
    "_PlanInfo": "mercury_plan_info",
    "_Frame": "mercury_frame",
    "_ChansetOpts": "mercury_chanset_opts",
    "_ChansetStats": "mercury_chanset_stats",
    "_RxOpts": "mercury_rx_opts",
    "_Tensor": "mercury_tensor",
}
INCLUDE = os.path.join(HERE, "..", "..", "lib", "include")


class TestLayout(unittest.TestCase):
    """The ctypes mirrors have the C header's sizeof, and each field its
    offsetof and size, as the compiler lays them out."""

    def c_layout(self, mirrors):
        lines = ["#include <stdio.h>", "#include <mercury/mercury.h>",
                 "int main(void)", "{"]
        for py, cls in sorted(mirrors.items()):
            st = "struct " + MIRRORS[py]
            lines.append('\tprintf("%s %%zu\\n", sizeof(%s));' % (py, st))
            for name, _ in cls._fields_:
                lines.append('\tprintf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), '
                             'sizeof(((%s *)0)->%s));'
                             % (py, name, st, name, st, name))
        lines += ["\treturn 0;", "}"]
        cc = os.environ.get("CC", "cc")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run([cc, "-std=gnu11", "-I", INCLUDE, "-o", exe,
                                src], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "%s failed: %s" % (cc, r.stderr))
            out = subprocess.run([exe], capture_output=True, text=True,
                                 check=True).stdout
        return {k: tuple(map(int, v)) for k, *v in
                (line.split() for line in out.splitlines())}

    def test_mirrors_match_header(self):
        mirrors = {n: c for n, c in vars(mercury).items()
                   if isinstance(c, type) and issubclass(c, ctypes.Structure)}
        self.assertEqual(sorted(mirrors), sorted(MIRRORS),
                         "a ctypes mirror missing from MIRRORS (or gone)")
        c = self.c_layout(mirrors)
        bad = []
        for py, cls in sorted(mirrors.items()):
            if ctypes.sizeof(cls) != c[py][0]:
                bad.append("%s: %d bytes, struct %s has %d" % (
                    py, ctypes.sizeof(cls), MIRRORS[py], c[py][0]))
            for name, _ in cls._fields_:
                field = getattr(cls, name)
                if (field.offset, field.size) != c[py + "." + name]:
                    bad.append("%s.%s: offset %d size %d, C %d %d" % (
                        py, name, field.offset, field.size,
                        *c[py + "." + name]))
        self.assertEqual(bad, [])


class TapResult(unittest.TextTestResult):
    """unittest result that prints one TAP line per test."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.n = 0

    def _line(self, ok, test, extra=""):
        self.n += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", self.n,
                                test.id().split(".", 1)[1], extra))
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(True, test)

    def _why(self, found):
        """The failure's last lines as TAP diagnostics under its "not ok",
        where a log cut to the failing lines still shows them."""
        for line in found[-1][1].rstrip().splitlines()[-12:]:
            print("# " + line)
        sys.stdout.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(False, test)
        self._why(self.failures)

    def addError(self, test, err):
        super().addError(test, err)
        self._line(False, test)
        self._why(self.errors)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(True, test, " # SKIP " + reason)


def run_tap(module):
    """Run every test of module, one TAP line each; exit 1 on a failure."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    print("1..%d" % suite.countTestCases())
    runner = unittest.TextTestRunner(resultclass=TapResult, verbosity=0,
                                     stream=sys.stderr)
    res = runner.run(suite)
    sys.exit(0 if res.wasSuccessful() else 1)


if __name__ == "__main__":
    run_tap(sys.modules[__name__])
