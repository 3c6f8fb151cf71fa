"""The one place where errors become the JSON error envelope, and the headers every response gets.

``{"success": false, "error": {"code", "message", "details"?}}`` for every refusal: our own
``ApiError``s, aiohttp's routing errors (404, 405, 413), Redis failures (503, fail closed) and
anything unexpected (500, with nothing internal in the body; the traceback goes to the log only,
and request headers and bodies never do).
"""

from __future__ import annotations

import logging

import orjson
from aiohttp import hdrs, web
from redis.exceptions import RedisError

from service.api.context import AUTHENTICATOR, PRINCIPAL
from service.errors import (
    ApiError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
)
from service.logs import REQUEST_ID_HEADER, TRACE

log = logging.getLogger("service.api")

_JSON = "application/json"


def error_response(error: ApiError) -> web.Response:
    body: dict = {"code": error.code, "message": error.message}
    if error.details is not None:
        body["details"] = error.details
    response = web.Response(
        body=orjson.dumps({"success": False, "error": body}),
        status=error.status,
        content_type=_JSON,
    )
    response.headers.update(error.headers)
    return response


def _from_http_exception(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPNotFound):
        return NotFound("No such endpoint.", code="route_not_found")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return MethodNotAllowed(f"Allowed methods: {allowed}.", headers={"Allow": allowed})
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge()
    error = ApiError(exc.reason, code=exc.reason.lower().replace(" ", "_"))
    error.status = exc.status
    return error


def as_api_error(exc: Exception) -> ApiError:
    """The refusal an exception is answered with: the one mapping, used by the envelope below,
    by the credential check's trace and by the forward-auth route. A Redis failure is 503 (fail
    closed); anything unexpected is 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, web.HTTPException):
        return _from_http_exception(exc)
    if isinstance(exc, RedisError):
        return StoreUnavailable()
    return ApiError()


@web.middleware
async def error_envelope(request: web.Request, handler):  # type: ignore[no-untyped-def]
    try:
        return await handler(request)
    except ApiError as error:
        if error.status >= 500:
            log.warning("refused %s %s: %s", request.method, request.path, error.code)
        return error_response(error)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(as_api_error(exc))
    except RedisError as exc:
        log.error(
            "credential store error on %s %s: %s", request.method, request.path, type(exc).__name__
        )
        return error_response(as_api_error(exc))
    except Exception as exc:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return error_response(as_api_error(exc))


# The dashboard's pages load only their own script, stylesheet and icon and talk only to their
# own origin: no inline script, style or event handler, no eval, no plugins, no <base>, no native
# form submission (the forms are sent by the script), never framed, and DOM sinks that take HTML
# strings (innerHTML and the like) refused outright.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
# Everything else (JSON, scripts, stylesheets) is never meant to be rendered as a document.
RESOURCE_CSP = "default-src 'none'; frame-ancestors 'none'"


# Responses may carry secrets or tokens: never cached, never sniffed, never framed, never leaking
# a Referer; every one has a strict Content-Security-Policy. Made once, added in one call.
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_RESOURCE_HEADERS = tuple({**_SECURITY_HEADERS, "Content-Security-Policy": RESOURCE_CSP}.items())
_PAGE_HEADERS = tuple({**_SECURITY_HEADERS, "Content-Security-Policy": PAGE_CSP}.items())


async def response_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The headers every answer of the application gets, in one ``on_response_prepare`` hook
    (each hook costs a coroutine per response): the security headers, ``X-Request-ID``, and an
    accepted credential's remaining request budget (``RateLimit-Policy``, ``RateLimit``)."""
    headers = response.headers
    html = headers.get(hdrs.CONTENT_TYPE, "").startswith("text/html")
    # No handler sets any of these, so they are added without looking for earlier values.
    headers.extend(_PAGE_HEADERS if html else _RESOURCE_HEADERS)
    trace = request.get(TRACE)
    if trace is not None:
        headers[REQUEST_ID_HEADER] = trace.request_id
    principal = request.get(PRINCIPAL)
    if principal is None or principal.rate is None:
        return
    fields = request.app[AUTHENTICATOR].rate_fields
    if fields is not None:
        headers["RateLimit-Policy"] = fields.policy
        headers["RateLimit"] = fields.current(principal.rate)
