"""Fixtures of the single sign-on tests: one OpenID provider per test module (its process is
the slow part), a service signed in to it, and a browser for each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.oidc_provider import TEST_KEYS, Provider, SignIn, running_provider


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with running_provider() as running:
        yield running


@pytest.fixture
async def sso_api(make_api: Any, provider: Provider) -> Api:
    api: Api = await make_api(**provider.settings(secrets_key=TEST_KEYS))
    return api


@pytest.fixture
async def person(sso_api: Api) -> AsyncIterator[SignIn]:
    signing_in = SignIn(sso_api.client)
    yield signing_in
    await signing_in.close()
