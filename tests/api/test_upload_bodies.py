"""Upload bodies sent in ways a client may send them but rarely does: compressed with a
``Content-Encoding`` (decoded and stored; one that does not decode is 400 ``bad_request``, on
``POST /files`` and on a tus ``PATCH`` alike), a raw control character in a part's headers
(refused, as aiohttp's parser refuses it), a ``filename*`` whose bytes are
not UTF-8 (kept as U+FFFD, as a plain ``filename``'s are), and a body cut off before its closing
boundary (told so)."""

from __future__ import annotations

import gzip
import hashlib
import logging
import warnings
import zlib
from typing import Any

import pytest
from aiohttp import parse_content_disposition

from service.api._aiohttp.multipart import ignore_disposition_warnings
from tests.support.api import Api, assert_error, bearer
from tests.support.files import FILES_URL, multipart, upload, uploaded
from tests.support.raw_http import exchange, parse_responses
from tests.support.tus import created, offset_of, send

BOUNDARY = "xXxBoundaryxXx"
FORM = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
DISPOSITION = b'Content-Disposition: form-data; name="file"; '


@pytest.fixture
async def token(api: Api) -> str:
    return await api.user_with_session()


async def file_names(api: Api, token: str) -> list[str]:
    response = await api.client.get(FILES_URL, headers=bearer(token))
    assert response.status == 200, await response.text()
    return [file["name"] for file in (await response.json())["data"]["files"]]


async def stored_bytes(api: Api, token: str, file_id: str) -> bytes:
    response = await api.client.get(f"{FILES_URL}/{file_id}/content", headers=bearer(token))
    assert response.status == 200, await response.text()
    return await response.read()


