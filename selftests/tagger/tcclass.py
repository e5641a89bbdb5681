# SPDX-License-Identifier: GPL-2.0
"""Read the per-level counters of a mercury qdisc from saved
`tc -s class show` output (iproute2 6.1 prints classes as text only)."""


def class_sent(path):
    """{class minor: (bytes, packets)} for every mercury class in path;
    the untagged class is minor 0xffff."""
    sent = {}
    cur = None
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 3 and w[0] == "class" and w[1] == "mercury":
                cur = int(w[2].split(":")[1], 16)
            elif cur is not None and w[:1] == ["Sent"]:
                sent[cur] = (int(w[1]), int(w[3]))
                cur = None
    return sent
