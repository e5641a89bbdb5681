# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Python bindings for libmercury (ctypes; nothing to compile).

Tag sockets with a tensor's layer priority, send tensors over priority
channels, reassemble them, and look tags up in priority plans::

    import mercury
    plan = mercury.Plan.from_profile("profiles/h200/resnet50.json")
    tagger = mercury.Tagger(source="priority")
    tagger.tag(sock, plan["conv1.weight"])

The shared library is found through $MERCURY_LIB, then ../lib next to this
package in the source tree, then the system loader (libmercury.so.0).
Errors raise MercuryError (an OSError with the errno and libmercury's
reason).
"""
import ctypes
import ctypes.util
import errno
import os

__all__ = [
    "MercuryError", "Tagger", "Plan", "ChannelSet", "Receiver",
    "frame_encode", "frame_decode", "set_log", "version",
    "TAG_MARK", "TAG_PRIORITY", "TAG_DSCP", "OUTQ_KERNEL", "OUTQ_MANUAL",
    "FRAME_HDR_LEN", "MAX_TAG",
]

TAG_MARK, TAG_PRIORITY, TAG_DSCP = 0, 1, 2
# enum mercury_qdisc_check by name (ChannelSet's qdisc_check)
_QDISC_CHECKS = {"warn": 0, "off": 1, "strict": 2}
OUTQ_KERNEL, OUTQ_MANUAL = 0, 1
PLAN_PER_TENSOR, PLAN_PER_MODULE = 0, 1
FRAME_HDR_LEN = 32
MAX_TAG = 65535

_c = ctypes


def _load():
    cands = []
    env = os.environ.get("MERCURY_LIB")
    if env:
        cands.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    cands.append(os.path.join(here, "..", "..", "lib", "libmercury.so.0"))
    cands.append("libmercury.so.0")
    found = ctypes.util.find_library("mercury")
    if found:
        cands.append(found)
    errors = []
    for c in cands:
        try:
            return _c.CDLL(c, use_errno=True)
        except OSError as e:
            errors.append("%s: %s" % (c, e))
    raise ImportError("mercury: cannot load libmercury.so.0 (set MERCURY_LIB): "
                      + "; ".join(errors))


_lib = _load()


class MercuryError(OSError):
    """A libmercury call failed: errno plus the library's one-line reason."""


def _check(ret):
    if ret < 0:
        msg = _lib.mercury_last_error().decode(errors="replace")
        raise MercuryError(-ret, msg or os.strerror(-ret))
    return ret


# ---- structs (must match include/mercury/mercury.h) -------------------------
# tests/test_mercury.py's TestLayout compiles the header and holds every
# mirror below to its sizeof and field offsets.

class _TagOpts(_c.Structure):
    _fields_ = [("sz", _c.c_size_t), ("source", _c.c_int),
                ("shift", _c.c_uint), ("mask", _c.c_uint32),
                ("keep_other_bits", _c.c_bool)]


class _TaggerStats(_c.Structure):
    _fields_ = [("calls", _c.c_uint64), ("syscalls", _c.c_uint64)]


class _PlanEntry(_c.Structure):
    _fields_ = [("tensor", _c.c_char_p), ("tag", _c.c_uint),
                ("bytes", _c.c_uint64), ("src", _c.c_char_p),
                ("dst", _c.c_char_p)]


class _PlanOpts(_c.Structure):
    _fields_ = [("sz", _c.c_size_t), ("group", _c.c_int),
                ("levels", _c.c_uint)]


class _PlanLoadOpts(_c.Structure):
    _fields_ = [("sz", _c.c_size_t), ("levels", _c.c_uint),
                ("squeeze", _c.c_bool)]


class _PlanInfo(_c.Structure):
    _fields_ = [("format", _c.c_uint), ("levels", _c.c_uint),
                ("max_tag", _c.c_uint), ("source", _c.c_int),
                ("shift", _c.c_uint), ("mask", _c.c_uint32)]


