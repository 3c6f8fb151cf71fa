"""The one place where errors become the JSON error envelope:
``{"success": false, "error": {"code", "message", "details"?}}`` for every refusal: our own
``ApiError``s, aiohttp's routing errors (404, 405, 413), Redis failures (503, fail closed) and
anything unexpected (500, with nothing internal in the body; the traceback goes to the log only,
and request headers and bodies never do).
"""

from __future__ import annotations

import logging

import orjson
from aiohttp import web
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.api._aiohttp import Answer
from service.api.headers import RESOURCE_HEADERS
from service.domain.blobs import StorageUnavailable
from service.errors import ApiError, Code, CorruptRecord
from service.observability.trace import RequestTrace, loggable_path

log = logging.getLogger("service.api")

# The codes of aiohttp's HTTP exceptions that reach the envelope, by status: the router's 404
# and 405, a body over the size limit, the read timeouts' 408 and the Expect handling's 417.
_HTTP_EXCEPTION_CODES: dict[int, Code] = {
    404: Code.ROUTE_NOT_FOUND,
    405: Code.METHOD_NOT_ALLOWED,
    408: Code.REQUEST_TIMEOUT,
    413: Code.PAYLOAD_TOO_LARGE,
    417: Code.EXPECTATION_FAILED,
}


# The bodies of refusals without details, by code and message: the common ones (an unknown or
# malformed credential) come again and again. Messages never hold anything secret.
_REFUSAL_BODIES: dict[tuple[str, str], bytes] = {}
_REFUSAL_BODIES_KEPT = 1024


def error_body(error: ApiError) -> bytes:
    """The envelope of a refusal, serialised."""
    if error.details is None:
        key = (error.code, error.message)
        body = _REFUSAL_BODIES.get(key)
        if body is None:
            body = orjson.dumps(
                {"success": False, "error": {"code": error.code, "message": error.message}}
            )
            if len(_REFUSAL_BODIES) < _REFUSAL_BODIES_KEPT:
                _REFUSAL_BODIES[key] = body
        return body
    return orjson.dumps(
        {
            "success": False,
            "error": {"code": error.code, "message": _said(error), "details": error.details},
        }
    )


def _said(error: ApiError) -> str:
    """The refusal's message; for fields refused with the row's words, the fields and what is
    wrong with each too: many a client shows the message alone (a ShareX error, a script's)."""
    details = error.details
    if error.code is not Code.VALIDATION_FAILED or error.message != error.code.message:
        return error.message
    if not isinstance(details, dict):
        return error.message
    problems = [
        f"{field} {problem}" for field, problem in details.items() if isinstance(problem, str)
    ]
    return f"Some fields are invalid: {'; '.join(problems)}." if problems else error.message


def error_response(error: ApiError) -> Answer:
    response = Answer(error_body(error), error.status)
    if error.headers:
        response.headers.update(error.headers)
    return response


def undecodable_body() -> ApiError:
    """The refusal of a body aiohttp could not read as its headers say (a Content-Encoding that
    doesn't decode, a broken chunked encoding: ``web.RequestPayloadError``), wherever it was
    being read: the client's doing, never a 500. aiohttp closes the connection after the
    answer, since what is left of the body can't be told from a next request."""
    return ApiError(Code.BAD_REQUEST, "The request body could not be decoded.")


