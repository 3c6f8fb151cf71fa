"""A multipart part's body filled straight into the caller's buffer from the request's body
(``RequestBody``: aiohttp's stream, then the socket), each byte searched once there for the
closing delimiter, never copied on the way.

aiohttp's ``BodyPartReader.read_chunk`` copies every byte several times (the stream's pieces
joined to the size asked, then joined again with the previous chunk to search the seam), which
made the multipart reader most of an upload's cost on the event loop. Once the delimiter is
found, what follows it goes back to the stream (``RequestBody.put_back``) and the part is marked
read, so ``MultipartReader.next`` goes on exactly as after ``read_chunk``. A part that announces
its own ``Content-Length``, or an aiohttp outside the tested releases, is read with
``read_chunk``.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Callable
from typing import Any

from aiohttp import BadContentDispositionHeader, BadContentDispositionParam, BodyPartReader

from service.api._aiohttp import names
from service.api._aiohttp.request_body import RequestBody


def ignore_disposition_warnings() -> None:
    """Never show aiohttp's warnings of a ``Content-Disposition`` it can't parse: their message
    is the client's header, which is not for the log (a warning becomes a log line), and is the
    client's doing. Done once, as this module is imported."""
    warnings.filterwarnings("ignore", category=BadContentDispositionHeader)
    warnings.filterwarnings("ignore", category=BadContentDispositionParam)


ignore_disposition_warnings()


class BodyCutOff(ValueError):
    """The request's body ended inside a part: before its delimiter."""


class PartBody:
    """The body of ``part`` as a source of bytes (``fill``), from ``body``. ``BodyCutOff`` when
    the request's body ends before the part's delimiter."""

    def __init__(self, part: BodyPartReader, body: RequestBody) -> None:
        self._part = part
        self._body = body
        self._ended = part.at_eof()
        self._fast = names.FAST_PATHS and part._length is None
        self._delimiter = b"\r\n" + part._boundary
        # The bytes last filled that may begin the delimiter: filled again at the front of the
        # next fill, and handed on only once what follows shows they don't. They begin as the
        # CRLF that ended the part's headers, put back as aiohttp's reader does: a part that is
        # empty may have no line of its own, the delimiter following its headers at once.
        self._held = b"\r\n"
        self._skip = len(self._held)  # of the held bytes, how many are not the part's
        self._over = b""  # on aiohttp's own path: read beyond the last fill's room

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        """Write the part's next bytes into ``buffer[start:end]``, which has room for more than
        twice the delimiter (the blob store gives ``FILL_ROOM``); how many, 0 once the part has
        ended."""
        if self._ended:
            return 0
        if not self._fast:
            # aiohttp's reader may return more than asked (the bytes it held back while looking
            # for the delimiter): what does not fit waits for the next fill.
            data = self._over or await self._part.read_chunk(end - start)
            taken = data[: end - start]
            self._over = data[len(taken) :]
            buffer[start : start + len(taken)] = taken
            self._ended = not taken
            return len(taken)
        delimiter, held, skip = self._delimiter, self._held, self._skip
        keep = len(delimiter) - 1  # a tail that may be the start of the delimiter
        stop = start + len(held)
        buffer[start:stop] = held
        searched = start
        while True:
            if stop >= end:  # never with room for two delimiters
                raise ValueError("no room left to read the part into")
            count = await self._body.fill(buffer, stop, end)
            if not count:
                raise BodyCutOff("the body ended inside a part")
            stop += count
            found = find(buffer, delimiter, searched, stop)
            if found >= 0:
                body_end = max(found, start + skip)
                break
            body_end = stop - keep
            if body_end > start + skip:  # something to hand on: all but the tail
                self._held = bytes(buffer[body_end:stop])
                self._skip = 0
                break
            searched = max(start, stop - keep)  # too little yet: read on into the same space
        length = body_end - start - skip
        if skip and length:  # the put-back CRLF is no byte of the part's: move over it
            buffer[start : start + length] = buffer[start + skip : body_end]
        if found >= 0:
            self._ended = True
            await self._body.put_back(bytes(buffer[found + 2 : stop]))  # from the boundary on
            self._part._at_eof = True
        return length


def _libc_memmem() -> Callable[..., int | None] | None:
    """The C library's ``memmem``, None where there is none."""
    try:
        memmem = ctypes.CDLL(None).memmem
    except (OSError, AttributeError):
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return memmem


_memmem = _libc_memmem()


def find(buffer: Any, needle: bytes, start: int, end: int) -> int:
    """Where ``needle`` first is in ``buffer[start:end]`` (an index into ``buffer``), or -1.
    glibc's ``memmem`` searches random bytes faster than Python's ``bytes.find`` (figures in
    docs/performance.md) and runs without the GIL, so the threads hashing and writing go on
    meanwhile; a buffer it can't take (read-only) is searched with ``find``."""
    if _memmem is None or end - start < len(needle):
        return int(buffer.find(needle, start, end))
    try:
        held = ctypes.c_char.from_buffer(buffer)  # its address, the buffer kept while held
    except TypeError:
        return int(buffer.find(needle, start, end))
    try:
        base = ctypes.addressof(held)
        at = _memmem(base + start, end - start, needle, len(needle))
    finally:
        del held
    return -1 if at is None else at - base