class _Frame(_c.Structure):
    _fields_ = [("tensor_id", _c.c_uint32), ("tag", _c.c_uint16),
                ("total_len", _c.c_uint64), ("offset", _c.c_uint64),
                ("chunk_len", _c.c_uint32)]


class _ChansetOpts(_c.Structure):
    _fields_ = [("sz", _c.c_size_t), ("tag_opts", _c.POINTER(_TagOpts)),
                ("classes", _c.POINTER(_c.c_uint)),
                ("chunk_size", _c.c_size_t), ("outq", _c.c_int),
                ("own_fds", _c.c_bool), ("no_tag", _c.c_bool),
                ("timeout_ms", _c.c_int), ("inflight", _c.c_uint64),
                ("qdisc_check", _c.c_int)]


class _ChansetStats(_c.Structure):
    _fields_ = [("chunks", _c.c_uint64), ("bytes", _c.c_uint64),
                ("inversions", _c.c_uint64), ("tag_syscalls", _c.c_uint64),
                ("waits", _c.c_uint64), ("wait_ns", _c.c_uint64),
                ("placed", _c.c_uint64), ("picks", _c.c_uint64),
                ("queries", _c.c_uint64), ("cap_blocks", _c.c_uint64),
                ("eagain_blocks", _c.c_uint64), ("wire_bytes", _c.c_uint64)]


# dest and frame_done stay NULL here: Receiver hands out whole tensors.
class _RxOpts(_c.Structure):
    _fields_ = [("sz", _c.c_size_t), ("max_tensor_bytes", _c.c_uint64),
                ("max_pending", _c.c_size_t),
                ("max_pending_bytes", _c.c_uint64),
                ("dest", _c.c_void_p), ("frame_done", _c.c_void_p),
                ("ctx", _c.c_void_p)]


class _Tensor(_c.Structure):
    _fields_ = [("id", _c.c_uint32), ("tag", _c.c_uint16),
                ("len", _c.c_uint64), ("data", _c.c_void_p)]


def _opts(cls, **kw):
    o = cls(**kw)
    o.sz = _c.sizeof(cls)
    return o


