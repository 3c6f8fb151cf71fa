"""The requests to the OpenID provider (``service.auth.oidc_provider.ProviderHttp``), made with
aiohttp's client: one connection pool per worker, opened on first use and closed with the
application; every request bounded as a whole (connecting, sending, reading) by the time it is
given, its answer read up to ``MAX_ANSWER_BYTES``. Anything but a JSON object in time is
``ProviderUnreachable``: the policy answers it as 503 ``sso_unavailable``."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote_plus

import aiohttp
import orjson

from service.auth.oidc_provider import ProviderUnreachable

MAX_ANSWER_BYTES = 1 << 20  # discovery documents and key sets are a few KiB


class AiohttpProviderHttp:
    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # No cookies kept between requests; redirects are not followed (an endpoint that
            # moved is a discovery document to fix, not a hop to make).
            self._session = aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(), headers={"Accept": "application/json"}
            )
        return self._session

    async def get_json(self, url: str, within: float) -> dict[str, Any]:
        status, answer = await self._request("GET", url, None, None, within)
        if status != 200:
            raise ProviderUnreachable(f"GET {url} answered {status}")
        return answer

    async def post_form(
        self,
        url: str,
        form: Mapping[str, str],
        basic_auth: tuple[str, str] | None,
        within: float,
    ) -> tuple[int, dict[str, Any]]:
        return await self._request("POST", url, form, basic_auth, within)

    async def _request(
        self,
        method: str,
        url: str,
        form: Mapping[str, str] | None,
        basic_auth: tuple[str, str] | None,
        within: float,
    ) -> tuple[int, dict[str, Any]]:
        headers = {}
        if basic_auth is not None:
            # RFC 6749 2.3.1: the id and secret form-encoded, then joined for Basic.
            pair = ":".join(quote_plus(part) for part in basic_auth)
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            async with asyncio.timeout(within):
                async with self._client().request(
                    method, url, data=form, headers=headers, allow_redirects=False
                ) as response:
                    body = await response.content.read(MAX_ANSWER_BYTES + 1)
                    status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as failure:
            raise ProviderUnreachable(f"{method} {url}: {type(failure).__name__}") from None
        if len(body) > MAX_ANSWER_BYTES:
            raise ProviderUnreachable(f"{method} {url}: the answer is too large")
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise ProviderUnreachable(f"{method} {url} answered no JSON ({status})") from None
        if not isinstance(answer, dict):
            raise ProviderUnreachable(f"{method} {url} answered no JSON object ({status})")
        return status, answer

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
