"""The in-process app as a client of the API sees it: the ``Api`` client, the test server that
serves through production's runner, and the checks every API test makes of an answer."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from service.api._aiohttp import EnvelopeAppRunner

PASSWORD = "correct horse battery staple"

# The spec's ten permission names in its order, written out so tests check the code against it.
SPEC_PERMISSIONS = [
    "files.read",
    "files.write",
    "folders.read",
    "folders.write",
    "aliases.read",
    "aliases.write",
    "keys.read",
    "keys.write",
    "settings.read",
    "settings.write",
]


class Api:
    """A client of the API, as an integrator would write one."""

    def __init__(self, client: Any, app: Any) -> None:
        self.client = client
        self.app = app

    async def create_user(self, email: str, password: str = PASSWORD) -> Any:
        from service.api.context import POLICY

        return await self.app[POLICY].users.create_user(email, password)

    async def login(self, email: str, password: str = PASSWORD) -> str:
        response = await self.client.post(
            "/api/v1/auth/login", json={"email": email, "password": password}
        )
        assert response.status == 200, await response.text()
        return (await response.json())["data"]["token"]

    async def user_with_session(self, email: str = "alice@example.com") -> str:
        await self.create_user(email)
        return await self.login(email)

    async def create_key(
        self,
        token: str,
        *,
        name: str = "integration",
        permissions: list[str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        body = {"name": name, "permissions": permissions or ["files.read"], **extra}
        response = await self.client.post(
            "/api/v1/keys", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status == 201, await response.text()
        return (await response.json())["data"]

    async def files(self, *, key: str | None = None, token: str | None = None) -> Any:
        headers = {}
        if key is not None:
            headers["X-API-Key"] = key
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return await self.client.get("/api/v1/files", headers=headers)


class EnvelopeTestServer(TestServer):
    """aiohttp's test server, serving through the runner production uses: the service's
    request handling (envelope, headers, trace, metrics) is the server's wrapper, not a
    middleware, so a plain test server would leave it out."""

    async def _make_runner(self, **kwargs: Any) -> EnvelopeAppRunner:
        return EnvelopeAppRunner(self.app, **kwargs)


async def serve_app(aiohttp_client: Any, app: web.Application) -> Any:
    """A test client for ``app``, served as production serves it."""
    return await aiohttp_client(EnvelopeTestServer(app))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is the error envelope with this status and code; returns the error."""
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def path_of(url: str) -> str:
    """The path of an absolute URL the service answered (a file's, an upload's): the test
    client takes paths."""
    return URL(url).path


async def my_session_id(api: Api, token: str) -> str:
    """The public id of the session ``token`` opened, as ``GET /auth/sessions`` lists it."""
    response = await api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    return str(next(s["id"] for s in (await response.json())["data"]["sessions"] if s["current"]))
