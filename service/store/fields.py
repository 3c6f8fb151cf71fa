"""Where each record's fields live in Redis: the digest entries the per-request lookup reads, the
session entries, and an API key's listing metadata (the truth its entries copy). The one place
that names them: the stores, their scripts and the benchmark's seeding use these.

Every record read back is checked; one that cannot be read raises ``CorruptRecord`` so callers
refuse (fail closed) instead of guessing.
"""

from __future__ import annotations

import orjson

from service.domain.key_rules import address_ranges
from service.domain.permissions import BOUND_TO_FOLDERS, UPLOAD_ONLY
from service.domain.records import KeyChanges, KeyRecord
from service.errors import CorruptRecord

# How long an entry is kept past its deadline. Never accepted (the authenticator compares the
# stored deadline with its clock first), only kept so that an expired credential is answered
# api_key_expired / session_expired rather than invalid_api_key / invalid_session. The account
# indexes keep naming such entries until they are gone, so deleting the user ends them too.
KEY_EXPIRED_GRACE_MS = 24 * 3600 * 1000
SESSION_EXPIRED_GRACE_MS = 3600 * 1000
# How long a key secret that was revoked, or rolled out past its grace, is remembered after its
# entry went (``P:key-gone:…``), so that it is answered api_key_revoked or api_key_replaced
# rather than invalid_api_key; bounded so revoked keys don't accumulate for ever.
KEY_GONE_MS = 90 * 24 * 3600 * 1000

# The per-request lookup of a key reads these: user, key id, permission mask (with
# ``BOUND_TO_FOLDERS`` beside the permissions for a key bound to folders, ``UPLOAD_ONLY`` for
# an uploader's key), expiry; and, present
# only when set, disabled ``x``, allowed networks ``n`` (as the authenticator checks them) and
# ``a`` (the same as address ranges, as the lookup script checks them), own rate ``r``, on a
# rolled-out secret's entry the end of its grace ``g``, and on a rolled key's entries ``b``, the
# digest whose bucket its secrets share. ``v``, the version of the metadata the entry was
# written from, is read by writes only. The lookup script knows these positions.
KEY_FIELDS = ("u", "k", "p", "e", "x", "n", "r", "g", "a", "b")
KEY_FIELD_COUNT = len(KEY_FIELDS)
SESSION_FIELDS = ("u", "c", "a", "i")
# Read by the session list alone, never by the per-request lookup.
SESSION_LIST_FIELDS = ("u", "c", "a", "i", "id", "s", "ip", "ua", "aa", "l", "m", "pi", "ps")


def int_field(value: object) -> int:
    if value is None:
        raise CorruptRecord()
    try:
        return int(value)  # type: ignore[call-overload]  # anything a reply holds; int() decides
    except (TypeError, ValueError):
        raise CorruptRecord() from None


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def apply_changes(meta: dict, changes: KeyChanges) -> dict:
    """The listing metadata with ``changes`` made, as a new dict."""
    edited = dict(meta)
    if changes.name is not None:
        edited["name"] = changes.name
    if changes.permissions is not None:
        edited["p"] = changes.permissions
    if changes.expires_at is not None:
        edited["e"] = changes.expires_at
    if changes.enabled is True:
        edited.pop("off", None)
    elif changes.enabled is False:
        edited["off"] = True
    if changes.allowed_ips is not None:
        if changes.allowed_ips:
            edited["ips"] = list(changes.allowed_ips)
        else:
            edited.pop("ips", None)
    if changes.sets_rate_limit:
        if changes.rate_limit is not None:
            edited["rl"] = list(changes.rate_limit)
        else:
            edited.pop("rl", None)
    if changes.sets_folder_ids:
        if changes.folder_ids is not None:
            edited["f"] = list(changes.folder_ids)
        else:
            edited.pop("f", None)
    if changes.uploader is not None:
        edited["up"] = changes.uploader
    edited["v"] = meta.get("v", 0) + 1
    return edited


def key_record(key_id: str, meta: dict, last_used: str | None, now: int) -> KeyRecord:
    previous_until = meta["pe"] if "pd" in meta else None
    return KeyRecord(
        id=key_id,
        name=meta["name"],
        key_prefix=meta["prefix"],
        permissions=meta["p"],
        created_at=meta["c"],
        expires_at=meta["e"],
        last_used_at=int(last_used) if last_used is not None else None,
        enabled="off" not in meta,
        allowed_ips=tuple(meta.get("ips", ())),
        rate_limit=(meta["rl"][0], meta["rl"][1]) if "rl" in meta else None,
        previous_secret_expires_at=(
            previous_until if previous_until is not None and previous_until > now else None
        ),
        folder_ids=tuple(meta["f"]) if "f" in meta else None,
        uploader=meta.get("up"),
    )


