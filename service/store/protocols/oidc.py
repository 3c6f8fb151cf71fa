"""What single sign-on asks of its store: the trips to the provider between start and callback,
the verified sign-ins waiting for their exchange (each taken once), the identities linked to
accounts, the provider's sessions (back-channel logout) and the logout tokens already used."""

from __future__ import annotations

from typing import Protocol

from service.domain.audit_events import EventBatch
from service.domain.oidc import Identity


class OidcStore(Protocol):
    async def keep_pending(self, state_digest: str, pending: str, lasting_ms: int) -> None: ...

    async def take_pending(self, state_digest: str) -> str | None: ...

    async def keep_signed_in(self, code_digest: str, signed_in: str, lasting_ms: int) -> None: ...

    async def peek_signed_in(self, code_digest: str) -> str | None: ...
    async def take_signed_in(self, code_digest: str) -> str | None: ...

    async def linked_account(self, identity_digest: str) -> str | None: ...

    async def link(
        self, user_id: str, identity_digest: str, identity: Identity, events: EventBatch | None
    ) -> str: ...

    async def identities(self, user_id: str) -> list[Identity]: ...

    async def unlink(
        self, user_id: str, identity_id: str, events: EventBatch
    ) -> tuple[str, Identity | None]: ...

    async def provider_sessions(self, sid_digest: str) -> list[tuple[str, str]]: ...

    async def first_use(self, jti_digest: str, lasting_ms: int) -> bool: ...
