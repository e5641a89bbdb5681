#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Send one backward pass worth of gradients, each tagged by the plan.

The plan comes from a profile (default: ResNet-50 on H200) or the solver's
plan JSON. Tensors are produced in grad_ready order (the order backward
makes them) and handed to a ChannelSet, which tags each chunk and keeps an
urgent tensor from queueing behind less urgent bytes. A receiver thread
reassembles them. Unprivileged by default: SO_PRIORITY with the plan
squeezed into tags 1..6.

    python3 examples/send_by_plan.py [--plan plan.json | --profile P]
                                     [--scale 64] [--conns 3]

In a real training job the same three calls do the work, e.g. inside a
transport's send or a DDP communication hook:
    tag = plan.get(param_name, 0)
    channels.send(tensor_id, tag, grad_buffer)   # any bytes-like object
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mercury  # noqa: E402

DEFAULT_PROFILE = os.path.join(HERE, "..", "..", "..", "profiles", "h200",
                               "resnet50.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default=DEFAULT_PROFILE)
    ap.add_argument("--plan", help="solver plan JSON instead of the profile")
    ap.add_argument("--scale", type=int, default=64,
                    help="divide tensor sizes by this (default 64)")
    ap.add_argument("--conns", type=int, default=3)
    ap.add_argument("--source", choices=("priority", "mark"),
                    default="priority")
    args = ap.parse_args()

    levels = 6 if args.source == "priority" else 0   # 0..6: no privilege
    try:
        if args.plan:
            # a solver plan has one level per tensor (resnet50: 161):
            # squeeze it into what unprivileged SO_PRIORITY can write
            plan = mercury.Plan.load(args.plan, levels=levels,
                                     squeeze=bool(levels))
        else:
            plan = mercury.Plan.from_profile(args.profile, levels=levels)
        with open(args.profile) as f:
            order = [(g["param"], 4 * g["numel"])
                     for g in json.load(f)["grad_ready"]]
    except (OSError, ValueError) as e:
        print("send_by_plan: %s" % e, file=sys.stderr)
        return 1

    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]
    chans = mercury.ChannelSet.connect("127.0.0.1", port, args.conns,
                                       source=args.source)
    peers = [lsock.accept()[0] for _ in range(args.conns)]
    rx = mercury.Receiver(peers)
    done = []

    def receive():
        try:
            while True:
                rx.poll(1000)
                done.extend((tid, tag, len(d)) for tid, tag, d in rx)
        except mercury.MercuryError:
            pass    # ENOTCONN: the sender closed every connection

    th = threading.Thread(target=receive)
    th.start()
    t0 = time.monotonic()
    total = 0
    for tid, (name, nbytes) in enumerate(order):
        n = max(1, nbytes // args.scale)
        chans.send(tid, plan.get(name, 0), bytearray(n))
        total += n
    elapsed = time.monotonic() - t0
    stats = chans.stats
    chans.close()
    th.join()

    print("%d tensors, %.1f MB in %.3f s over %d connections (%s tags)"
          % (len(order), total / 1e6, elapsed, args.conns, args.source))
    print("chunks %(chunks)d, setsockopt calls %(tag_syscalls)d, "
          "chunks forced behind less urgent bytes %(inversions)d" % stats)
    print("tensors that waited for a connection without unsent bytes of "
          "another tag %d (%.3f s)" % (stats["waits"], stats["wait_ns"] / 1e9))
    print("first 5 completed (id, name, tag):")
    for tid, tag, _ in done[:5]:
        print("  %3d %-28s %d" % (tid, order[tid][0], tag))
    return 0 if len(done) == len(order) else 1


if __name__ == "__main__":
    sys.exit(main())