def form(part_head: bytes, data: bytes = b"xyz") -> bytes:
    """A form of one ``file`` part: its header lines as given, then ``data``."""
    return (
        f"--{BOUNDARY}\r\n".encode()
        + part_head
        + b"\r\n\r\n"
        + data
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


async def post_form(api: Api, token: str, body: bytes) -> Any:
    return await api.client.post(FILES_URL, data=body, headers={**FORM, **bearer(token)})


def logged_as_the_clients_doing(caplog: pytest.LogCaptureFixture) -> None:
    """An INFO line says the body could not be read; nothing is logged as a server's error."""
    assert "a request body could not be read: RequestPayloadError" in caplog.messages
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# -- a Content-Encoding ---------------------------------------------------------------------------

UNDECODABLE = {
    "gzip": b"this is not gzip at all",
    "deflate": b"\x78\x9c not deflate either",
}


@pytest.mark.parametrize("encoding", sorted(UNDECODABLE))
async def test_an_upload_whose_content_encoding_does_not_decode_is_a_bad_request(
    api: Api, token: str, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    response = await api.client.post(
        FILES_URL,
        data=UNDECODABLE[encoding],
        headers={**FORM, **bearer(token), "Content-Encoding": encoding},
    )

    error = await assert_error(response, 400, "bad_request")
    assert error["message"] == "The request body could not be decoded."
    assert response.headers["Connection"] == "close"  # so the client sends nothing more on it
    assert await file_names(api, token) == []
    logged_as_the_clients_doing(caplog)


async def test_an_undecodable_upload_closes_the_connection_after_its_answer(
    api: Api, token: str
) -> None:
    # What follows a body that does not decode can't be told from the body: nothing after it
    # on the connection is read as a request.
    body = UNDECODABLE["gzip"]
    head = (
        f"POST {FILES_URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {FORM['Content-Type']}\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    listing = (
        f"GET {FILES_URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()

    [answer] = parse_responses(await exchange(api.client.port, head + body + listing))

    assert answer.status == 400 and answer.json()["error"]["code"] == "bad_request"


@pytest.mark.parametrize("encoding", sorted(UNDECODABLE))
async def test_a_tus_patch_whose_content_encoding_does_not_decode_is_a_bad_request(
    api: Api, token: str, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    url = await created(api, bearer(token), 1000)

    response = await send(
        api, url, bearer(token), 0, UNDECODABLE[encoding], Content_Encoding=encoding
    )

    error = await assert_error(response, 400, "bad_request")
    assert error["message"] == "The request body could not be decoded."
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert await offset_of(api, url, bearer(token)) == 0
    logged_as_the_clients_doing(caplog)


@pytest.mark.parametrize(
    ("encoding", "compress"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
async def test_an_upload_sent_with_a_content_encoding_is_stored_decoded(
    api: Api, token: str, encoding: str, compress: Any
) -> None:
    # The coding is the transfer's, over the whole form: what is kept is the file in it.
    data = b"hello, compressed world\n" * 1000
    body, headers = multipart(data, filename="notes.txt")

    response = await api.client.post(
        FILES_URL,
        data=compress(body),
        headers={**headers, **bearer(token), "Content-Encoding": encoding},
    )

    assert response.status == 201, await response.text()
    file = (await response.json())["data"]
    assert (file["name"], file["size"]) == ("notes.txt", len(data))
    assert file["sha256"] == hashlib.sha256(data).hexdigest()
    assert await stored_bytes(api, token, file["id"]) == data


async def test_a_compressed_upload_is_held_to_the_size_limit_once_decoded(
    make_api: Any,
) -> None:
    api = await make_api(max_upload_bytes=64 * 1024)
    token = await api.user_with_session()
    body, headers = multipart(b"\0" * (1024 * 1024))  # a thousandth of that compressed

    response = await api.client.post(
        FILES_URL,
        data=gzip.compress(body),
        headers={**headers, **bearer(token), "Content-Encoding": "gzip"},
    )

    await assert_error(response, 413, "payload_too_large")
    assert await file_names(api, token) == []


async def test_a_tus_patch_sent_with_a_content_encoding_appends_the_decoded_bytes(
    api: Api, token: str
) -> None:
    data = b"0123456789" * 500
    url = await created(api, bearer(token), len(data), filename="tus.txt")

    response = await send(api, url, bearer(token), 0, gzip.compress(data), Content_Encoding="gzip")

    assert response.status == 204, await response.text()
    assert response.headers["Upload-Offset"] == str(len(data))
    [file] = (await (await api.client.get(FILES_URL, headers=bearer(token))).json())["data"][
        "files"
    ]
    assert await stored_bytes(api, token, file["id"]) == data


# -- raw control characters in a part's headers ---------------------------------------------------


async def test_a_tab_in_a_file_name_is_removed(api: Api, token: str) -> None:
    created_file = await uploaded(api, b"xyz", token=token, filename=b"es\tc.txt")

    assert created_file["name"] == "esc.txt"


@pytest.mark.parametrize(
    "head",
    [
        DISPOSITION + b'filename="es\x1bc.txt"',
        DISPOSITION + b'filename="es\x00c.txt"',
        DISPOSITION + b'filename="a\rContent-Type: text/html\r"\r\nContent-Type: text/plain',
        b'Content-Disposition: form-data; name="fi\x1ble"; filename="a.txt"',
        DISPOSITION + b'filename="a.txt"\r\nContent-Type: text/pl\x1bain',
        b'Content-Disposition: form-data; name="file";\x1b filename="a.txt"',
    ],
    ids=[
        "ESC-in-the-file-name",
        "NUL-in-the-file-name",
        "bare-CR-in-the-file-name",
        "in-the-field-name",
        "in-another-header",
        "outside-the-quotes",
    ],
)
async def test_a_raw_control_character_in_a_parts_headers_is_refused(
    api: Api, token: str, head: bytes
) -> None:
    # aiohttp's header parser refuses them (RFC 9110 5.5), as it does a request's own headers:
    # a part's headers are never read another way than its parser reads them. Browsers send
    # ", CR and LF of a file's name escaped (%22, %0D, %0A); a name holding another control
    # character is refused whole.
    response = await post_form(api, token, form(head))

    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {"body": "is not a well-formed multipart/form-data body"}
    assert await file_names(api, token) == []


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b'filename="say %22hi%22.txt"', 'say "hi".txt'),  # as browsers and curl send it
        (b'filename="line%0Abreak.txt"', "line%0Abreak.txt"),  # a name holds no line break
        (b"filename*=UTF-8''100%2522.txt", "100%22.txt"),  # exact: decoded once, as sent
        (b'filename="say \\"hi\\".txt"', 'say "hi".txt'),  # as Go's multipart writer sends it
    ],
)
async def test_a_quote_a_client_sent_escaped_in_a_file_name_is_read_back(
    api: Api, token: str, sent: bytes, kept: str
) -> None:
    response = await post_form(api, token, form(DISPOSITION + sent))

    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["name"] == kept


@pytest.mark.parametrize(
    "sent",
    [
        b'filename="C:\\Users\\me\\shot.png"',  # a whole Windows path, as browsers send a name
        b'filename="C:\\\\Users\\\\me\\\\shot.png"',  # its backslashes escaped, as Go's
        b'filename="folder\\shot.png"',
    ],
)
async def test_a_backslash_in_a_file_name_separates_its_path_as_sent_or_escaped(
    api: Api, token: str, sent: bytes
) -> None:
    # Browsers send a name's backslash as it is (HTML's form encoding escapes only ", CR and
    # LF), some clients escape it as a quoted-string does: either way it is a path's separator,
    # and what follows the last one is the name.
    response = await post_form(api, token, form(DISPOSITION + sent))

    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["name"] == "shot.png"


async def test_a_nul_in_a_file_name_ends_no_parameter(api: Api, token: str) -> None:
    # A parser that stopped at the NUL would not see that the part names itself twice.
    head = b'Content-Disposition: form-data; filename="a\x00"; name="alias"; name="file"'

    response = await post_form(api, token, form(head))

    await assert_error(response, 400, "validation_failed")
    assert await file_names(api, token) == []


# -- a filename* that is not UTF-8 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b"filename*=UTF-8''%FF%FE.txt", "\ufffd\ufffd.txt"),
        (b"filename*=utf-8''caf%E9.txt", "caf\ufffd.txt"),
        (b"filename*=''%E2%82.txt", "\ufffd.txt"),  # a cut sequence: one U+FFFD, as raw
    ],
)
async def test_a_filename_star_that_is_not_utf8_keeps_its_bad_bytes_as_replacement_characters(
    api: Api, token: str, sent: bytes, kept: str
) -> None:
    response = await post_form(api, token, form(DISPOSITION + sent))

    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["name"] == kept


def test_aiohttps_warnings_that_quote_a_client_content_disposition_are_not_shown() -> None:
    # They would be log lines holding the client's header. (pytest resets the filters made at
    # import, so the function that makes them is called here again.)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        ignore_disposition_warnings()
        parse_content_disposition("form-data; name=\"file\"; filename*=UTF-8''%FF.txt")
        parse_content_disposition('form-data; name="file"; filename=a b')

    assert shown == []


async def test_a_filename_star_and_a_raw_filename_with_the_same_bad_bytes_agree(
    api: Api, token: str
) -> None:
    extended = await post_form(api, token, form(DISPOSITION + b"filename*=UTF-8''r%E9sum%E9.txt"))
    plain = await post_form(api, token, form(DISPOSITION + b'filename="r\xe9sum\xe9.txt"'))

    assert extended.status == plain.status == 201
    names = [(await answer.json())["data"]["name"] for answer in (extended, plain)]
    assert names == ["r\ufffdsum\ufffd.txt"] * 2


async def test_a_filename_star_that_is_not_utf8_gives_way_to_a_plain_filename_beside_it(
    api: Api, token: str
) -> None:
    head = DISPOSITION + b"filename=\"resume.txt\"; filename*=UTF-8''r%E9sum%E9.txt"

    response = await post_form(api, token, form(head))

    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["name"] == "resume.txt"


# -- a body cut off --------------------------------------------------------------------------------

CUT_OFF = "ends before its closing boundary: it was cut off; send the whole body"


@pytest.mark.parametrize(
    "ending",
    [f"\r\n--{BOUNDARY}", f"\r\n--{BOUNDARY}\r\n", f"\r\n--{BOUNDARY[:4]}", ""],
    ids=["after-the-boundary", "after-the-boundary-line", "inside-the-boundary", "in-the-file"],
)
async def test_a_body_cut_off_before_its_closing_boundary_is_told_so(
    api: Api, token: str, ending: str
) -> None:
    head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="t.txt"\r\n'
    body = f"{head}\r\nhello{ending}".encode()

    response = await post_form(api, token, body)

    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {"body": CUT_OFF}
    assert await file_names(api, token) == []


async def test_a_file_holding_the_boundary_is_still_told_so(api: Api, token: str) -> None:
    data = f"before\r\n--{BOUNDARY}\r\nafter".encode()

    response = await upload(api, data, token=token)

    error = await assert_error(response, 400, "validation_failed")
    assert "the file holds the boundary" in error["details"]["body"]
