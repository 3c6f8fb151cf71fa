"""What a vanity alias's link gives whoever holds it, without a credential (``GET /a/{slug}``):
whether the alias may be used now, its views counted, its password checked (throttled per alias
and per client address, like logins), the short-lived cookie its password grants, the
public side's rate per client address, and what the alias reaches (``service.auth.reach``).

Every alias that may not be used (unknown, expired, disabled, deleted, used up, switched off by
its account, a slug that cannot be one) is one refusal, ``alias_not_found``, so nobody learns
which. A password is checked with bcrypt off the event loop, on a pool of its own (guesses never
queue logins), and is never kept, logged or echoed; the cookie carries no password, only a
signature over the alias, its expiry and a tag of the password's hash (so a new password ends
every cookie of the old one).

**A sound or video is one view however the browser reads it.** A browser's own view of a sound
or video asks its address again, in ranges, as it plays and seeks: each would be a view, and a
``max_views`` of 1 would let the file be fetched but never played. The view of a browser's
opening of one (a navigation, asking for HTML) gives a grant (``view_grant``), a cookie for that
address only, signed over the alias, the file's address, the client address's bucket and an
expiry; a range of the same address from the same bucket carrying it is served as part of that
view (``open``'s ``grants``): nothing counted, and past the limit, while the alias is otherwise
usable. Any other request counts as before: an opening again, another client address, an API
client that keeps no cookie.

The cookies' key, and the key of the public ETags, are derived from the operator's secrets key
(``secret_box.derived_key``), so every worker and instance signs and checks with the same one
and neither is ever stored: a backup holds nothing that opens a protected alias. A new first
secrets key ends every cookie (they last 30 minutes) and changes every public ETag.

**A public ETag tells nothing of the bytes.** The owner's download carries the file's SHA-256
as its ETag; a public alias's carries ``public_etag``, an HMAC of it under the derived key, so
that nobody without a credential can confirm a guess of a small file's content from it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from dataclasses import dataclass, replace

from service.auth.login_throttle import address_bucket
from service.auth.passwords import PasswordHasher
from service.auth.reach import Reach
from service.clock import Clock
from service.domain.aliases import PASSWORD, UNUSABLE, USABLE, slug_key
from service.domain.records import FilePage, FileRecord, FolderPage, FolderRecord, RateLimit
from service.domain.stored_forms import file_record
from service.errors import ApiError, Code
from service.store.protocols import AliasViews, CounterStore, FilesStore

# The cookie an alias's password grants, for its path only, and how long it lasts.
COOKIE_NAME = "fh_alias"
COOKIE_SECONDS = 30 * 60
_SLUG_SHAPE = re.compile(r"[A-Za-z0-9_-]{3,64}")
# The most client addresses whose bucket a worker remembers before it forgets them all.
_BUCKETS_KEPT = 10_000
# The most aliases of small files a worker remembers (``KnownFile``) before it forgets them all.
_KNOWN_KEPT = 10_000
_COOKIE = re.compile(r"([0-9]{1,16})\.([0-9a-f]{16})\.([0-9a-f]{64})")
# The grant a browser's opening of a sound or video gets, for the address opened only, and how
# long it lasts: a film's length, paused a while.
VIEW_GRANT_NAME = "fh_view"
VIEW_GRANT_SECONDS = 4 * 60 * 60
_GRANT = re.compile(r"(als_[0-9A-Za-z]{1,64})\.([0-9]{1,16})\.([0-9a-f]{64})")
# The most grants of one request looked at (a browser sends one per address it opened above).
_GRANTS_CHECKED = 4


@dataclass(frozen=True, slots=True)
class AccessSettings:
    """The public side's bounds: the rate per client address (None: off), and the wrong
    passwords allowed in a window (0: that bound off) per alias and address, per alias, and
    per address."""

    rate: RateLimit | None
    failures_per_alias: int
    failures_per_address: int
    window_seconds: int
    failures_per_alias_address: int = 0


@dataclass(frozen=True, slots=True)
class Opened:
    """An alias a request may use: whose it is, what it is of, whether this request's view is
    counted, the password's hash it was checked against (for a count made later), and the
    cookie to give (its password just accepted)."""

    slug_key: str
    user_id: str
    alias_id: str
    target_id: str
    counted: bool
    password_hash: str | None = None
    cookie: str | None = None
    limited: bool = False  # it has a view limit
    continued: bool = False  # part of a view counted before (a grant's): counts nothing


@dataclass(frozen=True, slots=True)
class KnownFile:
    """An alias of a file this worker last served whole, without a password: what the next
    request for its slug can read in the same round trip as its view (``open_known``)."""

    slug_key: str
    alias_id: str
    user_id: str
    file_id: str
    record_field: tuple[str, str]  # where the file's record is (``FilesStore.record_field``)
    # The file's record as last read, and as it was stored: read again only when it changed.
    member: str | None = None
    record: FileRecord | None = None


def _not_found() -> ApiError:
    return ApiError(Code.ALIAS_NOT_FOUND)


def _tag(password_hash: str) -> str:
    return hashlib.sha256(password_hash.encode()).hexdigest()[:16]


class AliasAccess:
    def __init__(
        self,
        views: AliasViews,
        files: FilesStore,
        counters: CounterStore,
        reach: Reach,
        passwords: PasswordHasher,
        clock: Clock,
        settings: AccessSettings,
        cookie_key: bytes,
        etag_key: bytes,
    ) -> None:
        self._cookie_key = cookie_key
        self._etag_key = etag_key
        self._etags: dict[str, str] = {}
        self._views = views
        self._files = files
        self._counters = counters
        self._reach = reach
        self._passwords = passwords
        self._clock = clock
        self._settings = settings
        rate = settings.rate
        self._rate = None if rate is None else (rate.interval_us, rate.tolerance_us)
        self._buckets: dict[str | None, str | None] = {}
        self._known: dict[str, KnownFile] = {}
        # Requests the lane took from an address's bucket and then handed to aiohttp's handling
        # (``open_known`` returned None): ``open`` does not take them again.
        self._taken_for_hand_back: dict[str, int] = {}

    async def open(
        self,
        slug: str,
        *,
        count: bool,
        address: str | None,
        password: str | None = None,
        cookie: str | None = None,
        grant_cookie: bool = False,
        grants: tuple[str, list[str]] | None = None,
    ) -> Opened:
        """The alias of ``slug`` for one request from ``address``, its view counted when
        ``count``; with a password it needs, that ``password`` (or a valid ``cookie``). With
        ``grants`` (the address a range is asked of, and the grant cookies sent), a
        request one of them was given for is part of the view that gave it: nothing counted,
        and served past the view limit. 404 ``alias_not_found`` for any alias that may not be
        used, 401 for a password missing or wrong, 429 past the address's rate or the wrong
        passwords' bounds."""
        if not _SLUG_SHAPE.fullmatch(slug):
            raise _not_found()
        key = slug_key(slug)
        now = self._clock.now_ms()
        bucket = self._bucket(address)
        take = bucket is not None and not self._taken_already(bucket)
        granted = None if grants is None else self._granted(key, bucket, now, *grants)
        view, wait = await self._views.view(
            key,
            now,
            count=count,
            alias_id=granted,
            address=bucket,
            rate=self._rate if take else None,
            continuing=granted is not None,
        )
        if view.status == UNUSABLE and granted is not None and not wait:
            # The grant's alias no longer holds the slug, or may not be used: as if none.
            granted = None
            view, _ = await self._views.view(key, now, count=count)
        if wait:
            if count and granted is None and view.status not in (UNUSABLE, PASSWORD):
                await self._views.give_back(key, view.alias_id)
            raise _too_many(math.ceil(wait / 1_000_000))
        if view.status == UNUSABLE:
            raise _not_found()
        continued = granted is not None
        opened = Opened(
            key,
            view.user_id,
            view.alias_id,
            view.target_id,
            count and not continued,
            limited=view.limited,
            continued=continued,
        )
        if view.status != PASSWORD:
            return opened
        assert view.password_hash is not None
        checked, given = view.password_hash, None
        if cookie is not None and await self._cookie_holds(cookie, opened, checked, now):
            pass
        elif password is not None:
            await self._check(view.alias_id, bucket, password, checked)
            if grant_cookie:
                given = await self._cookie(opened, checked, now)
        else:
            raise ApiError(Code.ALIAS_PASSWORD_REQUIRED)
        again, _ = await self._views.view(
            key,
            now,
            count=opened.counted,
            alias_id=view.alias_id,
            password_hash=checked,
            continuing=continued,
        )
        if again.status == UNUSABLE:
            raise _not_found()
        if again.status == PASSWORD:  # a new password since it was read
            raise ApiError(Code.ALIAS_PASSWORD_INVALID)
        return replace(opened, password_hash=checked, cookie=given, limited=again.limited)

    # -- aliases of files this worker served: one round trip -------------------------------------

    def known(self, slug: str) -> KnownFile | None:
        """The file the alias of ``slug`` (as the request spelt it) was of when this worker last
        served it whole without a password; None when it did not, or learned since that it
        changed."""
        return self._known.get(slug)

    def remember(self, slug: str, opened: Opened) -> None:
        """``opened``, a file alias without a password, was just served through ``slug``."""
        if opened.password_hash is not None or not opened.target_id.startswith("fil_"):
            return
        if len(self._known) >= _KNOWN_KEPT:
            self._known.clear()
        user_id, file_id = opened.user_id, opened.target_id
        self._known[slug] = KnownFile(
            opened.slug_key,
            opened.alias_id,
            user_id,
            file_id,
            self._files.record_field(user_id, file_id),
        )

    async def open_known(
        self, slug: str, known: KnownFile, address: str | None
    ) -> tuple[Opened, FileRecord] | None:
        """``open`` and ``file`` in one round trip, for an alias this worker knows (``known``):
        its view counted, the address's rate taken, and the file it was of read in the same
        write. None, with nothing counted and the alias forgotten, when it is no longer that
        alias of that file without a password (another alias holds the slug, it is unusable,
        it has a password, the file is gone): then ``open`` tells what it is now. 429 past the
        address's rate, as ``open``."""
        bucket = self._bucket(address)
        view, member, wait = await self._views.view_reading(
            known.slug_key,
            self._clock.now_ms(),
            known.alias_id,
            known.record_field,
            bucket,
            None if bucket is None else self._rate,
        )
        if view.status != USABLE:
            self._known.pop(slug, None)
            if wait:
                raise _too_many(math.ceil(wait / 1_000_000))
            self._handing_back(bucket)
            return None
        opened = Opened(known.slug_key, view.user_id, view.alias_id, view.target_id, True)
        try:
            if wait:
                raise _too_many(math.ceil(wait / 1_000_000))
            if member is not None and member == known.member:
                record = known.record
            else:
                record = None if member is None else file_record(member)
                self._known[slug] = replace(known, member=member, record=record)
        except BaseException:
            await self._views.give_back(known.slug_key, view.alias_id)
            raise
        if record is None or view.target_id != known.file_id or view.user_id != known.user_id:
            await self.hand_back(slug, opened, address)
            return None
        return opened, record

    async def hand_back(self, slug: str, opened: Opened, address: str | None) -> None:
        """A request ``open_known`` opened goes to aiohttp's handling after all: the slug is
        forgotten, its view given back, and the request it took from ``address``'s bucket
        counted for that handling, which opens the alias again."""
        self._known.pop(slug, None)
        self._handing_back(self._bucket(address))
        await self._views.give_back(opened.slug_key, opened.alias_id)

    def _handing_back(self, bucket: str | None) -> None:
        if bucket is None or self._rate is None:
            return
        if len(self._taken_for_hand_back) >= _BUCKETS_KEPT:
            self._taken_for_hand_back.clear()  # at worst a few requests not taken twice
        self._taken_for_hand_back[bucket] = self._taken_for_hand_back.get(bucket, 0) + 1

    def _taken_already(self, bucket: str) -> bool:
        """Whether a request from ``bucket`` was taken already, by the lane, which handed it
        back; counted off when so."""
        left = self._taken_for_hand_back.get(bucket)
        if not left:
            return False
        if left == 1:
            del self._taken_for_hand_back[bucket]
        else:
            self._taken_for_hand_back[bucket] = left - 1
        return True

    def _bucket(self, address: str | None) -> str | None:
        """The unit an address is counted in (``login_throttle.address_bucket``), remembered
        for the addresses seen: a client sends many requests from one address, and parsing it
        again for each is work the answer does not need."""
        try:
            return self._buckets[address]
        except KeyError:
            pass
        if len(self._buckets) >= _BUCKETS_KEPT:
            self._buckets.clear()
        bucket = self._buckets[address] = address_bucket(address)
        return bucket

    def now_ms(self) -> int:
        """The time the public pages say how long ago things were from."""
        return self._clock.now_ms()

    async def count(self, opened: Opened) -> bool:
        """Count the view of a request opened without it (a conditional one, whose answer was
        not known to be a 200 or 206): whether the alias may still serve it."""
        view, _ = await self._views.view(
            opened.slug_key,
            self._clock.now_ms(),
            count=True,
            alias_id=opened.alias_id,
            password_hash=opened.password_hash,
        )
        return view.status not in (UNUSABLE, PASSWORD)

    async def give_back(self, opened: Opened) -> None:
        """Take back the view counted for an answer that was not served."""
        await self._views.give_back(opened.slug_key, opened.alias_id)

    # -- what it reaches -------------------------------------------------------------------------

    async def file(self, opened: Opened, item_id: str | None = None) -> FileRecord:
        """The file an alias is of (also at its own id: a link's video preview), or
        (``item_id``) one in the subtree of the folder it is of; 404 ``alias_not_found`` for
        anything else."""
        if item_id is None or item_id == opened.target_id:
            record = await self._reach.shared_file(opened.user_id, opened.target_id, None)
        elif opened.target_id.startswith("fld_"):
            record = await self._reach.shared_file(opened.user_id, item_id, opened.target_id)
        else:
            record = None
        if record is None:
            raise _not_found()
        return record

    async def folder(self, opened: Opened, item_id: str | None = None) -> list[FolderRecord]:
        """The folder an alias is of, or (``item_id``) one in its subtree, with its parents up
        to the aliased folder (the folder first); 404 ``alias_not_found`` for anything else."""
        lineage = None
        if opened.target_id.startswith("fld_"):
            folder_id = item_id or opened.target_id
            lineage = await self._reach.shared_folder(opened.user_id, folder_id, opened.target_id)
        if lineage is None:
            raise _not_found()
        return lineage

    async def contents(
        self, opened: Opened, folder_id: str, folder_limit: int, limit: int, after: str | None
    ) -> tuple[FolderPage, FilePage]:
        """A shared folder's folders and a page of its files; 404 when it is gone meanwhile."""
        found = await self._reach.shared_contents(
            opened.user_id, folder_id, folder_limit, limit, after
        )
        if found is None:
            raise _not_found()
        return found

    def public_etag(self, record: FileRecord) -> str:
        """The ETag of ``record``'s bytes on the public side: opaque, the same on every worker
        and instance, changing when the bytes do."""
        etag = self._etags.get(record.sha256)
        if etag is None:
            if len(self._etags) >= _KNOWN_KEPT:
                self._etags.clear()
            digest = hmac.new(self._etag_key, record.sha256.encode(), hashlib.sha256)
            etag = self._etags[record.sha256] = f'"{digest.hexdigest()[:32]}"'
        return etag

    # -- passwords and cookies -----------------------------------------------------------------

    async def _check(
        self, alias_id: str, bucket: str | None, password: str, password_hash: str
    ) -> None:
        """Check a password, throttled as logins are (``service.auth.login_throttle``): each
        attempt is reserved before bcrypt on three counts, and a wrong one keeps them, a right
        one gives them back. The count of this alias from this address is the low bound a
        guesser meets first, and it holds back that address only; the alias's count over every
        address is a much higher ceiling, for a guess spread over many addresses; the
        address's count over every alias bounds one guesser trying many links."""
        settings = self._settings
        counters = []
        if settings.failures_per_alias_address and bucket is not None:
            counters.append(
                (
                    self._counters.alias_guesses_by_alias_address(alias_id, bucket),
                    settings.failures_per_alias_address,
                )
            )
        if settings.failures_per_alias:
            counters.append(
                (self._counters.alias_guesses_by_alias(alias_id), settings.failures_per_alias)
            )
        if settings.failures_per_address and bucket is not None:
            counters.append(
                (self._counters.alias_guesses_by_address(bucket), settings.failures_per_address)
            )
        reserved: list[str] = []
        if counters:
            waits = await self._counters.reserve(counters, settings.window_seconds * 1000)
            reserved = [name for (name, _), wait in zip(counters, waits, strict=True) if not wait]
            if len(reserved) < len(counters):
                if reserved:
                    await self._counters.release(reserved)
                retry_after = max(1, math.ceil(max(waits) / 1000))
                raise ApiError(
                    Code.ALIAS_PASSWORD_THROTTLED,
                    f"Too many wrong passwords for this link or from this address. Retry in "
                    f"{retry_after} s.",
                    details={"retry_after_seconds": retry_after},
                    headers={"Retry-After": str(retry_after)},
                )
        try:
            right = await self._passwords.verify(password, password_hash)
        except BaseException:
            if reserved:
                await self._counters.release(reserved)
            raise
        if not right:
            raise ApiError(Code.ALIAS_PASSWORD_INVALID)
        if reserved:
            await self._counters.release(reserved)

    def view_grant(self, opened: Opened, file_address: str, address: str | None) -> str:
        """The grant cookie for the view just counted of ``opened`` at ``file_address`` (the
        path a browser opened a sound or video at), from the client ``address``."""
        expires = self._clock.now_ms() + VIEW_GRANT_SECONDS * 1000
        signature = self._grant_signature(
            opened.alias_id, opened.slug_key, file_address, self._bucket(address), expires
        )
        return f"{opened.alias_id}.{expires}.{signature}"

    def _granted(
        self, key: str, bucket: str | None, now: int, file_address: str, values: list[str]
    ) -> str | None:
        """The alias id of the first of ``values`` that is a grant, unexpired, for the slug
        ``key``, ``file_address`` and ``bucket``; None when none is."""
        for value in values[:_GRANTS_CHECKED]:
            shape = _GRANT.fullmatch(value)
            if shape is None:
                continue
            alias_id, expires, signature = shape.group(1), int(shape.group(2)), shape.group(3)
            if expires <= now:
                continue
            expected = self._grant_signature(alias_id, key, file_address, bucket, expires)
            if hmac.compare_digest(expected, signature):
                return alias_id
        return None

    def _grant_signature(
        self, alias_id: str, key: str, file_address: str, bucket: str | None, expires: int
    ) -> str:
        # "view|" first: a password cookie's signed text starts with the alias id, never so.
        signed = f"view|{alias_id}|{key}|{file_address}|{bucket or ''}|{expires}".encode()
        return hmac.new(self._cookie_key, signed, hashlib.sha256).hexdigest()

    def _signature(self, opened: Opened, expires: int, tag: str) -> str:
        signed = f"{opened.alias_id}|{opened.slug_key}|{expires}|{tag}".encode()
        return hmac.new(self._cookie_key, signed, hashlib.sha256).hexdigest()

    async def _cookie(self, opened: Opened, password_hash: str, now: int) -> str:
        expires = now + COOKIE_SECONDS * 1000
        tag = _tag(password_hash)
        return f"{expires}.{tag}.{self._signature(opened, expires, tag)}"

    async def _cookie_holds(
        self, cookie: str, opened: Opened, password_hash: str, now: int
    ) -> bool:
        """Whether ``cookie`` was given for this alias and its password, and has not expired."""
        shape = _COOKIE.fullmatch(cookie)
        if shape is None:
            return False
        expires, tag = int(shape.group(1)), shape.group(2)
        if expires <= now or not hmac.compare_digest(tag, _tag(password_hash)):
            return False
        expected = self._signature(opened, expires, tag)
        return hmac.compare_digest(expected, shape.group(3))


def _too_many(retry_after: int) -> ApiError:
    retry_after = max(1, retry_after)
    return ApiError(
        Code.RATE_LIMITED,
        f"Too many requests from this address. Retry in {retry_after} s.",
        details={"retry_after_seconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )
