# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Priority channels: K gloo process groups, each group's sockets tagged.

gloo keeps its sockets to itself, but each new process group opens one
connected TCP socket per peer while new_group() runs and keeps it for the
group's life. So the sockets of group k are the ones that appear in
/proc/self/fd across its new_group(); they are tagged once, with tag k + 1,
and every later collective on the group carries that tag. Each rank then
publishes the local addresses of its sockets in the store, which maps every
socket to the peer rank at its other end: that both checks "one socket per
peer" and lets a failure name the peer whose connection closed.
"""
import datetime
import json
import os
import select
import socket

import torch.distributed as dist

import mercury

from ._errors import MercuryTorchError


def _sockets():
    """{fd: inode link} of this process's sockets."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue    # the fd listdir itself used, already closed
        if link.startswith("socket:"):
            out[int(name)] = link
    return out


def _addr(a):
    return "%s:%d" % (a[0], a[1])


def _tcp_endpoints(fd):
    """(local, peer) "ip:port" of a connected TCP socket fd, else None."""
    s = socket.socket(fileno=fd)
    try:
        if s.type != socket.SOCK_STREAM or s.family not in (
                socket.AF_INET, socket.AF_INET6):
            return None
        try:
            return _addr(s.getsockname()), _addr(s.getpeername())
        except OSError:
            return None     # a listener
    finally:
        s.detach()


class Channel:
    """One priority class: a gloo group and its tagged sockets."""

    def __init__(self, tag, group, peers, serial, links):
        self.tag = tag          # 1 = most urgent
        self.group = group
        self.peers = peers      # {peer rank: fd}
        self.links = links      # {peer rank: "socket:[inode]"}
        self.serial = serial    # of the open_channels() call, for keys
        # Our own duplicates: gloo closes its fd when a peer fails, and
        # ours still tells whether that peer's end is closed.
        self.watch = {r: os.dup(fd) for r, fd in peers.items()}

    def close(self):
        for fd in self.watch.values():
            os.close(fd)
        self.watch = {}

    def dead_peers(self):
        """Ranks whose end of our connection has closed (without reading)."""
        dead = []
        for rank, fd in sorted(self.watch.items()):
            p = select.poll()
            p.register(fd, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            ev = p.poll(0)
            if ev and ev[0][1] & (select.POLLRDHUP | select.POLLHUP |
                                   select.POLLERR):
                dead.append(rank)
        return dead


_serial = [0]


def job_tag(job, count, channel):
    """The tag channel (1..count) of job carries on the wire: the job
    above the channels, job << k | channel, k the bits count takes (7
    channels: jobs 8 apart; 8 channels: 16 apart). Job 0 is the most
    urgent; on one link, every channel of a job goes before any of the
    next job's."""
    return (job << count.bit_length()) | channel


def open_channels(count, tag_source="dscp", shift=0, mask=0, timeout=120.0,
                  from_env=False, control=False, job=0):
    """Create count gloo groups over all ranks; tag group k's sockets
    job_tag(job, count, k + 1). With control, one more group after them,
    tagged as channel 1 (the most urgent) and returned last: small
    collectives that must not pair with the channels' all-reduces.

    Collective: every rank calls it, in the same order as its other
    new_group() calls. Returns (channels, tagger).
    """
    if not dist.is_initialized():
        raise MercuryTorchError("torch.distributed is not initialised: call "
                                "torch.distributed.init_process_group first")
    if dist.get_backend() != "gloo":
        raise MercuryTorchError("mercury.torch needs the gloo backend (its "
                                "sockets can be tagged), not %s"
                                % dist.get_backend())
    if count < 1:
        raise MercuryTorchError("channels must be at least 1, not %d" % count)
    tagger = mercury.Tagger(source=tag_source, shift=shift, mask=mask,
                            from_env=from_env)
    top = job_tag(job, count, count)
    try:
        tagger.probe(top)   # a clear EPERM or ERANGE before any group exists
    except mercury.MercuryError as e:
        raise MercuryTorchError("cannot tag %d channels%s with %s: %s"
                                % (count, " of job %d (tags up to %d)"
                                   % (job, top) if job else "",
                                   tag_source, e)) from None
    rank, world = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    _serial[0] += 1
    prefix = "mercury.torch/%d" % _serial[0]
    td = datetime.timedelta(seconds=timeout)
    channels = []
    for k in range(count + bool(control)):
        tag = k + 1 if k < count else 1
        name = "channel %d" % tag if k < count else "the control channel"
        before = _sockets()
        group = dist.new_group(timeout=td)
        # A connection attempt that gloo gave up on (a retry on a busy
        # machine) may still be open when new_group() returns; after a
        # collective on the group, only the connections it uses remain.
        dist.barrier(group=group)
        mid = _sockets()
        dist.barrier(group=group)
        after = {fd: link for fd, link in _sockets().items()
                 if mid.get(fd) == link}
        mine = {}
        for fd, link in after.items():
            if before.get(fd) == link:
                continue
            ends = _tcp_endpoints(fd)
            if ends:
                mine[fd] = ends
        store.set("%s/%d/%d" % (prefix, k, rank),
                  json.dumps(sorted(e[0] for e in mine.values())))
        owner = {}
        for r in range(world):
            if r == rank:
                continue
            for a in json.loads(store.get("%s/%d/%d" % (prefix, k, r))):
                owner[a] = r
        links = {fd: after[fd] for fd in mine}
        peers = {}
        for fd, (local, peer) in mine.items():
            r = owner.get(peer)
            if r is None:
                continue    # not a gloo connection of this group
            if r in peers:
                raise MercuryTorchError(
                    "%s: two sockets to rank %d (fds %d, %d); "
                    "expected one per peer" % (name, r, peers[r], fd))
            peers[r] = fd
        missing = sorted(set(range(world)) - {rank} - set(peers))
        if missing:
            raise MercuryTorchError(
                "%s: no socket to rank(s) %s appeared during "
                "new_group(); cannot tag this group" % (name, missing))
        for fd in peers.values():
            try:
                tagger.tag(fd, job_tag(job, count, tag))
            except mercury.MercuryError as e:
                raise MercuryTorchError("%s: tagging fd %d: %s"
                                        % (name, fd, e)) from None
        channels.append(Channel(tag, group, peers, _serial[0],
                                {r: links[fd] for r, fd in peers.items()}))
    return channels, tagger
