"""The one error hierarchy of the service.

Every refusal the API gives is an ``ApiError``; ``api.middleware`` turns it into the JSON error
envelope in one place. Messages are written for clients and never contain a credential.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refusal with an HTTP status, a stable machine-readable code and a human message."""

    status: int = 500
    code: str = "internal_error"
    message: str = "The server could not handle this request."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or type(self).message
        self.code = code or type(self).code
        self.details = details
        self.headers = headers or {}
        super().__init__(self.message)


class BadRequest(ApiError):
    status = 400
    code = "bad_request"
    message = "The request could not be understood."


class ValidationFailed(BadRequest):
    code = "validation_failed"
    message = "Some fields are invalid."


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"
    message = "Authentication is required."


class Forbidden(ApiError):
    status = 403
    code = "forbidden"
    message = "This credential may not do that."


class NotFound(ApiError):
    status = 404
    code = "not_found"
    message = "Nothing is here."


class MethodNotAllowed(ApiError):
    status = 405
    code = "method_not_allowed"
    message = "This method is not allowed here."


class Conflict(ApiError):
    status = 409
    code = "conflict"
    message = "The request conflicts with the current state."


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload_too_large"
    message = "The request body is too large."


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported_media_type"
    message = "The request body must be JSON (Content-Type: application/json)."


class ClientClosedRequest(ApiError):
    """The client went away before its request was read: never sent (there is nobody to read
    it), but logged and counted with nginx's 499 so it is not mistaken for a server error."""

    status = 499
    code = "client_closed_request"
    message = "The client closed the connection before its request was read."


class TooManyRequests(ApiError):
    status = 429
    code = "rate_limited"
    message = "Too many requests. Retry after the time in the Retry-After header."


class ServiceUnavailable(ApiError):
    status = 503
    code = "service_unavailable"
    message = "The service is temporarily unavailable. Retry shortly."


class StoreUnavailable(ServiceUnavailable):
    """The credential store cannot be reached; every protected request is refused (fail closed)."""

    code = "store_unavailable"
    message = "The credential store is unreachable. Retry shortly."

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.headers = {"Retry-After": "1", **self.headers}


class CorruptRecord(ServiceUnavailable):
    """A stored record could not be read; refuse rather than guess (fail closed)."""

    code = "store_unavailable"
    message = "The credential store returned unreadable data. Retry shortly."


class FileNotFound(NotFound):
    """An unknown file id, or another account's file: the two are never told apart."""

    code = "file_not_found"
    message = "No such file."


class FileLimitReached(Conflict):
    code = "file_limit_reached"
    message = "This account holds the maximum number of files. Delete one before uploading."


class RangeNotSatisfiable(ApiError):
    status = 416
    code = "range_not_satisfiable"
    message = "The requested range is not within the file."


def account_gone() -> Unauthorized:
    """The credential outlived its account (deleted between the check and the change)."""
    return Unauthorized(
        "The credential's account no longer exists.",
        code="account_gone",
        headers={"WWW-Authenticate": 'Bearer realm="filehost"'},  # RFC 9110: every 401
    )


def wrong_credentials() -> Unauthorized:
    """A login's (or a password change's) email or password is wrong: never which."""
    return Unauthorized(
        "The email or password is incorrect.",
        code="invalid_credentials",
        headers={"WWW-Authenticate": 'Bearer realm="filehost"'},
    )
