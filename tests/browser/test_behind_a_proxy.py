"""The dashboard through each shipped proxy configuration, in headless Chromium: a real ``serve``
behind ``deploy/nginx/filehost.conf``, ``deploy/caddy/Caddyfile`` or
``deploy/traefik/filehost.yml`` over HTTPS (``tests/support/proxies.py``). The certificate comes
from the test's own CA, which Chromium is told to accept; everything else is as a person sees it.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from tests.support.browser import (
    DESKTOP,
    TIMEOUT_MS,
    create_key,
    file_row,
    open_files_page,
    screenshot,
    sign_in,
    upload_item,
)
from tests.support.processes import PASSWORD, create_user
from tests.support.proxies import (
    KINDS,
    Certificates,
    Product,
    make_certificates,
    running_product,
)
from tests.support.redis import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")
_emails = itertools.count(1)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module", params=KINDS)
def product(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
    certificates: Certificates,
) -> Iterator[Product]:
    if redis_server.process is None:  # another test stopped it and failed before restarting
        redis_server.start()
    kind = str(request.param)
    directory = tmp_path_factory.mktemp(f"dashboard-behind-{kind}")
    with running_product(kind, directory, redis_server.url, certificates) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def page_behind(browser: Browser, product: Product) -> AsyncIterator[tuple[Page, list[str]]]:
    context = await browser.new_context(
        base_url=product.proxy.base, viewport=DESKTOP, ignore_https_errors=True
    )
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    page = await context.new_page()
    reported: list[str] = []
    page.on("console", lambda message: reported.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: reported.append(f"pageerror: {error}"))
    page.on("request", lambda request: reported.append(f"request: {request.url}"))
    try:
        yield page, reported
    finally:
        await context.close()


async def test_sign_in_see_the_keys_page_and_create_a_key_through_the_proxy(
    page_behind: tuple[Page, list[str]], product: Product, certificates: Certificates
) -> None:
    page, reported = page_behind
    email = f"browser{next(_emails)}@example.com"
    create_user(product.env, email)

    await sign_in(page, email, PASSWORD)
    secret = await create_key(page, "made through the proxy", ["files.read"])
    await expect(page.locator("#keys-body tr")).to_have_count(1)
    await screenshot(page, f"keys-behind-{product.proxy.kind}")

    # The page's key works through the same proxy, as a script would use it.
    connector = aiohttp.TCPConnector(ssl=certificates.client_context())
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.get(
            product.proxy.base + "/api/v1/files", headers={"X-API-Key": secret}
        ) as response:
            assert response.status == 200
    requests = [line.removeprefix("request: ") for line in reported if line.startswith("request:")]
    assert requests and all(url.startswith(product.proxy.base + "/") for url in requests)
    assert [line for line in reported if not line.startswith("request:")] == []


async def test_a_large_file_goes_up_resumably_and_comes_back_through_the_proxy(
    page_behind: tuple[Page, list[str]], product: Product, tmp_path: Path
) -> None:
    """The files page's resumable upload (tus ``PATCH``es) and its download (a ticket posted in a
    form into a hidden frame) through the proxy, byte for byte."""
    page, reported = page_behind
    email = f"browser{next(_emails)}@example.com"
    create_user(product.env, email)
    await open_files_page(page, email, PASSWORD)
    name = "film.mp4"
    data = os.urandom(9 * 1024 * 1024)  # past the page's 8 MiB: it goes up resumably
    chosen = tmp_path / name
    chosen.write_bytes(data)

    await page.set_input_files("#file-picker", files=[chosen])
    await expect(upload_item(page, name).locator(".upload-status")).to_have_text(
        f"Uploaded {name} (9.0 MiB) into the top level."
    )
    row = file_row(page, name)
    async with page.expect_download() as info:
        await row.get_by_role("button", name=re.compile("^Download")).click()
    download = await info.value

    assert download.suggested_filename == name
    assert Path(await download.path()).read_bytes() == data
    requests = [line.removeprefix("request: ") for line in reported if line.startswith("request:")]
    assert any("/api/v1/uploads/" in url for url in requests), requests
    assert all(url.startswith(product.proxy.base + "/") for url in requests)
    assert [line for line in reported if not line.startswith("request:")] == []
