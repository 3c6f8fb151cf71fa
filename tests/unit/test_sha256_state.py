"""The resumable SHA-256 (``service.domain.sha256_state``): the same digests as hashlib for any
split of the input and any kind of buffer, and a state saved in one process taken up in another;
a state from elsewhere is refused rather than trusted."""

from __future__ import annotations

import hashlib
import mmap
import os

import pytest

from service.domain import sha256_state
from service.domain.sha256_state import ResumableSha256

pytestmark = pytest.mark.skipif(
    not sha256_state.available(), reason="this Python's OpenSSL has no SHA256_CTX functions"
)


@pytest.mark.parametrize("cut", [0, 1, 63, 64, 65, 1000, 4095])
def test_any_split_gives_hashlibs_digest(cut: int) -> None:
    data = os.urandom(4096)
    first = ResumableSha256()
    first.update(data[:cut])
    second = ResumableSha256.restore(first.save())
    assert second is not None
    second.update(bytearray(data[cut:]))
    assert second.hexdigest() == hashlib.sha256(data).hexdigest()
    assert first.copy().hexdigest() == hashlib.sha256(data[:cut]).hexdigest()


def test_buffers_of_every_kind_are_hashed_in_place() -> None:
    mapped = mmap.mmap(-1, 8192)
    mapped[:] = os.urandom(8192)
    running = ResumableSha256()
    running.update(memoryview(mapped)[100:5000])
    running.update(memoryview(b"read-only bytes")[5:])
    running.update(b"")
    expected = hashlib.sha256(mapped[100:5000] + b"only bytes").hexdigest()
    assert running.hexdigest() == expected
    assert running.hexdigest() == expected  # reading the digest leaves it running


def test_a_saved_state_is_only_its_bytes() -> None:
    """What another process gets is the saved bytes: a hash taken up from a copy of them, the
    original gone, goes on as the original would have."""
    running = ResumableSha256()
    running.update(b"first half, ")
    saved = bytes(bytearray(running.save()))
    del running
    taken_up = ResumableSha256.restore(saved)
    assert taken_up is not None
    taken_up.update(b"second half")
    assert taken_up.hexdigest() == hashlib.sha256(b"first half, second half").hexdigest()


def test_a_state_from_elsewhere_is_refused() -> None:
    saved = ResumableSha256().save()
    assert ResumableSha256.restore(saved[:-1]) is None
    assert ResumableSha256.restore(b"sha256-ctx/other/112/" + saved[-112:]) is None
    assert ResumableSha256.restore(b"") is None
