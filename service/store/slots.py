"""Redis Cluster's key slots, as Redis computes them: which keys one script may touch together."""

from __future__ import annotations

import binascii

SLOTS = 16384


def key_slot(key: bytes) -> int:
    """The cluster slot of ``key``: CRC16 (XMODEM, as Redis) of its hash tag, the part between
    the first ``{`` and the first ``}`` after it when that is not empty, else of the whole key."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return binascii.crc_hqx(key, 0) % SLOTS
