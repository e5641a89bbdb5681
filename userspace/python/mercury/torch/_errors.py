# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Exceptions of mercury.torch."""


class MercuryTorchError(RuntimeError):
    """Misuse or misconfiguration (a clear message, raised at once)."""


class PeerError(MercuryTorchError):
    """A peer rank died or stalled; .ranks names the ones to blame."""

    def __init__(self, msg, ranks=()):
        super().__init__(msg)
        self.ranks = list(ranks)