_P = _c.c_void_p
_LOG_FN = _c.CFUNCTYPE(None, _c.c_int, _c.c_char_p, _c.c_void_p)
_protos = {
    "mercury_version": (_c.c_char_p, []),
    "mercury_last_error": (_c.c_char_p, []),
    "mercury_set_log": (None, [_LOG_FN, _P]),
    "mercury_tagger_new": (_c.c_int, [_c.POINTER(_TagOpts), _c.POINTER(_P)]),
    "mercury_tagger_free": (None, [_P]),
    "mercury_tag_opts_from_env": (_c.c_int, [_c.POINTER(_TagOpts)]),
    "mercury_tagger_value": (_c.c_int, [_P, _c.c_uint,
                                        _c.POINTER(_c.c_uint32)]),
    "mercury_tag_socket": (_c.c_int, [_P, _c.c_int, _c.c_uint]),
    "mercury_tagger_forget": (None, [_P, _c.c_int]),
    "mercury_socket_tag": (_c.c_int, [_P, _c.c_int]),
    "mercury_tagger_probe": (_c.c_int, [_P, _c.c_uint]),
    "mercury_tagger_get_stats": (_c.c_int, [_P, _c.POINTER(_TaggerStats),
                                            _c.c_size_t]),
    "mercury_plan_load": (_c.c_int, [_c.c_char_p, _c.POINTER(_P)]),
    "mercury_plan_load_opts": (_c.c_int, [_c.c_char_p,
                                          _c.POINTER(_PlanLoadOpts),
                                          _c.POINTER(_P)]),
    "mercury_plan_load_buf_opts": (_c.c_int, [_c.c_char_p, _c.c_size_t,
                                              _c.POINTER(_PlanLoadOpts),
                                              _c.POINTER(_P)]),
    "mercury_plan_new": (_c.c_int, [_c.POINTER(_P)]),
    "mercury_plan_add": (_c.c_int, [_P, _c.POINTER(_PlanEntry)]),
    "mercury_plan_set_levels": (_c.c_int, [_P, _c.c_uint]),
    "mercury_plan_set_tag_opts": (_c.c_int, [_P, _c.POINTER(_TagOpts)]),
    "mercury_plan_get_info": (_c.c_int, [_P, _c.POINTER(_PlanInfo),
                                         _c.c_size_t]),
    "mercury_plan_load_buf": (_c.c_int, [_c.c_char_p, _c.c_size_t,
                                         _c.POINTER(_P)]),
    "mercury_plan_from_profile": (_c.c_int, [_c.c_char_p,
                                             _c.POINTER(_PlanOpts),
                                             _c.POINTER(_P)]),
    "mercury_plan_free": (None, [_P]),
    "mercury_plan_save": (_c.c_int, [_P, _c.c_char_p]),
    "mercury_plan_lookup": (_c.c_int, [_P, _c.c_char_p]),
    "mercury_plan_wire_tag": (_c.c_int, [_P, _c.c_char_p,
                                         _c.POINTER(_c.c_uint32)]),
    "mercury_plan_size": (_c.c_size_t, [_P]),
    "mercury_plan_max_tag": (_c.c_uint, [_P]),
    "mercury_plan_entry": (_c.c_int, [_P, _c.c_size_t,
                                      _c.POINTER(_PlanEntry)]),
    "mercury_frame_encode": (_c.c_int, [_c.POINTER(_Frame), _c.c_char_p,
                                        _c.c_size_t]),
    "mercury_frame_decode": (_c.c_int, [_c.c_char_p, _c.c_size_t,
                                        _c.POINTER(_Frame)]),
    "mercury_chanset_new": (_c.c_int, [_c.POINTER(_c.c_int), _c.c_size_t,
                                       _c.POINTER(_ChansetOpts),
                                       _c.POINTER(_P)]),
    "mercury_chanset_connect": (_c.c_int, [_c.c_char_p, _c.c_char_p,
                                           _c.c_size_t,
                                           _c.POINTER(_ChansetOpts),
                                           _c.POINTER(_P)]),
    "mercury_chanset_free": (None, [_P]),
    "mercury_chanset_count": (_c.c_size_t, [_P]),
    "mercury_chanset_fd": (_c.c_int, [_P, _c.c_size_t]),
    "mercury_chanset_pick": (_c.c_int, [_P, _c.c_uint]),
    "mercury_chanset_try_pick": (_c.c_int, [_P, _c.c_uint]),
    "mercury_chanset_commit": (_c.c_int, [_P, _c.c_size_t, _c.c_uint,
                                          _c.c_uint64]),
    "mercury_chanset_drained": (_c.c_int, [_P, _c.c_size_t, _c.c_uint64]),
    "mercury_chanset_queued": (_c.c_int, [_P, _c.c_size_t,
                                          _c.POINTER(_c.c_uint64),
                                          _c.POINTER(_c.c_uint)]),
    "mercury_chanset_send": (_c.c_int, [_P, _c.c_uint32, _c.c_uint, _P,
                                        _c.c_uint64]),
    "mercury_chanset_get_stats": (_c.c_int, [_P, _c.POINTER(_ChansetStats),
                                             _c.c_size_t]),
    "mercury_rx_new": (_c.c_int, [_c.POINTER(_RxOpts), _c.POINTER(_P)]),
    "mercury_rx_free": (None, [_P]),
    "mercury_rx_add": (_c.c_int, [_P, _c.c_int]),
    "mercury_rx_feed": (_c.c_int, [_P, _c.c_size_t, _c.c_char_p,
                                   _c.c_size_t]),
    "mercury_rx_read": (_c.c_int, [_P, _c.c_size_t]),
    "mercury_rx_poll": (_c.c_int, [_P, _c.c_int]),
    "mercury_rx_next": (_c.c_int, [_P, _c.POINTER(_Tensor)]),
    "mercury_tensor_release": (None, [_c.POINTER(_Tensor)]),
}
for _name, (_res, _args) in _protos.items():
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def version():
    return _lib.mercury_version().decode()


