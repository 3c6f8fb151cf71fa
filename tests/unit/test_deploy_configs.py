"""The example proxy configurations in ``deploy/`` agree on the headers that keep a client from
choosing who it is or what is checked: the same identity headers copied from the check, the same
overrides cleared, the same credential removed before another service. Read as text and YAML
here, in the quick loop; ``tests/system/deploy/`` runs each with the real proxy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
IDENTITY = [
    "X-Auth-User-Id",
    "X-Auth-Key-Id",
    "X-Auth-Credential",
    "X-Auth-Permissions",
    "X-Auth-Folder-Ids",
]
CLEARED = {
    "Forwarded",
    "X-HTTP-Method-Override",
    "X-Method-Override",
    "X-HTTP-Method",
    "X-Original-URL",
    "X-Rewrite-URL",
}
CREDENTIAL = {"X-API-Key", "Authorization", "X-Required-Permission"}


def traefik(name: str) -> Any:
    return yaml.safe_load((DEPLOY / "traefik" / name).read_text())


def caddy(name: str) -> str:
    return (DEPLOY / "caddy" / name).read_text()


def removed_upstream(text: str) -> set[str]:
    return set(re.findall(r"^\s*header_up -(\S+)$", text, re.MULTILINE))


@pytest.mark.parametrize("name", ["filehost.yml", "forward-auth.yml"])
def test_traefik_clears_the_same_overrides_as_the_tested_proxies(name: str) -> None:
    clean = traefik(name)["http"]["middlewares"]["filehost-clean"]["headers"]
    assert clean["customRequestHeaders"] == dict.fromkeys(CLEARED, "")
    for router in traefik(name)["http"]["routers"].values():
        assert router["middlewares"][0] == "filehost-clean"
        assert router["tls"] == {}


def test_traefik_forward_auth_sends_only_the_credential_and_copies_the_identity() -> None:
    middlewares = traefik("forward-auth.yml")["http"]["middlewares"]
    check = middlewares["filehost-check"]["forwardAuth"]
    assert check["authRequestHeaders"] == ["X-API-Key", "Authorization"]
    assert check["authResponseHeaders"] == IDENTITY
    assert check["trustForwardHeader"] is False
    dropped = middlewares["filehost-drop-credential"]["headers"]["customRequestHeaders"]
    assert dropped == dict.fromkeys(CREDENTIAL, "")
    files = traefik("forward-auth.yml")["http"]["routers"]["files"]
    assert files["middlewares"] == ["filehost-clean", "filehost-check", "filehost-drop-credential"]


def test_caddy_forward_auth_copies_the_identity_and_removes_what_a_client_sent() -> None:
    text = caddy("forward-auth.Caddyfile")
    copied = re.findall(r"^\s*copy_headers (.+)$", text, re.MULTILINE)
    assert [line.split() for line in copied] == [IDENTITY]
    assert set(re.findall(r"^\s*request_header -(\S+)$", text, re.MULTILINE)) == set(IDENTITY)
    assert removed_upstream(text) >= CLEARED | CREDENTIAL | {"X-Original-Method", "X-Original-URI"}
    assert text.count("import no_overrides") == 3  # the service's own routes, the check, the app


def test_caddy_clears_the_overrides_in_front_of_the_whole_service() -> None:
    assert removed_upstream(caddy("Caddyfile")) == CLEARED


@pytest.mark.parametrize(
    "path",
    [
        DEPLOY / "nginx" / "filehost.conf",
        DEPLOY / "nginx" / "forward-auth.conf",
        DEPLOY / "caddy" / "Caddyfile",
        DEPLOY / "caddy" / "forward-auth.Caddyfile",
        DEPLOY / "traefik" / "traefik.yml",
    ],
    ids=lambda path: f"{Path(path).parent.name}/{Path(path).name}",
)
def test_each_example_says_to_trust_the_proxy_for_the_client_address(path: Path) -> None:
    assert "FILEHOST_TRUSTED_PROXIES" in path.read_text()
