"""The OpenID provider the single sign-on tests sign in at: npm's oidc-provider in
``tests/system/clients/oidc-provider/provider.mjs``, on a free loopback port, with one static
client, the test users (``alice`` verified, ``bob`` unverified, ``carol`` of another domain,
``dave`` and ``erin`` verified), and its loopback-only admin endpoints (rotate the signing key,
tamper with the next ID token, sign a back-channel logout token). And the sign-in an HTTP
client makes through it: start, the provider's login form, the callback, the exchange."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import aiohttp

from service.config.readers import Secret, secret_keys
from tests.support.mfa import SECRETS_KEY
from tests.support.node import NODE_ENV, npm_ci
from tests.support.redis import free_port

PROJECT = Path(__file__).resolve().parents[1] / "system" / "clients" / "oidc-provider"
CLIENT_ID = "filehost"
CLIENT_SECRET = "filehost-test-secret"
# The service's public URL in these tests: the provider sends the browser back there, and the
# test client takes that address's path to the in-process service.
PUBLIC_URL = "http://filehost.test"
CALLBACK = f"{PUBLIC_URL}/api/v1/auth/oidc/callback"
# The secrets key of the service under test (TOTP needs one).
TEST_KEYS = secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY)


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen[str]

    def settings(self, **more: Any) -> dict[str, Any]:
        """The service's setting overrides for single sign-on with this provider."""
        return {
            "public_url": PUBLIC_URL,
            "oidc_issuer": self.issuer,
            "oidc_client_id": CLIENT_ID,
            "oidc_client_secret": Secret(CLIENT_SECRET),
            **more,
        }

    async def _admin(self, path: str, form: dict[str, str] | None = None) -> Any:
        async with aiohttp.ClientSession() as session:
            call = session.post(self.issuer + path, data=form or {})
            async with call as response:
                assert response.status == 200, await response.text()
                return await response.json()

    async def rotate(self) -> str:
        """A new signing key, published first; the old one stays published. Its kid."""
        return str((await self._admin("/admin/rotate"))["kid"])

    async def tamper(self, **change: Any) -> None:
        """The next ID token becomes: ``claims`` changed (None drops one), signed by ``key``
        ``foreign`` (a key never published) or the provider's, or ``alg`` ``none``."""
        await self._admin("/admin/tamper", {"change": json.dumps(change)})

    async def logout_token(self, **claims: str) -> str:
        """A back-channel logout token signed with the provider's key (``sub``, ``sid``,
        ``jti``, ``nonce`` as given)."""
        query = "&".join(f"{name}={value}" for name, value in claims.items())
        return str((await self._admin(f"/admin/logout-token?{query}"))["logout_token"])


def install_provider() -> None:
    """``npm ci`` in the provider's project, once for its lock file: the test modules that start
    a provider may run at once in several xdist workers, and a second ``npm ci`` would delete the
    node_modules a running provider reads from. A file lock orders them; a stamp of the lock
    file's digest in node_modules says the install is done."""
    digest = hashlib.sha256((PROJECT / "package-lock.json").read_bytes()).hexdigest()
    stamp = PROJECT / "node_modules" / ".filehost-installed"
    lock_path = Path(tempfile.gettempdir()) / "filehost-oidc-provider-npm.lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if stamp.exists() and stamp.read_text() == digest:
                return
            npm_ci(PROJECT)
            stamp.write_text(digest)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def running_provider(public_url: str = PUBLIC_URL) -> Iterator[Provider]:
    """The test provider, its client's redirect and back-channel logout URIs under
    ``public_url``: by default a name only the tests' HTTP client resolves; a browser test
    passes the address it opens the dashboard at."""
    install_provider()
    port = free_port()
    callback = f"{public_url}/api/v1/auth/oidc/callback"
    backchannel = f"{public_url}/api/v1/auth/oidc/backchannel-logout"
    process = subprocess.Popen(
        ["node", "provider.mjs", str(port), callback, backchannel],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**NODE_ENV, "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("ready "), line
        yield Provider(line.split()[1], process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.asynccontextmanager
async def browser(client: Any) -> AsyncIterator[SignIn]:
    """A fresh browser (no session at the provider yet) on the service's test client."""
    person = SignIn(client)
    try:
        yield person
    finally:
        await person.close()


def fragment(location: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(location).fragment))


async def at_provider(
    browser: aiohttp.ClientSession, url: str, user: str, mfa: bool = False
) -> str:
    """Follow the provider's redirects from its authorization URL, signing in as ``user`` at
    its login form, until it sends the browser back to the service: that callback URL."""
    for _ in range(10):
        if url.startswith(PUBLIC_URL):
            return url
        async with browser.get(url, allow_redirects=False) as response:
            if response.status in (302, 303):
                url = urljoin(url, response.headers["Location"])
                continue
            assert response.status == 200, (url, response.status, await response.text())
            page = await response.text()
        assert 'name="login"' in page, page
        form = {"login": user, **({"mfa": "1"} if mfa else {})}
        action = url.split("?")[0] + "/login"
        async with browser.post(action, data=form, allow_redirects=False) as response:
            assert response.status in (302, 303), await response.text()
            url = urljoin(action, response.headers["Location"])
    raise AssertionError("the provider never sent the browser back")


class SignIn:
    """A person's browser: the test client (the service's cookies) and a cookie jar of its own
    at the provider (its session there)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.browser = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))

    async def close(self) -> None:
        await self.browser.close()

    async def start(self, purpose: str | None = None) -> str:
        path = "/api/v1/auth/oidc/start" + (f"?purpose={purpose}" if purpose else "")
        response = await self.client.get(path, allow_redirects=False)
        assert response.status == 302, await response.text()
        return str(response.headers["Location"])

    async def back(self, callback_url: str) -> dict[str, str]:
        """The service's callback, as the browser reaches it: the dashboard's fragment."""
        parts = urlsplit(callback_url)
        response = await self.client.get(f"{parts.path}?{parts.query}", allow_redirects=False)
        assert response.status == 302, await response.text()
        location = response.headers["Location"]
        assert location.startswith(f"{PUBLIC_URL}/#"), location
        return fragment(location)

    async def trip(
        self, user: str, purpose: str | None = None, mfa: bool = False
    ) -> dict[str, str]:
        """Start, sign in at the provider as ``user``, come back: the fragment."""
        url = await self.start(purpose)
        return await self.back(await at_provider(self.browser, url, user, mfa))

    async def exchange(self, code: str, token: str | None = None) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = await self.client.post(
            "/api/v1/auth/oidc/exchange", json={"code": code}, headers=headers
        )
        return response.status, await response.json()

    async def login(self, user: str, mfa: bool = False) -> dict[str, Any]:
        """The whole sign-in, which must succeed: the exchange's data."""
        found = await self.trip(user, mfa=mfa)
        assert "oidc_code" in found, found
        status, body = await self.exchange(found["oidc_code"])
        assert status == 200, body
        return dict(body["data"])