def _from_http_exception(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return ApiError(
            Code.METHOD_NOT_ALLOWED, f"Allowed methods: {allowed}.", headers={"Allow": allowed}
        )
    code = _HTTP_EXCEPTION_CODES.get(exc.status)
    if code is None:  # a refusal of aiohttp's the table has no row for: a bug, answered as one
        log.error("unexpected %s (%d) from aiohttp", type(exc).__name__, exc.status)
        return ApiError(Code.INTERNAL_ERROR)
    return ApiError(code)


def as_api_error(exc: Exception) -> ApiError:
    """The refusal an exception is answered with: the one mapping, used by the envelope below,
    by the credential check's trace and by the forward-auth route. A Redis failure is 503 (fail
    closed); anything unexpected is 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, web.HTTPException):
        return _from_http_exception(exc)
    if isinstance(exc, web.RequestPayloadError):
        return undecodable_body()
    if isinstance(exc, RedisError):
        return ApiError(Code.STORE_UNAVAILABLE)
    if isinstance(exc, StorageUnavailable):
        return ApiError(Code.STORAGE_UNAVAILABLE)
    return ApiError(Code.INTERNAL_ERROR)


def note_store_error(trace: RequestTrace, exc: BaseException) -> None:
    """Put on the request's trace what kind of store failure ``exc`` is, if it is one, for the
    metrics (``filehost_store_errors_total``): ``STORE_ERROR_KINDS``."""
    if isinstance(exc, CorruptRecord):
        trace.store_error = "corrupt_record"
    elif isinstance(exc, RedisTimeoutError | TimeoutError):
        trace.store_error = "timeout"
    elif isinstance(exc, RedisConnectionError | OSError):
        trace.store_error = "connection"
    elif isinstance(exc, ResponseError):
        trace.store_error = "error_reply"
    elif isinstance(exc, RedisError):
        trace.store_error = "other"


def refusal(exc: Exception, trace: RequestTrace, method: str, path: str) -> ApiError:
    """The refusal an exception that escaped a route's handler is answered with (see
    ``request_handling``), logged as it deserves: a client gone while its body was read at INFO,
    a Redis failure as an error, anything unexpected with its traceback."""
    if isinstance(exc, ApiError):
        if exc.status == 403 and trace.outcome == "ok":  # ``require`` after the check
            trace.outcome = exc.code
        if exc.status >= 500:
            if isinstance(exc, CorruptRecord):
                note_store_error(trace, exc)
            log.warning("refused %s %s: %s", method, loggable_path(path), exc.code)
        return exc
    if isinstance(exc, web.HTTPException):
        return as_api_error(exc)
    if isinstance(exc, ConnectionResetError):  # the client went away while its body was read
        log.info("client went away during %s %s", method, loggable_path(path))
        return ApiError(Code.CLIENT_CLOSED_REQUEST)
    if isinstance(exc, web.RequestPayloadError):  # the client's doing: logged as answered
        return undecodable_body()
    if isinstance(exc, RedisError):
        note_store_error(trace, exc)
        log.error(
            "credential store error on %s %s: %s", method, loggable_path(path), type(exc).__name__
        )
        return as_api_error(exc)
    if isinstance(exc, StorageUnavailable):
        log.warning(
            "file storage unavailable on %s %s: %s", method, loggable_path(path), exc.reason
        )
        return as_api_error(exc)
    log.error("unexpected error on %s %s", method, loggable_path(path), exc_info=exc)
    return as_api_error(exc)


def low_level_error(status: int) -> ApiError:
    """The envelope's error for a request aiohttp's parser refused itself with ``status``."""
    if status == 408:  # late headers: answered as a late body is
        return ApiError(Code.REQUEST_TIMEOUT)
    # With the parser's own status (400 for all it refuses today), whatever the row says.
    return ApiError(Code.INTERNAL_ERROR if status >= 500 else Code.BAD_REQUEST, status=status)


def low_level_refusal(cause: int | web.HTTPException) -> web.Response:
    """The envelope answer to a request refused before the application saw it: ``cause`` is
    the status aiohttp's parser refused it with (the connection is then closed, as aiohttp
    does), or an ``HTTPException`` aiohttp raised ahead of the routing (its ``Expect``
    handling). Nothing of the request is in it."""
    if isinstance(cause, int):
        response = error_response(low_level_error(cause))
        response.force_close()
    else:
        response = error_response(as_api_error(cause))
    # The request handling that adds every answer's headers does not run for these (no route
    # was matched), so they are given here: the security headers, the policy among them.
    response.block = RESOURCE_HEADERS
    return response
