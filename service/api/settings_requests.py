"""The request fields of the account's settings (``PATCH /settings``): every problem is a 400
``validation_failed`` whose ``details`` name each setting and its rule."""

from __future__ import annotations

from typing import Any

from service.domain import account_settings
from service.errors import ApiError, Code


def parse_settings(body: dict[str, Any]) -> dict[str, Any]:
    """Any of the settings, each checked against its rule (``service.domain.account_settings``);
    one problem refuses them all."""
    problems = account_settings.problems_of(body)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return body
