"""``keys``: every live API key of the deployment with its last use, and revoking at once those
created or used since a given time. What an operator needs after restoring a backup (a key
revoked after it was taken is live again) or after a compromise: which keys could have been
made or used by whoever got in, and an end to them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import orjson

from service.auth.policy import Policy
from service.cli.prompts import Refused, confirmed, counted
from service.cli.store import opened
from service.clock import iso
from service.config import Settings
from service.domain import audit_events as audit
from service.domain.permissions import to_names
from service.domain.records import KeyRecord, UserRecord
from service.errors import ApiError, Code


@dataclass(frozen=True, slots=True)
class _Held:
    user: UserRecord
    key: KeyRecord

    def since(self, at_ms: int) -> bool:
        """Whether it was created, or last used, at or after ``at_ms``."""
        used = self.key.last_used_at
        return self.key.created_at >= at_ms or (used is not None and used >= at_ms)


async def _every_key(accounts: Policy) -> list[_Held]:
    held = []
    for user in await accounts.users.list_users():
        held += [_Held(user, key) for key in await accounts.api_keys.list_keys(user.id)]
    return held


def _shown(item: _Held) -> dict[str, object]:
    key = item.key
    return {
        "email": item.user.email,
        "user_id": item.user.id,
        "id": key.id,
        "name": key.name,
        "key_prefix": key.key_prefix,
        "permissions": to_names(key.permissions),
        "created_at": iso(key.created_at),
        "last_used_at": iso(key.last_used_at),
        "expires_at": iso(key.expires_at),
        "enabled": key.enabled,
        "uploader": key.uploader,
    }


def _line(item: _Held) -> str:
    key = item.key
    used = iso(key.last_used_at) or "never used"
    return (
        f"{key.id}  {item.user.email}  {key.name!r}  {key.key_prefix}  "
        f"created {iso(key.created_at)}  last used {used}"
    )


async def _revoke(accounts: Policy, chosen: list[_Held], since: str, yes: bool) -> None:
    if not chosen:
        print(f"no live key was created or used since {since}; nothing revoked")
        return
    if not yes:
        for item in chosen:
            print(_line(item), file=sys.stderr)
        what = f"{counted(len(chosen), 'key')} created or used since {since}"
        if not sys.stdin.isatty():
            raise Refused(
                f"not on a terminal, so nothing was asked and nothing revoked: add --yes to "
                f"revoke the {what}",
                status=2,
            )
        if not confirmed(f"Revoke the {what}? Their holders are refused from now on. [y/N]"):
            raise Refused("nothing revoked")
    revoked = 0
    for item in chosen:
        try:
            await accounts.api_keys.revoke_key(
                item.user.id, item.key.id, audit.NO_ORIGIN, actor=audit.cli_actor()
            )
        except ApiError as refused:
            if refused.code is not Code.KEY_NOT_FOUND:
                raise
            print(f"gone already: {_line(item)}")  # revoked or expired meanwhile
            continue
        revoked += 1
        print(f"revoked {_line(item)}")
    print(f"{counted(revoked, 'key')} revoked")


async def run(settings: Settings, args: argparse.Namespace) -> int:
    async with opened(settings) as (accounts, _):
        held = await _every_key(accounts)
        if args.action == "list":
            for item in held:
                print(orjson.dumps(_shown(item)).decode() if args.json else _line(item))
            return 0
        since = iso(args.since)
        await _revoke(accounts, [item for item in held if item.since(args.since)], since, args.yes)
    return 0