def decode_key_metadata(raw: str) -> dict:
    """A key's listing metadata: ``name``, ``prefix``, ``d`` (the secret's digest), ``p``,
    ``c``, ``e``; once changed, ``v`` (its version); when set, ``off`` (disabled), ``ips``
    (allowed networks), ``rl`` ([per second, burst]); after a roll, ``pd`` and ``pe`` (the
    previous secret's digest and the end of its grace), ``rolling`` until the roll has
    finished, and ``b`` (the digest whose bucket the key's secrets share; none: the
    secret's own); when bound to folders, ``f`` (their ids: a list, empty once every one of
    them was deleted); for an upload-only key, ``up`` (the kind of uploader it was made for).
    Anything else refuses it whole."""
    try:
        meta = orjson.loads(raw)
        for field in ("name", "prefix", "d"):
            if not isinstance(meta[field], str):
                raise CorruptRecord()
        for field in ("p", "c", "e"):
            if not is_int(meta[field]):
                raise CorruptRecord()
        if not is_int(meta.get("v", 0)) or meta.get("off", True) is not True:
            raise CorruptRecord()
        ips = meta.get("ips", ["-"])
        if not isinstance(ips, list) or not ips or not all(isinstance(i, str) for i in ips):
            raise CorruptRecord()
        rate = meta.get("rl", [1, 1])
        if not isinstance(rate, list) or len(rate) != 2 or not all(map(is_int, rate)):
            raise CorruptRecord()
        if ("pd" in meta) != ("pe" in meta) or not isinstance(meta.get("pd", ""), str):
            raise CorruptRecord()
        if meta.get("rolling", True) is not True or ("rolling" in meta and "pd" not in meta):
            raise CorruptRecord()
        if not is_int(meta.get("pe", 0)) or not isinstance(meta.get("b", ""), str):
            raise CorruptRecord()
        folders = meta.get("f", [])
        if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
            raise CorruptRecord()
        if not isinstance(meta.get("up", ""), str):
            raise CorruptRecord()
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise CorruptRecord() from None
    return meta


def new_key_metadata(
    *,
    name: str,
    key_prefix: str,
    permissions: int,
    created_at: int,
    expires_at: int,
    secret_digest: str,
    folder_ids: tuple[str, ...] | None = None,
    uploader: str | None = None,
) -> dict:
    """A new key's listing metadata (its fields as ``decode_key_metadata`` tells them)."""
    meta = {
        "name": name,
        "prefix": key_prefix,
        "p": permissions,
        "c": created_at,
        "e": expires_at,
        "d": secret_digest,
    }
    if folder_ids is not None:
        meta["f"] = list(folder_ids)
    if uploader is not None:
        meta["up"] = uploader
    return meta


def entry_mask(meta: dict) -> int:
    """The mask a digest entry of the key holds: its permissions, marked when it is bound to
    folders (whose ids stay in the metadata, read only for such a key's requests) and when it
    may only upload."""
    mask = meta["p"] | BOUND_TO_FOLDERS if "f" in meta else meta["p"]
    return mask | UPLOAD_ONLY if "up" in meta else mask


def named_digests(meta: dict) -> list[str]:
    """Every digest the metadata names: the secret's, and a rolled-out one's."""
    return [meta["d"], meta["pd"]] if "pd" in meta else [meta["d"]]


def key_entry_fields(user_id: str, key_id: str, meta: dict) -> list[str | int]:
    """The fields of a digest entry of the key the metadata describes (version apart)."""
    fields: list[str | int] = ["u", user_id, "k", key_id, "p", entry_mask(meta), "e", meta["e"]]
    if "off" in meta:
        fields += ("x", "1")
    if "ips" in meta:
        fields += ("n", ",".join(meta["ips"]), "a", address_ranges(meta["ips"]))
    if "rl" in meta:
        fields += ("r", f"{meta['rl'][0]}:{meta['rl'][1]}")
    if "b" in meta:
        fields += ("b", meta["b"])
    return fields