_log_keep = None


def set_log(fn):
    """Route libmercury's messages to fn(level, msg); None silences them."""
    global _log_keep
    if fn is None:
        _log_keep = None
        _lib.mercury_set_log(_LOG_FN(), None)
        return
    _log_keep = _LOG_FN(lambda lvl, msg, ctx: fn(lvl, msg.decode(
        errors="replace")))
    _lib.mercury_set_log(_log_keep, None)


def _fd(sock):
    return sock if isinstance(sock, int) else sock.fileno()


# enum mercury_tag_source by value, as tools and plan files name it
_SOURCE_NAMES = ("mark", "priority", "dscp")


def _source(source):
    if source in _SOURCE_NAMES:
        return _SOURCE_NAMES.index(source)
    if source in (TAG_MARK, TAG_PRIORITY, TAG_DSCP):
        return source
    raise ValueError("source must be 'mark', 'priority' or 'dscp', not %r"
                     % (source,))


def _tag_opts(source="mark", shift=0, mask=0, keep_other_bits=False,
              from_env=False):
    o = _opts(_TagOpts, source=_source(source), shift=shift, mask=mask,
              keep_other_bits=keep_other_bits)
    if from_env:
        _check(_lib.mercury_tag_opts_from_env(_c.byref(o)))
    return o


class Tagger:
    """Writes (tag & mask) << shift to SO_MARK or SO_PRIORITY of sockets,
    or with source="dscp" to their DSCP field (IP_TOS / IPV6_TCLASS byte =
    value << 2; mask defaults to 0x3f; no privilege needed).

    tag() remembers the value last written per fd and skips the system
    call when it does not change; call forget(fd) when a socket closes.
    """

    def __init__(self, source="mark", shift=0, mask=0, keep_other_bits=False,
                 from_env=False):
        self._opts = _tag_opts(source, shift, mask, keep_other_bits, from_env)
        self._t = _P()
        _check(_lib.mercury_tagger_new(_c.byref(self._opts),
                                       _c.byref(self._t)))

    def close(self):
        if getattr(self, "_t", None):
            _lib.mercury_tagger_free(self._t)
            self._t = _P()

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tag(self, sock, tag):
        _check(_lib.mercury_tag_socket(self._t, _fd(sock), tag))

    def forget(self, sock):
        _lib.mercury_tagger_forget(self._t, _fd(sock))

    def get(self, sock):
        """The tag the socket carries now (read back with getsockopt)."""
        return _check(_lib.mercury_socket_tag(self._t, _fd(sock)))

    def value(self, tag):
        v = _c.c_uint32()
        _check(_lib.mercury_tagger_value(self._t, tag, _c.byref(v)))
        return v.value

    def probe(self, tag):
        """Raise MercuryError (EPERM) if this process may not set tag."""
        _check(_lib.mercury_tagger_probe(self._t, tag))

    @property
    def stats(self):
        s = _TaggerStats()
        _check(_lib.mercury_tagger_get_stats(self._t, _c.byref(s),
                                             _c.sizeof(s)))
        return {"calls": s.calls, "syscalls": s.syscalls}




