"""The processes a run starts: the Redis-compatible server, the service and the floors, each on a
free loopback port, each stopped by pid; and the CPU time of a server's process tree."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from benchmark import ROOT, SCRIPTS
from tests.support.redis import server_binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited early with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} in time")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(workdir: Path) -> Iterator[tuple[str, redis.Redis]]:
    port = free_port()
    process = subprocess.Popen(
        [
            server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url, decode_responses=True)
        yield url, client
        client.close()
    finally:
        stop(process)


def package_command(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``module`` of this package in a process of its
    own (the floors, the login storm)."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{SCRIPTS}{os.pathsep}{path}" if path else str(SCRIPTS)}
    return [sys.executable, "-m", module, *args], env


def service_command(
    redis_url: str,
    port: int,
    workers: int,
    rate_limits: bool = True,
    mode: str = "single",
    lane: bool = True,
    extra: dict[str, str] | None = None,
    data_dir: Path | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The service's command line and environment: its production defaults (access log at
    INFO, metrics on, rate limits on, the gateway lane on unless ``lane`` is False, a public
    URL), stated so
    that the caller's environment cannot change them; then ``extra``. ``data_dir`` holds the
    files' bytes (the bench alias's file, written there by ``benchmark.seeding``)."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "FILEHOST_PORT": str(port),
        "FILEHOST_WORKERS": str(workers),
        "FILEHOST_LOG_LEVEL": "INFO",
        "FILEHOST_METRICS": "on",
        # Limits stay on, so their cost is measured, at a rate no wrk run can reach (one key
        # sends every request); the "limits off" row shows what folding them in costs. The
        # burst keeps the bucket's tolerance at 1 s, far above the workers' clock differences.
        "FILEHOST_RATE_LIMIT_PER_SECOND": "1000000" if rate_limits else "0",
        "FILEHOST_RATE_LIMIT_BURST": "1000000",
        # The same for the public alias pages' rate per client address (wrk is one address).
        "FILEHOST_ALIAS_RATE_PER_SECOND": "1000000" if rate_limits else "0",
        "FILEHOST_ALIAS_RATE_BURST": "1000000",
        "FILEHOST_REDIS_MODE": mode,
        "FILEHOST_GATEWAY_LANE": "on" if lane else "off",
        # As a deployment sets it (passkeys need it); a file's url is made from it, and without
        # it the lane leaves GET /files to aiohttp, which reads the request's origin instead.
        "FILEHOST_PUBLIC_URL": f"http://127.0.0.1:{port}",
    }
    if data_dir is not None:
        env["FILEHOST_DATA_DIR"] = str(data_dir)
    env.update(extra or {})
    return [sys.executable, "-m", "service", "serve"], env


def floor_command(
    kind: str, port: int, workers: int, redis_url: str, entry: str
) -> tuple[list[str], dict[str, str]]:
    """The command line of floor F0 (``bare``) or F1 (``lookup``): ``benchmark.floors``."""
    args = [kind, "--port", str(port), "--workers", str(workers)]
    if kind == "lookup":
        args += ["--redis-url", redis_url, "--entry", entry]
    return package_command("benchmark.floors", *args)


@contextmanager
def server(
    command: list[str], env: dict[str, str], port: int, log: Path | None = None
) -> Iterator[tuple[str, int]]:
    """Start a server on ``port`` (its output to ``log``); yield its URL and pid."""
    with open(log or os.devnull, "ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop(process)


@contextmanager
def service(
    redis_url: str,
    workers: int,
    *,
    log: Path | None = None,
    rate_limits: bool = True,
    mode: str = "single",
    lane: bool = True,
    extra: dict[str, str] | None = None,
    data_dir: Path | None = None,
) -> Iterator[tuple[str, int]]:
    port = free_port()
    command, env = service_command(
        redis_url, port, workers, rate_limits, mode, lane, extra, data_dir
    )
    with server(command, env, port, log) as running:
        yield running


@contextmanager
def floor(kind: str, redis_url: str, workers: int, entry: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    command, env = floor_command(kind, port, workers, redis_url, entry)
    with server(command, env, port) as running:
        yield running


@contextmanager
def upload_floor(directory: Path, workers: int) -> Iterator[tuple[str, int]]:
    """The bare upload receiver (``benchmark.upload_floor``), storing into ``directory``."""
    port = free_port()
    command, env = package_command(
        "benchmark.upload_floor",
        *("--port", str(port), "--workers", str(workers), "--directory", str(directory)),
    )
    with server(command, env, port) as running:
        yield running


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` and all its descendants (the workers)."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, cpu seconds)
    ticks = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        stats[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    tree, total, grew = {pid}, 0.0, True
    while grew:
        grew = False
        for child, (parent, _) in stats.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grew = True
    for member in tree:
        total += stats.get(member, (0, 0.0))[1]
    return total


NGINX_CONFIG = """\
worker_processes {workers};
{user}pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {directory}/access.log combined buffer=32k flush=1s;
    sendfile on;
    tcp_nopush on;
    # Request bodies are written here, then renamed into place by PUT: the same filesystem as
    # the files, so the rename is a rename and not a copy.
    client_body_temp_path {directory}/body-temp;
    client_max_body_size 0;
    # nginx at its best as a floor: its default 16 KiB body buffer writes an upload to the temp
    # file in 16 KiB pieces; with 1 MiB it moved 100 MiB uploads about twice as fast here.
    client_body_buffer_size 1m;
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {directory}/www;
        location /put/ {{
            dav_methods PUT DELETE;
            dav_access user:rw;
        }}
    }}
}}
"""


@contextmanager
def nginx(directory: Path, workers: int) -> Iterator[tuple[str, int, Path]]:
    """Debian's nginx on a free loopback port with a configuration of its own in ``directory``:
    static files from ``<directory>/www`` with ``sendfile``, and WebDAV ``PUT`` under ``/put/``
    (bodies through ``<directory>/body-temp``, on the same filesystem). Yields its URL, its
    master's pid and the ``www`` directory."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    www = directory / "www"
    (www / "put").mkdir(parents=True, exist_ok=True)
    (directory / "body-temp").mkdir(exist_ok=True)
    # Run as root, nginx's workers would switch to nobody, who may not write our directories.
    user = f"user {pwd.getpwuid(os.getuid()).pw_name};\n" if os.getuid() == 0 else ""
    config = directory / "nginx.conf"
    config.write_text(
        NGINX_CONFIG.format(workers=workers, user=user, directory=directory, port=port)
    )
    command = [binary, "-p", str(directory), "-c", str(config), "-e", str(directory / "error.log")]
    process = subprocess.Popen(
        [*command, "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}", process.pid, www
    finally:
        stop(process)
