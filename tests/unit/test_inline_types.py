"""The types a file is served as, inline, under the files' Content-Security-Policy: that policy
allows inline style and media from the file's own address because none of them is markup a
browser would run (docs/security.md). A type that could be a document of ours never joins."""

from __future__ import annotations

from service.api.headers import RESOURCE_CSP, RESOURCE_HEADERS
from service.domain.files import INLINE_TYPES, OCTET_STREAM

# What a browser renders as a document of the origin it came from, scripts and styles included.
MARKUP = {
    "text/html",
    "application/xhtml+xml",
    "image/svg+xml",
    "text/xml",
    "application/xml",
    "text/javascript",
    "application/javascript",
    "application/pdf",
    "text/css",
}


def test_every_inline_type_is_one_a_browser_shows_without_running_anything() -> None:
    assert not INLINE_TYPES & MARKUP
    for content_type in INLINE_TYPES:
        kind, _, subtype = content_type.partition("/")
        assert content_type == "text/plain" or kind in ("image", "audio", "video"), content_type
        assert "xml" not in subtype and "svg" not in subtype, content_type
    assert OCTET_STREAM not in INLINE_TYPES


def test_the_files_policy_allows_nothing_but_the_browsers_own_views_need() -> None:
    directives = dict(part.strip().split(" ", 1) for part in RESOURCE_CSP.split(";"))
    assert directives == {
        "default-src": "'none'",
        "style-src": "'unsafe-inline'",
        "media-src": "'self'",
        "frame-ancestors": "'none'",
    }
    sent = dict(RESOURCE_HEADERS.pairs)
    assert sent["X-Content-Type-Options"] == "nosniff"  # no type is ever guessed into markup