class Plan:
    """Tensor name -> tag (1 = most urgent), O(1) lookups."""

    def __init__(self, handle):
        self._p = handle

    @classmethod
    def load(cls, path, levels=0, squeeze=False):
        """A plan file (any format libmercury reads). levels=N: at most N
        levels, a wider plan raises MercuryError(ERANGE) unless
        squeeze=True squeezes it into 1..N keeping the order (use the
        qdisc's levels, or the connections of a ChannelSet)."""
        o = _opts(_PlanLoadOpts, levels=levels, squeeze=squeeze)
        p = _P()
        _check(_lib.mercury_plan_load_opts(os.fsencode(path), _c.byref(o),
                                           _c.byref(p)))
        return cls(p)

    @classmethod
    def loads(cls, text, levels=0, squeeze=False):
        b = text.encode() if isinstance(text, str) else bytes(text)
        o = _opts(_PlanLoadOpts, levels=levels, squeeze=squeeze)
        p = _P()
        _check(_lib.mercury_plan_load_buf_opts(b, len(b), _c.byref(o),
                                               _c.byref(p)))
        return cls(p)

    @classmethod
    def build(cls, entries, levels=0, source="mark", shift=0, mask=0):
        """A plan from (tensor, tag[, bytes[, src[, dst]]]) tuples in
        order; levels=N squeezes it into 1..N. Save it with save()."""
        p = _P()
        _check(_lib.mercury_plan_new(_c.byref(p)))
        plan = cls(p)
        for t in entries:
            t = tuple(t) + (0, "", "")[len(t) - 2:]
            e = _PlanEntry(tensor=t[0].encode(), tag=t[1], bytes=t[2],
                           src=t[3].encode(), dst=t[4].encode())
            _check(_lib.mercury_plan_add(p, _c.byref(e)))
        o = _opts(_TagOpts, source=_source(source),
                  shift=shift, mask=mask)
        _check(_lib.mercury_plan_set_tag_opts(p, _c.byref(o)))
        if levels:
            _check(_lib.mercury_plan_set_levels(p, levels))
        return plan

    @property
    def info(self):
        """format, levels, max_tag and the tag settings the plan records
        (format 0 plans: the tagger's defaults)."""
        i = _PlanInfo()
        _check(_lib.mercury_plan_get_info(self._p, _c.byref(i),
                                          _c.sizeof(i)))
        return {"format": i.format, "levels": i.levels,
                "max_tag": i.max_tag,
                "tag_source": _SOURCE_NAMES[i.source]
                if 0 <= i.source < len(_SOURCE_NAMES) else i.source,
                "shift": i.shift, "mask": i.mask}

    @classmethod
    def from_profile(cls, path, per_module=False, levels=0):
        """Default plan from an h200 profile. levels=N squeezes the tags
        into 1..N keeping their order; for a ChannelSet of N connections
        use levels=N (at most 6 for unprivileged SO_PRIORITY)."""
        o = _opts(_PlanOpts, group=PLAN_PER_MODULE if per_module
                  else PLAN_PER_TENSOR, levels=levels)
        p = _P()
        _check(_lib.mercury_plan_from_profile(os.fsencode(path), _c.byref(o),
                                              _c.byref(p)))
        return cls(p)

    def close(self):
        if getattr(self, "_p", None):
            _lib.mercury_plan_free(self._p)
            self._p = _P()

    __del__ = close

    def save(self, path):
        _check(_lib.mercury_plan_save(self._p, os.fsencode(path)))

    def __len__(self):
        return _lib.mercury_plan_size(self._p)

    @property
    def max_tag(self):
        return _lib.mercury_plan_max_tag(self._p)

    def get(self, tensor, default=None):
        r = _lib.mercury_plan_lookup(self._p, tensor.encode())
        return default if r < 0 else r

    def __getitem__(self, tensor):
        r = _lib.mercury_plan_lookup(self._p, tensor.encode())
        if r < 0:
            raise KeyError(tensor)
        return r

    def __contains__(self, tensor):
        return self.get(tensor) is not None

    def wire_tag(self, tensor):
        """The tag tensor goes out with: libmercury's tag rule (tags that
        fit the plan's levels as they are, wider plans squeezed by rank
        when loaded or built with levels). KeyError if the plan does not
        name it."""
        r = _lib.mercury_plan_wire_tag(self._p, tensor.encode(), None)
        if r == -errno.ENOENT:
            raise KeyError(tensor)
        return _check(r)

    def entries(self):
        """(tensor, tag, bytes, src, dst) in file order (profiles: by tag)."""
        e = _PlanEntry()
        for i in range(len(self)):
            _check(_lib.mercury_plan_entry(self._p, i, _c.byref(e)))
            yield (e.tensor.decode(), e.tag, e.bytes, e.src.decode(),
                   e.dst.decode())

    def __iter__(self):
        return (e[0] for e in self.entries())


