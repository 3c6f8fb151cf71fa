"""The headers every answer gets: the security headers and Content-Security-Policy (one for the
dashboard's pages, one for everything else; a page may set its own, as a vanity alias's do),
the request's ``X-Request-ID``, and an accepted credential's ``RateLimit-Policy`` and
``RateLimit``."""

from __future__ import annotations

from aiohttp import hdrs, web
from multidict import istr

from service.api._aiohttp import SERVER_NAME, Answer, header_block
from service.auth.rate_limits import RateLimitFields
from service.observability.trace import REQUEST_ID_HEADER, RequestTrace, current_trace

# The dashboard's pages load only their own script, stylesheet and icon and talk only to their
# own origin: no inline script, style or event handler, no eval, no plugins, no <base>, never
# framed, and DOM sinks that take HTML strings (innerHTML and the like) refused outright. The files
# page previews what it fetched with the token (images, thumbnails, video, sound, a PDF) through
# blob: addresses, which only a script of the page's own origin can make. A form is posted natively
# only to the page's own origin, into a hidden frame of it: a download by a ticket, which the
# browser saves itself. Frames may load those two, nothing else; the API's answers may not be
# framed, so such a frame never shows one.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "media-src blob:; frame-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
# Everything else (JSON, scripts, stylesheets, files' bytes) is never HTML of ours: a document
# made of it is the browser's own view of an image, a sound, a video or text, which styles
# itself inline and plays a sound or video from its own address. Those two are allowed, nothing
# more; any other file's type is served as an attachment (service.domain.files).
RESOURCE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; media-src 'self'; frame-ancestors 'none'"
)


# Responses may carry secrets or tokens: never cached, never sniffed, never framed, never leaking
# a Referer; every one has a strict Content-Security-Policy. Made once, added in one call.
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
# Serialised once for the API's answers; names as multidict's case-insensitive strings for any
# other response, so none works out their lower case again.
RESOURCE_HEADERS = header_block({**_SECURITY_HEADERS, "Content-Security-Policy": RESOURCE_CSP})
# For any other response, the Server header too: aiohttp's default would name the versions of
# Python and aiohttp (an ``Answer`` writes the service's own without it).
_OWN_SERVER = (hdrs.SERVER, SERVER_NAME)
_PAGE_HEADERS = (
    *(
        (istr(name), value)
        for name, value in {**_SECURITY_HEADERS, "Content-Security-Policy": PAGE_CSP}.items()
    ),
    _OWN_SERVER,
)
_RESOURCE_PAIRS = (*RESOURCE_HEADERS.pairs, _OWN_SERVER)
# For a page that sets a policy of its own (a vanity alias's public pages): all but the CSP.
_PAGE_HEADERS_OWN_CSP = (
    *((istr(name), value) for name, value in _SECURITY_HEADERS.items()),
    _OWN_SERVER,
)
_CSP = istr("Content-Security-Policy")
REQUEST_ID = istr(REQUEST_ID_HEADER)
_RATE_LIMIT_POLICY = istr("RateLimit-Policy")
_RATE_LIMIT = istr("RateLimit")


def trace_headers(
    trace: RequestTrace, rate_fields: RateLimitFields | None
) -> list[tuple[str, str]]:
    """The headers an answer gets from its request's trace: ``X-Request-ID`` and, for an
    accepted credential, ``RateLimit-Policy`` and ``RateLimit``."""
    headers: list[tuple[str, str]] = [(REQUEST_ID, trace.request_id)]
    rate = trace.rate
    if rate is not None and rate_fields is not None:
        headers.append((_RATE_LIMIT_POLICY, rate.policy or rate_fields.policy))  # a key's own
        headers.append((_RATE_LIMIT, rate_fields.current(rate)))
    return headers


RATE_FIELDS: web.AppKey[RateLimitFields | None] = web.AppKey("rate_fields")


async def prepare_streamed(request: web.Request, response: web.StreamResponse) -> None:
    """Send a streamed answer's status and headers, the standard ones included: a response
    the handler prepares itself has sent its headers before the request handling sees it."""
    # The trace is set by request_handling, around every handler.
    standard_headers(response, current_trace.get(), request.app[RATE_FIELDS])  # type: ignore[arg-type]
    await response.prepare(request)


def standard_headers(
    response: web.StreamResponse | web.HTTPException,
    trace: RequestTrace,
    rate_fields: RateLimitFields | None,
) -> None:
    """Add the headers every answer of the application gets (see ``request_handling``)."""
    headers = response.headers
    if type(response) is Answer:
        response.block = RESOURCE_HEADERS
    else:
        html = headers.get(hdrs.CONTENT_TYPE, "").lower().startswith("text/html")
        # No handler sets any of these (but a page's own CSP), so they are added without looking
        # for earlier values.
        if html and _CSP in headers:
            headers.extend(_PAGE_HEADERS_OWN_CSP)
        else:
            headers.extend(_PAGE_HEADERS if html else _RESOURCE_PAIRS)
    for name, value in trace_headers(trace, rate_fields):
        headers[name] = value
