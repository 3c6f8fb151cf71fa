"""Keys reported leaked (``POST /keys/leaked``, no credential): whoever found a secret of ours
(a person, a secret scanner) reports it, and every live key among the values is revoked at
once, whichever account holds it, recorded for its owner. Reports are bounded per client
address; the answer is the same whatever was found."""

from __future__ import annotations

from service.auth.audit import AuditTrail
from service.auth.login_throttle import address_bucket
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.audit_events import EventBatch
from service.domain.outcomes import GONE_LEAKED
from service.domain.records import KeyRecord
from service.errors import ApiError, Code
from service.store.protocols import ApiKeyStore, CounterStore

# Reports accepted per client address (IPv6: per /64) in a window that starts with the first.
# Each report may name 100 secrets; a scanner sends a handful.
LEAK_REPORTS_PER_ADDRESS = 10
LEAK_REPORT_WINDOW_SECONDS = 60


class LeakReports:
    def __init__(
        self,
        api_keys: ApiKeyStore,
        counters: CounterStore,
        trail: AuditTrail,
        clock: Clock,
    ) -> None:
        self._api_keys = api_keys
        self._counters = counters
        self._trail = trail
        self._clock = clock

    async def report_leaked(
        self, secrets: list[str], client_address: str | None, user_agent: str | None = None
    ) -> int:
        """Revoke every key one of ``secrets`` opens now (any account's; a secret still in its
        grace after a roll revokes its key too), each recorded for its owner as
        ``key.revoked_as_leaked`` with a ``leak_report`` actor just before it is revoked.
        Returns how many values were received, whatever was found, so the answer can't tell
        which were live. Limited per client address (``LEAK_REPORTS_PER_ADDRESS`` in
        ``LEAK_REPORT_WINDOW_SECONDS``, IPv6 per /64): 429 ``leak_reports_throttled`` past it,
        before anything is looked up."""
        await self._count_leak_report(client_address)
        digests = list(
            dict.fromkeys(
                credentials.digest(secret)
                for secret in secrets
                if credentials.is_well_formed(secret, credentials.API_KEY_KIND)
            )
        )
        now = self._clock.now_ms()
        origin = audit.Origin(
            None, client_address, user_agent[: audit.MAX_USER_AGENT_LENGTH] if user_agent else None
        )

        def events_for(record: KeyRecord) -> EventBatch:
            return self._trail.batch(
                now,
                audit.event(
                    audit.KEY_REVOKED_AS_LEAKED,
                    now,
                    origin,
                    actor=audit.leak_report_actor(client_address),
                    target=audit.key_target(record.id, record.name, record.key_prefix),
                    changes={"revoked_reason": "reported_leaked"},
                ),
            )

        for user_id, key_id in dict.fromkeys(await self._api_keys.find_live(digests, now)):
            await self._api_keys.revoke(user_id, key_id, now, events_for, GONE_LEAKED)
        return len(secrets)

    async def _count_leak_report(self, client_address: str | None) -> None:
        bucket = address_bucket(client_address) or "unknown"
        window_ms = LEAK_REPORT_WINDOW_SECONDS * 1000
        wait_ms = await self._counters.reserve_one(
            self._counters.leak_reports_by_address(bucket), LEAK_REPORTS_PER_ADDRESS, window_ms
        )
        if wait_ms:
            retry_after = max(1, -(-wait_ms // 1000))
            raise ApiError(
                Code.LEAK_REPORTS_THROTTLED,
                f"Too many leak reports from this address. Retry in {retry_after} s.",
                details={"retry_after_seconds": retry_after},
                headers={"Retry-After": str(retry_after)},
            )