def frame_encode(tensor_id, tag, total_len, offset, chunk_len):
    f = _Frame(tensor_id, tag, total_len, offset, chunk_len)
    buf = _c.create_string_buffer(FRAME_HDR_LEN)
    _check(_lib.mercury_frame_encode(_c.byref(f), buf, FRAME_HDR_LEN))
    return buf.raw


def frame_decode(data):
    """dict of the header fields; raises MercuryError on a bad header."""
    b = bytes(data)
    f = _Frame()
    _check(_lib.mercury_frame_decode(b, len(b), _c.byref(f)))
    return {"tensor_id": f.tensor_id, "tag": f.tag, "total_len": f.total_len,
            "offset": f.offset, "chunk_len": f.chunk_len}


def _buffer(data):
    """(pointer, length, keepalive) for any bytes-like object, no copy if
    it is writable or bytes."""
    if isinstance(data, bytes):
        return _c.cast(_c.c_char_p(data), _P), len(data), data
    mv = memoryview(data).cast("B")
    if mv.readonly:
        b = mv.tobytes()
        return _c.cast(_c.c_char_p(b), _P), len(b), b
    arr = (_c.c_char * len(mv)).from_buffer(mv)
    return _c.cast(arr, _P), len(mv), (arr, mv)


class ChannelSet:
    """Several connections to one peer; each chunk goes where no less
    urgent bytes are queued ahead of it and no unsent bytes of another tag
    would be re-tagged (Linux applies the tag when TCP transmits).

    Use a plan with no more levels than connections:
    Plan.from_profile(path, levels=len(channels)) (at most 6 with
    source="priority"). With more levels than connections, urgent chunks
    find no suitable connection and wait or queue behind less urgent bytes.

    qdisc_check: at creation, compare the tagger (source, shift, mask,
    classes) with the mercury qdiscs on the devices the connections leave
    by. "warn" (default) logs each problem through set_log(), "strict"
    raises MercuryError (EINVAL) naming the first, "off" does not look.
    """

    def __init__(self, socks, source="mark", shift=0, mask=0, classes=None,
                 chunk_size=0, outq=OUTQ_KERNEL, no_tag=False, timeout_ms=0,
                 qdisc_check="warn", _handle=None):
        if qdisc_check not in _QDISC_CHECKS:
            raise ValueError("qdisc_check must be 'warn', 'off' or "
                             "'strict', not %r" % (qdisc_check,))
        self._socks = list(socks)
        self._topts = _tag_opts(source, shift, mask)
        self._classes = None
        if classes is not None:
            self._classes = (_c.c_uint * len(classes))(*classes)
        o = _opts(_ChansetOpts, tag_opts=_c.pointer(self._topts),
                  classes=self._classes, chunk_size=chunk_size, outq=outq,
                  no_tag=no_tag, timeout_ms=timeout_ms,
                  qdisc_check=_QDISC_CHECKS[qdisc_check])
        self._cs = _P()
        if _handle is not None:
            host, port, n = _handle
            _check(_lib.mercury_chanset_connect(host.encode(),
                                                str(port).encode(), n,
                                                _c.byref(o),
                                                _c.byref(self._cs)))
        else:
            fds = (_c.c_int * len(self._socks))(*map(_fd, self._socks))
            _check(_lib.mercury_chanset_new(fds, len(self._socks),
                                            _c.byref(o), _c.byref(self._cs)))

    @classmethod
    def connect(cls, host, port, n, **kw):
        """Open n TCP connections to host:port (closed by close())."""
        return cls([], _handle=(host, port, n), **kw)

    def close(self):
        if getattr(self, "_cs", None):
            _lib.mercury_chanset_free(self._cs)
            self._cs = _P()

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return _lib.mercury_chanset_count(self._cs)

    def fileno(self, i):
        return _check(_lib.mercury_chanset_fd(self._cs, i))

    def send(self, tensor_id, tag, data):
        """Frame and send a whole tensor (any bytes-like object).

        Never re-tags unsent bytes of another tag: if every connection
        holds some, it waits (kernel accounting) or raises MercuryError
        EAGAIN having sent nothing (OUTQ_MANUAL: report drained(), retry).
        """
        ptr, n, keep = _buffer(data)
        _check(_lib.mercury_chanset_send(self._cs, tensor_id, tag, ptr, n))
        del keep

    def send_ptr(self, tensor_id, tag, address, nbytes):
        """Send nbytes at a raw address (e.g. torch's tensor.data_ptr())."""
        _check(_lib.mercury_chanset_send(self._cs, tensor_id, tag,
                                         _P(address), nbytes))

    def pick(self, tag):
        """Connection index for tag; always an index (see try_pick)."""
        return _check(_lib.mercury_chanset_pick(self._cs, tag))

    def try_pick(self, tag):
        """Connection index for tag, or None when every connection holds
        unsent bytes of another tag (tagging any of them would re-tag
        those bytes: Linux applies the tag when TCP transmits)."""
        r = _lib.mercury_chanset_try_pick(self._cs, tag)
        if r == -errno.EAGAIN:
            return None
        return _check(r)

    def commit(self, i, tag, nbytes):
        _check(_lib.mercury_chanset_commit(self._cs, i, tag, nbytes))

    def drained(self, i, nbytes):
        _check(_lib.mercury_chanset_drained(self._cs, i, nbytes))

    def queued(self, i):
        """(bytes still queued on connection i, least urgent tag, 0: none)"""
        b, w = _c.c_uint64(), _c.c_uint()
        _check(_lib.mercury_chanset_queued(self._cs, i, _c.byref(b),
                                           _c.byref(w)))
        return b.value, w.value

    @property
    def stats(self):
        s = _ChansetStats()
        _check(_lib.mercury_chanset_get_stats(self._cs, _c.byref(s),
                                              _c.sizeof(s)))
        return {k: getattr(s, k) for k, _ in s._fields_}


