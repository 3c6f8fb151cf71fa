"""An upload's file part filled into the caller's buffer (``PartBody``) holds exactly the bytes
aiohttp's own reader does, however the connection split the body (a delimiter across two pieces,
pieces of a byte, bytes that begin the delimiter and then differ), and leaves the form where
``MultipartReader.next`` reads the fields after it as before. Run both with the fast reader and
with aiohttp's own (``FAST_PATHS`` off), which must agree."""

from __future__ import annotations

import asyncio
import mmap
import os
from typing import Any

import pytest
from aiohttp import BodyPartReader, MultipartReader
from aiohttp.streams import StreamReader
from multidict import CIMultiDict

from service.api._aiohttp import PartBody, RequestBody, names
from service.api._aiohttp.multipart import find

BOUNDARY = "formBoundary7MA4YWxkTrZu0gW"
DELIMITER = b"\r\n--" + BOUNDARY.encode()
HEADERS = CIMultiDict({"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})

# Bodies around the delimiter: empty, its prefixes, a CR or CRLF at either end, the delimiter
# with its last byte changed, and random bytes holding such near misses.
BODIES = [
    b"",
    b"x",
    b"\r",
    b"\n",
    b"\r\n",
    b"\r\n-",
    b"\r\n--",
    DELIMITER[:-1],
    DELIMITER[:-1] + b"X",
    b"abc" + DELIMITER[:-1] + b"Xdef",
    b"\r\n\r\n\r\n",
    b"ends with CR\r",
    b"x--" + BOUNDARY.encode(),  # the boundary without the CRLF before it is data
    os.urandom(3000),
    # Each prefix is followed by "." (never a delimiter's next byte): random bytes after the
    # longest one would complete the delimiter once in 256 runs, making it no body at all.
    b"".join(os.urandom(97) + DELIMITER[: n % len(DELIMITER)] + b"." for n in range(60)),
]


class _Protocol:
    """What a StreamReader asks of its connection's protocol."""

    _reading_paused = False
    connected = True

    def pause_reading(self, **_: object) -> None:
        pass

    def resume_reading(self, **_: object) -> None:
        pass


class _Request:
    """What ``RequestBody`` reads of a request whose body is fed by hand (never from a socket)."""

    def __init__(self, stream: StreamReader) -> None:
        self.content = stream
        self.protocol = _Protocol()
        self.content_length = None
        self.headers: dict[str, str] = {}


async def drain(part: BodyPartReader, stream: StreamReader, room: int) -> bytes:
    """The part's bytes, filled ``room`` at a time at an offset into a larger buffer (as the blob
    store fills after the bytes it carried over)."""
    source = PartBody(part, RequestBody(_Request(stream), rest_limit=1 << 16))  # type: ignore[arg-type]
    buffer, data = bytearray(room + 10), bytearray()
    while count := await source.fill(buffer, 7, 7 + room):
        data += buffer[7 : 7 + count]
    return bytes(data)


def form(body: bytes, part_headers: str = "") -> bytes:
    opening = (
        f"--{BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="a.bin"\r\n{part_headers}\r\n'
    )
    rest = (
        f"\r\n--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="folder_id"\r\n\r\nroot'
        f"\r\n--{BOUNDARY}--\r\n"
    )
    return opening.encode() + body + rest.encode()


async def read_form(
    pieces: list[bytes], room: int = 256, chunked: bool = False
) -> tuple[bytes, str, Any]:
    """The file part's bytes through ``PartBody``, the next field's text, and what follows;
    ``chunked``: each piece came as a chunk of ``Transfer-Encoding: chunked``."""
    stream = StreamReader(_Protocol(), 2**16, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    feeding = asyncio.create_task(feed(stream, pieces, chunked))
    try:
        reader = MultipartReader(HEADERS, stream)
        part = await reader.next()
        assert isinstance(part, BodyPartReader) and part.name == "file"
        data = await drain(part, stream, room)
        field = await reader.next()
        assert isinstance(field, BodyPartReader) and field.name == "folder_id"
        return data, await field.text(), await reader.next()
    finally:
        await feeding


async def feed(stream: StreamReader, pieces: list[bytes], chunked: bool) -> None:
    """Each piece as the connection would deliver it, the reader running between them (so each
    read finds one piece), then the end of the body."""
    for piece in pieces:
        if chunked:
            stream.begin_http_chunk_receiving()
        stream.feed_data(piece)
        if chunked:
            stream.end_http_chunk_receiving()
        await asyncio.sleep(0)
    stream.feed_eof()


def split(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


@pytest.fixture(params=["fast", "aiohttp's own"])
def reader_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param != "fast":
        monkeypatch.setattr(names, "FAST_PATHS", False)
    return str(request.param)


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(DELIMITER) - 1, len(DELIMITER), 64, 1 << 20])
async def test_every_body_is_read_whole_however_the_pieces_fall(
    reader_kind: str, size: int
) -> None:
    for body in BODIES:
        data, field, after = await read_form(split(form(body), size), room=64)
        assert (data, field, after) == (body, "root", None), (body[:40], size)


@pytest.mark.parametrize("size", [1, 5, 64, 1 << 20])
async def test_a_body_sent_in_http_chunks_is_read_whole(reader_kind: str, size: int) -> None:
    for body in BODIES:
        data, field, after = await read_form(split(form(body), size), chunked=True)
        assert (data, field, after) == (body, "root", None), (body[:40], size)


async def test_a_delimiter_split_at_every_offset_between_two_pieces(reader_kind: str) -> None:
    body = os.urandom(200) + b"\r\n-"
    whole = form(body)
    start = whole.index(DELIMITER, len(whole) - len(DELIMITER) * 3 - 120)
    for cut in range(start - 5, start + len(DELIMITER) + 5):
        data, field, after = await read_form([whole[:cut], whole[cut:]])
        assert (data, field, after) == (body, "root", None), cut


async def test_a_body_that_ends_inside_the_file_is_an_error(reader_kind: str) -> None:
    whole = form(os.urandom(500))
    cut = whole.index(DELIMITER) - 10
    with pytest.raises(ValueError):
        await read_form([whole[:cut]])


async def test_a_part_with_a_length_of_its_own_is_read_by_that_length() -> None:
    body = os.urandom(1000)
    data, field, after = await read_form(split(form(body, f"Content-Length: {len(body)}\r\n"), 100))
    assert (data, field, after) == (body, "root", None)


@pytest.mark.parametrize("room", [2 * len(DELIMITER) + 1, 2 * len(DELIMITER) + 2, 100, 1 << 20])
async def test_any_room_the_caller_gives_holds_the_body_whole(room: int) -> None:
    body = os.urandom(5000) + DELIMITER[:-1] + b"." + os.urandom(3000)
    for size in (1, 33, 4096):
        data, field, after = await read_form(split(form(body), size), room=room)
        assert (data, field, after) == (body, "root", None), (room, size)


async def outcome(pieces: list[bytes]) -> object:
    try:
        return await read_form(pieces)
    except Exception as error:  # the outcome compared is the error's type
        return type(error)


async def test_a_file_that_begins_with_the_delimiter_ends_where_aiohttp_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CRLF that ends a part's headers may begin the delimiter (an empty part has no line of
    its own): a body that begins with the boundary is read as aiohttp reads it."""
    whole = form(b"--" + BOUNDARY.encode() + b"\r\nmore")
    fast = [await outcome(split(whole, size)) for size in (1, 5, 1 << 20)]
    monkeypatch.setattr(names, "FAST_PATHS", False)
    own = [await outcome(split(whole, size)) for size in (1, 5, 1 << 20)]
    assert fast == own


@pytest.mark.parametrize("kind", ["mmap", "bytearray", "bytes"])
def test_the_delimiter_search_finds_what_bytes_find_does(kind: str) -> None:
    """``find`` (the C library's ``memmem`` on a writable buffer) answers as ``bytes.find``:
    the first place, an index into the whole buffer, within the range only."""
    data = bytearray(os.urandom(300_000))
    for at in (0, 5, 1000, 299_969):
        data[at : at + len(DELIMITER)] = DELIMITER
    if kind == "mmap":
        buffer: Any = mmap.mmap(-1, len(data))
        buffer[:] = data
    else:
        buffer = bytes(data) if kind == "bytes" else data
    whole = bytes(data)
    for start, end in [(0, len(data)), (1, len(data)), (6, 1030), (6, 1029), (1001, 299_999)]:
        for needle in (DELIMITER, DELIMITER[:-1] + b"!", b"\r\n"):
            assert find(buffer, needle, start, end) == whole.find(needle, start, end), (
                kind,
                start,
                end,
            )
