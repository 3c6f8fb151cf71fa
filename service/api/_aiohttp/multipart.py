"""A multipart part's body read straight from the request's stream: each piece the connection
delivered, searched once for the closing delimiter and handed on as a view, never copied.

aiohttp's ``BodyPartReader.read_chunk`` copies every byte several times (the stream's pieces
joined to the size asked, then joined again with the previous chunk to search the seam), which
made the multipart reader most of an upload's cost on the event loop. Once the delimiter is
found, what follows it goes back to the stream and the part is marked read, so
``MultipartReader.next`` goes on exactly as after ``read_chunk``. A part that announces its own
``Content-Length``, or an aiohttp outside the tested releases, is read with ``read_chunk``.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator

from aiohttp import BodyPartReader

from service.api._aiohttp import names


async def part_body(part: BodyPartReader, chunk_size: int) -> AsyncIterator[bytes | memoryview]:
    """The bytes of ``part``'s body, in pieces of any size (``chunk_size`` at most where
    aiohttp's own reader is used). ``ValueError`` when the body ends before its delimiter."""
    if not names.FAST_PATHS or part._length is not None or part.at_eof():
        while data := await part.read_chunk(chunk_size):
            yield data
        return
    content = part._content
    delimiter = b"\r\n" + part._boundary
    keep = len(delimiter) - 1  # a piece's tail that may be the start of the delimiter
    # Bytes read but not yet handed on, no delimiter starting before their end. They begin with
    # the CRLF that ended the part's headers, put back as aiohttp's reader does: a part that
    # is empty may have no line of its own, the delimiter following its headers at once.
    held = b"\r\n"
    put_back = len(held)

    def body_of(view: bytes | memoryview) -> bytes | memoryview:
        nonlocal put_back
        if put_back:
            cut = min(put_back, len(view))
            put_back -= cut
            view = view[cut:]
        return view

    while True:
        # Everything the connection has delivered: taking it all lets the connection read on
        # at once (it stops at twice its read-ahead), which is worth joining a few pieces.
        more = await content.readany()
        if not more:
            raise ValueError("the body ended inside a part")
        if len(more) < keep:  # a piece too small to hold a seam of its own: rare, merged
            held += more
            found = held.find(delimiter)
            if found >= 0:
                break
            if data := body_of(held[:-keep]):  # empty while held is no longer than keep
                yield data
            held = held[-keep:]
            continue
        found = (held + more[:keep]).find(delimiter)  # a delimiter across the seam
        if found >= 0:
            held += more
            break
        if data := body_of(held):  # no delimiter starts in it: all of it is the body's
            yield data
        found = more.find(delimiter)
        if found >= 0:
            held = more
            break
        yield memoryview(more)[:-keep]
        held = more[-keep:]
    if data := body_of(memoryview(held)[:found]):
        yield data
    _give_back(content, held[found + 2 :])  # from the boundary on, for MultipartReader.next
    part._at_eof = True


def _give_back(content: object, rest: bytes) -> None:
    if rest:
        with warnings.catch_warnings():  # deprecated for applications; aiohttp's reader uses it
            warnings.simplefilter("ignore", DeprecationWarning)
            content.unread_data(rest)  # type: ignore[attr-defined]