class Receiver:
    """Reassembles framed tensors arriving on several connections."""

    def __init__(self, socks=(), max_tensor_bytes=0, max_pending=0):
        o = _opts(_RxOpts, max_tensor_bytes=max_tensor_bytes,
                  max_pending=max_pending)
        self._rx = _P()
        self._socks = []
        _check(_lib.mercury_rx_new(_c.byref(o), _c.byref(self._rx)))
        for s in socks:
            self.add(s)

    def close(self):
        if getattr(self, "_rx", None):
            _lib.mercury_rx_free(self._rx)
            self._rx = _P()

    __del__ = close

    def add(self, sock=None):
        """Add a connection (None: fed by hand); returns its index."""
        self._socks.append(sock)
        return _check(_lib.mercury_rx_add(self._rx,
                                          -1 if sock is None else _fd(sock)))

    def feed(self, conn, data):
        b = bytes(data)
        return _check(_lib.mercury_rx_feed(self._rx, conn, b, len(b)))

    def read(self, conn):
        return _check(_lib.mercury_rx_read(self._rx, conn))

    def poll(self, timeout_ms=-1):
        """Tensors completed; 0 on timeout; raises ENOTCONN when all closed.

        Reads one piece (<= 64 KiB) per ready connection, round-robin with
        a rotating start. Tensors come out in the order their last byte
        was read: stream order on one connection, read order (not arrival
        order) across connections; see Documentation/tagger.md.
        """
        return _check(_lib.mercury_rx_poll(self._rx, timeout_ms))

    def next(self):
        """(tensor_id, tag, bytes) of the oldest completed tensor, or None."""
        t = _Tensor()
        if _lib.mercury_rx_next(self._rx, _c.byref(t)) < 0:
            return None
        try:
            data = _c.string_at(t.data, t.len) if t.len else b""
        finally:
            _lib.mercury_tensor_release(_c.byref(t))
        return t.id, t.tag, data

    def __iter__(self):
        while True:
            t = self.next()
            if t is None:
                return
            yield t
