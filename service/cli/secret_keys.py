"""``secrets``: make a new key for sealing TOTP secrets, and seal every secret again with the
first configured key (rotation)."""

from __future__ import annotations

import argparse
import base64
import secrets
import sys

from service.auth.secret_box import SecretUnreadable
from service.cli.prompts import Refused, counted
from service.cli.store import opened
from service.config import Settings


async def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "new-key":
        print(base64.b64encode(secrets.token_bytes(32)).decode("ascii"))
        return 0
    if not settings.mfa.secrets_keys:
        raise Refused("set FILEHOST_SECRETS_KEY (the new key first, then the old ones) to rotate")
    async with opened(settings) as (accounts, _):
        resealed = current = 0
        unreadable = []
        for user in await accounts.users.list_users():
            try:
                again, already = await accounts.factors.reseal(user.id)
            except SecretUnreadable:
                unreadable.append(user.email)
                continue
            resealed, current = resealed + again, current + already
    print(f"{counted(resealed, 'secret')} sealed again with the first key; {current} already were")
    if unreadable:
        print(
            f"error: no configured key opens the TOTP secret of {', '.join(unreadable)}: put "
            "the key that sealed it back, or run users reset-mfa for them",
            file=sys.stderr,
        )
        return 1
    return 0
