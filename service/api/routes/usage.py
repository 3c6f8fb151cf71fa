"""``GET /api/v1/usage``: what the account holds against the deployment's limits, for its owner
(a session, or a key with ``settings.read`` that is not bound to folders: the numbers are the
whole account's). Files by count and bytes, in all and by type class (``image``, ``video``,
``audio``, ``text``, ``pdf``, ``other``), with the most files an account may hold and the largest
upload; folders, vanity aliases and API keys by count, each with its most. What is counted, and
how, is ``service.auth.account_usage``'s."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.context import POLICY, PREFIX, SETTINGS
from service.api.credentials import authenticate
from service.api.views import ok
from service.auth.authenticator import require
from service.config import Settings
from service.domain.records import AccountUsage

USAGE_PATH = f"{PREFIX}/usage"


def usage_view(usage: AccountUsage, settings: Settings) -> dict[str, Any]:
    return {
        "files": {
            "count": usage.files,
            "bytes": usage.file_bytes,
            "max": settings.max_files_per_account,
            "max_file_bytes": settings.max_upload_bytes,
            "by_type": {
                kind: {"count": count, "bytes": size} for kind, count, size in usage.by_type
            },
        },
        "folders": {"count": usage.folders, "max": settings.max_folders_per_account},
        "aliases": {"count": usage.aliases, "max": settings.max_aliases_per_account},
        "keys": {"count": usage.keys, "max": settings.max_keys_per_account},
    }


async def get_usage(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "settings.read")
    request.app[POLICY].reach.whole_account(principal)
    usage = await request.app[POLICY].usage.of(principal.user_id)
    return ok(usage_view(usage, request.app[SETTINGS]))


def add_usage_routes(app: web.Application) -> None:
    app.router.add_get(USAGE_PATH, get_usage, allow_head=False)
