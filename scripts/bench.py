"""Gateway benchmark: what authentication costs, as ratios to a floor measured in the same run.

Starts its own Redis-compatible server and the service (workers = cores), loads it with wrk from
a separate process on loopback only, and prints one table. Every run is bounded in time; every
process it starts is stopped by pid. Run it as ``scripts/bench`` (no arguments needed).

Floors, servers outside the service (``scripts/bench_floors.py``), measured beside every scenario:
  F0 bare aiohttp answering the same small envelope   F1 the same plus one pipelined HMGET
Scenarios, ``GET /api/v1/files`` (g, h: ``GET /api/v1/auth/verify``) at the same concurrency:
  b  X-API-Key holding files.read          c  Authorization: Bearer session
  d  unknown key of valid format (401)      e  malformed key, bad checksum (401)
  f  key lacking files.read (403)           g  forward-auth sub-request, X-API-Key (200)
  h  forward-auth sub-request, Bearer (200)
then b with rate limits off, b during a login storm, g on a Redis Cluster, and b and c again with
1,000,000 keys and 1,000,000 sessions loaded.

wrk runs without a Lua script: a ``response`` callback makes wrk build a table of every answer's
headers, which costs wrk (sharing the cores) more for the server sending more headers. Statuses
are checked without it: wrk counts the answers of 400 and above, and every access line the service
logged during a run must hold the scenario's status (``logged_statuses``).

``scripts/bench --instructions 1000`` instead counts the server's instructions per request of each
scenario under valgrind: repeatable to about 1% for the same number of requests (the per-second
background work is spread over however many requests a run makes, so compare counts made with
the same number), for comparing two versions of the code on a machine whose req/s drift.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson
import redis

from service.domain import credentials
from service.domain.permissions import to_mask
from service.store.embedded import find_server_binary
from service.store.fields import KEY_EXPIRED_GRACE_MS, SESSION_EXPIRED_GRACE_MS
from service.store.keys import RedisKeys

PASSWORD = "bench password 1234"
EMAIL = "bench@example.com"
PREFIX = "fh"
DAY_MS = 86_400_000


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
            find_server_binary(),
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


def service_command(
    redis_url: str, port: int, workers: int, rate_limits: bool = True, mode: str = "single"
) -> tuple[list[str], dict[str, str]]:
    """The service's command line and environment: its production defaults (access log at
    INFO, metrics on, rate limits on), stated so that the caller's environment cannot change
    them."""
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
        "FILEHOST_REDIS_MODE": mode,
    }
    return [sys.executable, "-m", "service", "serve"], env


def floor_command(
    kind: str, port: int, workers: int, redis_url: str, entry: str
) -> tuple[list[str], dict[str, str]]:
    """The command line of floor F0 (``bare``) or F1 (``lookup``): ``scripts/bench_floors.py``."""
    command = [sys.executable, str(ROOT / "scripts" / "bench_floors.py"), kind]
    command += ["--port", str(port), "--workers", str(workers)]
    if kind == "lookup":
        command += ["--redis-url", redis_url, "--entry", entry]
    return command, dict(os.environ)


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
) -> Iterator[tuple[str, int]]:
    port = free_port()
    command, env = service_command(redis_url, port, workers, rate_limits, mode)
    with server(command, env, port, log) as running:
        yield running


@contextmanager
def floor(kind: str, redis_url: str, workers: int, entry: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    command, env = floor_command(kind, port, workers, redis_url, entry)
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


# -- seeding ----------------------------------------------------------------------------------


def seed_account(redis_url: str, mode: str = "single") -> dict[str, str]:
    """One user, its keys and a session, written through the service's own code paths."""
    from service.auth.passwords import PasswordHasher
    from service.auth.policy import make_policy
    from service.clock import SystemClock
    from service.config import Settings
    from service.store.stores import open_stores
    from service.store.topology import connect_client

    async def run() -> dict[str, str]:
        settings = Settings(
            redis_url=redis_url, bcrypt_cost=12, redis_mode=mode, redis_timeout_seconds=2.0
        )
        client, close = connect_client(settings, redis_url)
        passwords = PasswordHasher(12, 1, 0)
        accounts = make_policy(open_stores(client, PREFIX), passwords, SystemClock(), settings)
        user = await accounts.users.create_user(EMAIL, PASSWORD)
        reader = await accounts.api_keys.create_key(user.id, "bench reader", ["files.read"], 30)
        other = await accounts.api_keys.create_key(user.id, "bench folders", ["folders.read"], 30)
        for n in range(8):
            await accounts.api_keys.create_key(user.id, f"filler {n}", ["files.read"], 30)
        session = await accounts.login.login(EMAIL, PASSWORD)
        passwords.close()
        await close()
        good = reader.secret
        return {
            "user_id": user.id,
            "key": good,
            "key_without_files_read": other.secret,
            "token": session.token,
            "unknown_key": credentials.generate_api_key(),
            "malformed_key": good[:-1] + ("A" if good[-1] != "A" else "B"),
        }

    return asyncio.run(run())


def _resp(*args: str | int) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def mass_insert(redis_url: str, commands: Iterator[bytes]) -> None:
    """Stream RESP commands into valkey-cli/redis-cli --pipe: fastest bulk load there is."""
    server = Path(find_server_binary())
    cli = next(
        (
            str(c)
            for c in (server.with_name("valkey-cli"), server.with_name("redis-cli"))
            if c.exists()
        ),
        shutil.which("redis-cli") or shutil.which("valkey-cli"),
    )
    if cli is None:
        raise RuntimeError("no valkey-cli/redis-cli found for bulk loading")
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    process = subprocess.Popen(
        [cli, "-h", "127.0.0.1", "-p", port, "--pipe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    batch: list[bytes] = []
    for command in commands:
        batch.append(command)
        if len(batch) >= 20_000:
            process.stdin.write(b"".join(batch))
            batch.clear()
    process.stdin.write(b"".join(batch))
    process.stdin.close()
    if process.wait(600) != 0:
        raise RuntimeError("bulk load failed")


def key_commands(count: int, keys_per_account: int = 100) -> Iterator[bytes]:
    """The exact layout ApiKeyStore.add writes, for ``count`` keys."""
    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    expires = now + 30 * DAY_MS
    mask = to_mask(["files.read"])
    for n in range(count):
        user = f"usr_bench{n // keys_per_account:017d}"
        key_id = f"key_bench{n:017d}"
        digest = os.urandom(32).hex()
        meta = orjson.dumps(
            {
                "name": f"key {n}",
                "prefix": "fhk_abcdefgh...",
                "p": mask,
                "c": now,
                "e": expires,
                "d": digest,
            }
        )
        yield _resp("HSET", names.account_keys(user), key_id, meta)
        yield _resp("ZADD", names.account_key_expiry(user), expires, key_id)
        entry = names.key_entry(digest)
        yield _resp("HSET", entry, "u", user, "k", key_id, "p", mask, "e", expires)
        yield _resp("PEXPIREAT", entry, expires + KEY_EXPIRED_GRACE_MS)


def session_commands(count: int, sessions_per_user: int = 4) -> Iterator[bytes]:
    """The exact layout SessionStore.add writes, for ``count`` sessions."""
    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    idle, absolute = now + DAY_MS, now + 7 * DAY_MS
    for n in range(count):
        user = f"usr_sess{n // sessions_per_user:018d}"
        digest = os.urandom(32).hex()
        kept_until = absolute + SESSION_EXPIRED_GRACE_MS
        yield _resp("ZADD", names.account_sessions(user), kept_until, digest)
        yield _resp("PEXPIREAT", names.account_sessions(user), kept_until)
        entry = names.session_entry(digest)
        yield _resp("HSET", entry, "u", user, "c", now, "a", absolute, "i", idle)
        yield _resp("PEXPIREAT", entry, idle + SESSION_EXPIRED_GRACE_MS)


# -- load -------------------------------------------------------------------------------------


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk(
    url: str,
    header: str | None,
    expected: int,
    seconds: int,
    connections: int,
    path: str = "/api/v1/files",
) -> dict[str, float]:
    """One wrk run; ``header`` may hold several headers separated by newlines. ``errors`` counts
    socket errors and the answers on the wrong side of 400 for ``expected`` (wrk counts those of
    400 and above); ``logged_statuses`` checks the service's answers to the exact status."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for line in (header or "").splitlines():
        command += ["-H", line]
    command.append(f"{url}{path}")
    # wrk's own CPU: it shares the cores with the servers, and answers with more headers cost it
    # more to read (the only child reaped during the run, so the children's total grows by it).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds + 60, check=True
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk_seconds = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    requests = float(re.search(r"(\d+) requests in", output).group(1))
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    at_least_400 = float(refused.group(1)) if refused else 0.0
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": _ms(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1)),
        "p99": _ms(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1)),
        "requests": requests,
        "errors": (at_least_400 if expected < 400 else requests - at_least_400)
        + (sum(int(g) for g in socket_errors.groups()) if socket_errors else 0),
        "wrk_us": wrk_seconds / max(requests, 1) * 1e6,
    }


# How long the service may take to write a request's access line (its buffer is flushed every
# 0.1 s), with a margin.
LOG_SETTLE_SECONDS = 0.3


def logged_statuses(log: Path, offset: int) -> dict[int, int]:
    """How many access lines of each status the service wrote to ``log`` after ``offset``."""
    counts: dict[int, int] = {}
    with log.open("rb") as lines:
        lines.seek(offset)
        for line in lines:
            if b'"msg":"request"' in line:
                status = orjson.loads(line)["status"]
                counts[status] = counts.get(status, 0) + 1
    return counts


def commands_per_request(client: redis.Redis, requests: float) -> str:
    stats = client.info("commandstats")
    parts = []
    for name, values in sorted(stats.items()):
        command = name.removeprefix("cmdstat_")
        if command in {"info", "config"}:
            continue
        per = values["calls"] / max(requests, 1)
        if per >= 0.001:
            parts.append(f"{command.upper()} {per:.3f}")
    return ", ".join(parts) or "none"


async def _login_storm(url: str, clients: int, seconds: float) -> dict[str, int]:
    """``clients`` loops of logins with the right password until ``seconds`` pass. A refused
    login (503 or 429) waits a quarter of its Retry-After, as an eager client would."""
    import aiohttp

    counts: dict[str, int] = {}
    slowest_refusal = 0.0
    deadline = time.monotonic() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal slowest_refusal
        body = {"email": EMAIL, "password": PASSWORD}
        while time.monotonic() < deadline:
            sent = time.monotonic()
            async with session.post(f"{url}/api/v1/auth/login", json=body) as response:
                await response.read()
                label = str(response.status)
                if response.status in (429, 503):
                    slowest_refusal = max(slowest_refusal, time.monotonic() - sent)
                    if "Retry-After" in response.headers:
                        label += "+Retry-After"
                counts[label] = counts.get(label, 0) + 1
                if response.status in (429, 503):
                    wait = float(response.headers.get("Retry-After", "1")) / 4
                    await asyncio.sleep(max(0.0, min(wait, deadline - time.monotonic())))

    timeout = aiohttp.ClientTimeout(total=seconds + 30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    counts["slowest_refusal_ms"] = round(slowest_refusal * 1000)
    return counts


# -- report -----------------------------------------------------------------------------------


# -- instruction counts ----------------------------------------------------------------------


async def _send_requests(url: str, headers: dict[str, str], path: str, count: int) -> None:
    import aiohttp

    connections = 16
    left = count
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:

        async def client() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.get(url + path, headers=headers) as response:
                    await response.read()

        await asyncio.gather(*(client() for _ in range(connections)))


def _header_dict(header: str | None) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in (header or "").splitlines())


def instructions_per_request(
    redis_url: str, workdir: Path, name: str, header: str | None, entry: str, count: int
) -> float:
    """The server's instructions per request (valgrind's callgrind, one worker, 16 connections):
    within about 1% for every run of the same code and ``count``, where req/s on a shared machine
    drift by far more. Counts user space only: the kernel's share (sockets) and Redis's are not
    in it. ``name`` is a scenario or a floor (``F0``, ``F1``)."""
    port = free_port()
    if name in FLOORS:
        command, env = floor_command(FLOORS[name], port, 1, redis_url, entry)
    else:
        command, env = service_command(redis_url, port, 1)
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts, so the same count, on every run
    output = workdir / f"callgrind.{name}"
    process = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={output}", *command],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 300)
        url, path = f"http://127.0.0.1:{port}", PATHS.get(name, "/api/v1/files")
        asyncio.run(_send_requests(url, _header_dict(header), path, 300))  # warm-up
        control = {
            "check": True,
            "timeout": 60,
            "stdout": subprocess.DEVNULL,
            "stderr": subprocess.DEVNULL,
        }
        subprocess.run(["callgrind_control", "-z", str(process.pid)], **control)
        asyncio.run(_send_requests(url, _header_dict(header), path, count))
        subprocess.run(["callgrind_control", "-d", str(process.pid)], **control)
    finally:
        stop(process)
    dump = Path(f"{output}.1").read_text()
    match = re.search(r"^(?:summary|totals): (\d+)", dump, re.M)
    if match is None:
        raise RuntimeError(f"no instruction count in {output}.1")
    return int(match.group(1)) / count


def versions(client: redis.Redis) -> dict[str, str]:
    from importlib.metadata import version

    info = client.info("server")
    server = (
        f"valkey {info['valkey_version']}"
        if "valkey_version" in info
        else f"redis {info['redis_version']}"
    )
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
    return {
        "python": platform.python_version(),
        **{name: version(name) for name in ("aiohttp", "redis", "hiredis", "uvloop", "orjson")},
        "store": server,
        "wrk": wrk_version.split()[1] if wrk_version else "?",
    }


# The floors: servers outside the service (scripts/bench_floors.py), measured in the same run.
FLOORS = {"F0": "bare", "F1": "lookup"}
SCENARIOS = ("b", "c", "d", "e", "f", "g", "h")
PATHS = {"g": "/api/v1/auth/verify", "h": "/api/v1/auth/verify"}
LABELS = {
    "F0": "F0 bare aiohttp, no Redis",
    "F1": "F1 bare aiohttp + one pipelined HMGET",
    "b": "b X-API-Key, files.read",
    "c": "c Bearer session",
    "d": "d unknown key (401)",
    "e": "e malformed key (401)",
    "f": "f key lacking files.read (403)",
    "g": "g forward-auth verify, X-API-Key (200, no body)",
    "h": "h forward-auth verify, Bearer (200, no body)",
}
EXPECTED = {"F0": 200, "F1": 200, "b": 200, "c": 200, "d": 401, "e": 401, "f": 403}
EXPECTED |= {"g": 200, "h": 200}
# The targets (gateway speed): scenario -> (floor, least ratio to it).
TARGETS = {
    "g": (("F1", 0.85), ("F0", 0.55)),
    "h": (("F1", 0.85),),
    "b": (("F1", 0.70),),
    "e": (("F0", 0.80),),
}


def scenario_headers(seed: dict[str, str]) -> dict[str, str | None]:
    """Each scenario's request headers, one per line (wrk's ``-H``)."""
    return {
        "F0": None,
        "F1": None,
        "b": f"X-API-Key: {seed['key']}",
        "c": f"Authorization: Bearer {seed['token']}",
        "d": f"X-API-Key: {seed['unknown_key']}",
        "e": f"X-API-Key: {seed['malformed_key']}",
        "f": f"X-API-Key: {seed['key_without_files_read']}",
        "g": f"X-API-Key: {seed['key']}\nX-Required-Permission: files.read",
        "h": f"Authorization: Bearer {seed['token']}\nX-Required-Permission: files.read",
    }


def median_row(results: list[dict[str, float]], *floors: list[dict[str, float]]) -> dict:
    """The medians over rounds; each ratio is a round's req/s to that round's floor run."""
    row: dict = {
        "rps": statistics.median(r["rps"] for r in results),
        "p50": statistics.median(r["p50"] for r in results),
        "p99": statistics.median(r["p99"] for r in results),
        "cpu_us": statistics.median(r["cpu_us"] for r in results),
        "wrk_us": statistics.median(r["wrk_us"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "requests": sum(r["requests"] for r in results),
        "ratios": [],
    }
    for floor in floors:
        ratios = [r["rps"] / f["rps"] for r, f in zip(results, floor, strict=True)]
        row["ratios"].append((statistics.median(ratios), min(ratios), max(ratios)))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # A shared machine's noise comes in bursts of seconds: a longer run does not average it out
    # (measured interleaved, the verify-to-F1 ratio of a pair of 1-s runs had a standard deviation
    # of 0.07, of 2-s runs 0.10), so the same time buys twice the triples, and about half the
    # median's error, as 1-s runs.
    parser.add_argument("--seconds", type=int, default=1, help="length of each wrk run")
    parser.add_argument(
        "--rounds",
        type=int,
        default=10,
        help="rounds of b-h, each run beside a run of F0 and of F1; the table shows medians",
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--only", default="".join(SCENARIOS), help="the scenarios to run, e.g. 'bg' (default all)"
    )
    parser.add_argument(
        "--large",
        type=int,
        default=1_000_000,
        help="keys and sessions loaded for the scale runs (0 skips them)",
    )
    parser.add_argument("--storm-clients", type=int, default=50)
    parser.add_argument(
        "--cluster",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the verify path (g) on a 3-master Redis Cluster beside the floors (default on)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="where the markdown report goes ('-' for nowhere)",
    )
    parser.add_argument(
        "--_login-storm",
        nargs=3,
        metavar=("URL", "CLIENTS", "SECONDS"),
        help=argparse.SUPPRESS,
        dest="login_storm",
    )
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="REQUESTS",
        help="instead of the load runs, count the server's instructions per request over this "
        "many requests per scenario (valgrind; about a minute per scenario; not written out)",
    )
    parser.add_argument(
        "--profiles",
        type=Path,
        metavar="DIR",
        help="with --instructions: keep each server's callgrind profile in DIR "
        "(callgrind.<scenario>.1, for callgrind_annotate --inclusive=yes)",
    )
    args = parser.parse_args()
    scenarios = tuple(name for name in SCENARIOS if name in args.only)
    if args.login_storm:
        url, clients, seconds = args.login_storm
        counts = asyncio.run(_login_storm(url, int(clients), float(seconds)))
        print(orjson.dumps(counts).decode())
        return 0
    if args.instructions:
        return count_instructions(args.instructions, scenarios, args.profiles)
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2

    started = time.monotonic()
    per_round: dict[str, list[dict[str, float]]] = {name: [] for name in LABELS}
    commands: dict[str, str] = {}
    extra_rows: list[tuple[str, dict[str, float], str, str]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        service_log = workdir / "service.log"
        with redis_server(workdir) as (redis_url, client):
            seed = seed_account(redis_url)
            entry = RedisKeys(PREFIX).key_entry(credentials.digest(seed["key"]))
            run_versions = versions(client)
            headers = scenario_headers(seed)

            def measure(
                label: str, target: tuple[str, int], name: str, header: str | None = None
            ) -> tuple[dict[str, float], str]:
                url, pid = target
                expected = EXPECTED.get(name, 200)
                of_service = name not in FLOORS
                if of_service:  # the lines of what ran before are written; then where they end
                    time.sleep(LOG_SETTLE_SECONDS)
                    offset = service_log.stat().st_size
                client.config_resetstat()
                cpu_before = cpu_seconds(pid)
                result = wrk(
                    url,
                    headers.get(name) if header is None else header,
                    expected,
                    args.seconds,
                    args.connections,
                    PATHS.get(name, "/api/v1/files"),
                )
                result["cpu_us"] = (cpu_seconds(pid) - cpu_before) / result["requests"] * 1e6
                if of_service:
                    time.sleep(LOG_SETTLE_SECONDS)
                    statuses = logged_statuses(service_log, offset)
                    right = statuses.pop(expected, 0)
                    # Any other status is wrong, and so is an answer wrk counted but no line shows.
                    result["errors"] += sum(statuses.values()) + max(0, result["requests"] - right)
                print(
                    f"  {label}: {result['rps']:,.0f} req/s, {result['cpu_us']:.0f} µs CPU "
                    f"(wrk {result['wrk_us']:.1f}), "
                    f"p50 {result['p50']:.2f} ms, p99 {result['p99']:.2f} ms, "
                    f"errors {result['errors']:.0f}",
                    flush=True,
                )
                return result, commands_per_request(client, result["requests"])

            print(
                f"benchmark: {args.workers} workers, {args.connections} connections, "
                f"{args.seconds}s per run, {args.rounds} rounds, {os.cpu_count()} cores",
                flush=True,
            )
            # All three stay up; every scenario run sits beside a run of each floor, and each
            # ratio is taken within that triple, so the machine's drift (shared, noisy cores)
            # between runs further apart cannot pass for a cost of the service.
            beside: dict[str, dict[str, list[dict[str, float]]]] = {
                name: {"F0": [], "F1": []} for name in scenarios
            }
            with (
                floor("bare", redis_url, args.workers, entry) as f0,
                floor("lookup", redis_url, args.workers, entry) as f1,
                service(redis_url, args.workers, log=service_log) as svc,
            ):
                targets = {"F0": f0, "F1": f1}
                for name, target in (("F0", f0), ("F1", f1), ("b", svc)):  # warm-up
                    wrk(target[0], headers[name], 200, 1, args.connections)
                for round_number in range(1, args.rounds + 1):
                    print(f"round {round_number}/{args.rounds}", flush=True)
                    for name in scenarios:
                        # Floors first in odd rounds and last in even ones, so the order within
                        # a triple cannot favour either side.
                        order = ["F0", "F1", name] if round_number % 2 else [name, "F1", "F0"]
                        for run in order:
                            result, commands[run] = measure(LABELS[run], targets.get(run, svc), run)
                            per_round[run].append(result)
                            if run in FLOORS:
                                beside[name][run].append(result)
            rows = {
                "F0": median_row(per_round["F0"], per_round["F0"]),
                "F1": median_row(per_round["F1"], per_round["F0"], per_round["F1"]),
            }
            rows["F0"]["ratios"].append(None)
            rows.update(
                (name, median_row(per_round[name], beside[name]["F0"], beside[name]["F1"]))
                for name in scenarios
            )

            with (
                floor("bare", redis_url, args.workers, entry) as f0,
                floor("lookup", redis_url, args.workers, entry) as f1,
                service(redis_url, args.workers, log=service_log, rate_limits=False) as svc,
            ):
                wrk(svc[0], headers["b"], 200, 1, args.connections)  # warm-up
                floor0, _ = measure("F0 (beside limits off)", f0, "F0")
                floor1, _ = measure("F1 (beside limits off)", f1, "F1")
                result, used = measure("b with rate limits off", svc, "b")
                extra_rows.append(
                    (
                        "b X-API-Key, rate limits off",
                        result,
                        used,
                        f"{result['rps'] / floor0['rps']:.2f} (one run) | "
                        f"{result['rps'] / floor1['rps']:.2f} (one run)",
                    )
                )
            with service(redis_url, args.workers, log=service_log) as svc:
                wrk(svc[0], headers["b"], 200, 1, args.connections)  # warm-up
                unloaded, _ = measure("b before the storm", svc, "b")
                # Login storm: every client logs in with the right password, so every attempt
                # passes throttling and costs a bcrypt check: the worst case for the CPU.
                storm = subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--_login-storm",
                        svc[0],
                        str(args.storm_clients),
                        str(args.seconds + 2),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                time.sleep(1)  # let the storm fill the login queues before measuring
                stormy, used = measure(
                    f"b during {args.storm_clients}-client login storm", svc, "b"
                )
                storm_out, _ = storm.communicate(timeout=args.seconds + 60)
                extra_rows.append(
                    (
                        f"b during a {args.storm_clients}-client login storm",
                        stormy,
                        used,
                        f"{stormy['rps'] / unloaded['rps']:.2f} of b just before | –",
                    )
                )
                storm_counts = orjson.loads(storm_out)
                slowest_refusal = storm_counts.pop("slowest_refusal_ms")
                notes.append(
                    f"login storm: X-API-Key kept {stormy['rps'] / unloaded['rps']:.2f} of its "
                    f"throughput just before the storm, p99 {stormy['p99']:.2f} ms; login "
                    f"responses: {', '.join(f'{k}: {v}' for k, v in sorted(storm_counts.items()))}"
                    + (
                        f"; the slowest refusal came back in {slowest_refusal} ms"
                        if slowest_refusal
                        else "; no login was refused"
                    )
                )

            if args.cluster:
                # The verify path (g) on a 3-master Redis Cluster on this machine,
                # each run beside a run of F0 and of F1 (which read the single node), so it is
                # reported against the same floors as the rows above.
                from tests.support.cluster import ClusterServer

                cluster = ClusterServer(workdir / "cluster")
                cluster.start()
                try:
                    cluster_headers = scenario_headers(seed_account(cluster.url, "cluster"))
                    label = "g forward-auth verify, X-API-Key, 3-master cluster"
                    with (
                        floor("bare", redis_url, args.workers, entry) as f0,
                        floor("lookup", redis_url, args.workers, entry) as f1,
                        service(cluster.url, args.workers, log=service_log, mode="cluster") as svc,
                    ):
                        wrk(svc[0], cluster_headers["g"], 200, 1, args.connections, PATHS["g"])
                        runs: dict[str, list[dict[str, float]]] = {"F0": [], "F1": [], "g": []}
                        for round_number in range(1, args.rounds + 1):
                            order = ["F0", "F1", "g"] if round_number % 2 else ["g", "F1", "F0"]
                            for run in order:
                                target = {"F0": f0, "F1": f1}.get(run, svc)
                                header = cluster_headers["g"] if run == "g" else None
                                result, used = measure(
                                    label if run == "g" else f"{run} (beside the cluster)",
                                    target,
                                    run,
                                    header,
                                )
                                runs[run].append(result)
                    row = median_row(runs["g"], runs["F0"], runs["F1"])
                    extra_rows.append(
                        (
                            label,
                            row,
                            "1 per request, on one of 3 nodes",
                            " | ".join(_ratio_cell(ratio) for ratio in row["ratios"]),
                        )
                    )
                finally:
                    cluster.stop()

            if args.large:
                # The scale runs are paired with runs of F0 (which reads nothing from Redis): what
                # is compared is each run's ratio to F0, before and after loading.
                with (
                    floor("bare", redis_url, args.workers, entry) as f0,
                    service(redis_url, args.workers, log=service_log) as svc,
                ):
                    wrk(f0[0], None, 200, 1, args.connections)  # warm-up
                    wrk(svc[0], headers["b"], 200, 1, args.connections)  # warm-up

                    def paired(label: str, name: str) -> tuple[dict[str, float], str, float]:
                        bare, _ = measure(f"F0 (for {label})", f0, "F0")
                        result, used = measure(label, svc, name)
                        return result, used, result["rps"] / bare["rps"]

                    _, _, small_key = paired("b before loading", "b")
                    _, _, small_session = paired("c before loading", "c")
                    client.config_resetstat()
                    before = client.info("memory")["used_memory"]
                    loaded = time.monotonic()
                    mass_insert(redis_url, key_commands(args.large))
                    after_keys = client.info("memory")["used_memory"]
                    mass_insert(redis_url, session_commands(args.large))
                    after_sessions = client.info("memory")["used_memory"]
                    notes.append(
                        f"loaded {args.large:,} keys and {args.large:,} sessions in "
                        f"{time.monotonic() - loaded:.1f} s; Redis memory per key "
                        f"{(after_keys - before) / args.large:.0f} B (digest entry + listing), "
                        f"per session {(after_sessions - after_keys) / args.large:.0f} B "
                        f"(entry + account index); dbsize {client.dbsize():,}"
                    )
                    for name, what, small in (
                        ("b", "keys", small_key),
                        ("c", "sessions", small_session),
                    ):
                        label = f"{LABELS[name].split(',')[0]}, {args.large:,} {what} loaded"
                        large, used, ratio = paired(label, name)
                        extra_rows.append((label, large, used, f"{ratio:.2f} (one run) | –"))
                        notes.append(
                            f"scale: {LABELS[name]}: ratio to F0 with {args.large:,} {what} "
                            f"loaded = {ratio / small:.2f} of its ratio with the benchmark's own "
                            "few just before loading (each run paired with an F0 run)"
                        )
            log_lines = service_log.read_bytes().count(b"\n")
            notes.append(
                f"the service wrote {log_lines:,} log lines in this run, one per request "
                "answered (access log at INFO, its production default)"
            )

    elapsed = time.monotonic() - started
    table = report_table(rows, commands, extra_rows)
    verdicts = target_verdicts(rows, args.connections)
    print()
    print(table)
    print()
    for note in [*verdicts, *notes]:
        print(f"- {note}")
    print(f"- total benchmark time {elapsed:.0f} s")
    if str(args.output) != "-":
        args.output.parent.mkdir(parents=True, exist_ok=True)
        versions_line = ", ".join(f"{name} {value}" for name, value in run_versions.items())
        args.output.write_text(
            "# Benchmarks\n\n"
            "Produced by `scripts/bench` (no arguments); rerun it to refresh this file. Every "
            "scenario but g and h is `GET /api/v1/files` (g and h are the forward-auth "
            "sub-request `GET /api/v1/auth/verify` a gateway sends), driven by wrk (`-t1`, "
            f"{args.connections} connections, {args.seconds} s) on loopback against "
            f"{args.workers} worker processes of the service at its production defaults (access "
            "log at INFO, metrics on, rate limits on at a rate no run reaches). The floors are "
            "servers outside the service (`scripts/bench_floors.py`), with the same workers: "
            "**F0** a bare aiohttp + uvloop + orjson app answering the same small envelope, no "
            "middleware, no Redis; **F1** the same plus one `HMGET` of a credential entry per "
            "request over the service's own auto-pipelined connection. Scenarios b-h run in "
            f"{args.rounds} rounds, each run beside a run of F0 and one of F1 (floors first in "
            "odd rounds, last in even ones), and each ratio is taken within that triple, so the "
            "drift of a shared machine between runs cancels out; the table shows medians over "
            "the rounds and the range of the per-triple ratios. CPU is the server's user + "
            "system time per request (every worker), median over the rounds. The rows below "
            "the line are single runs. Compare ratios across machines, not absolute numbers. "
            "wrk runs without a Lua script (a `response` callback would cost wrk a table of every "
            "answer's headers, more for the server sending more headers). Errors counts socket "
            "errors, answers wrk saw on the wrong side of 400, and, for the service, every "
            "access line it wrote during the run with another status than the scenario's, plus "
            "any answer wrk counted that no line shows.\n\n"
            f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
            f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}\n"
            f"- versions: {versions_line}\n\n"
            f"{table}\n\n"
            + "".join(f"- {note}\n" for note in [*verdicts, *notes])
            + f"- total benchmark time {elapsed:.0f} s\n"
        )
        print(f"wrote {args.output}")
    return 0


def _ratio_cell(ratio: tuple[float, float, float] | None) -> str:
    if ratio is None:
        return "–"
    median, low, high = ratio
    return f"{median:.2f} ({low:.2f}-{high:.2f})"


def report_table(
    rows: dict[str, dict], commands: dict[str, str], extra: list[tuple[str, dict, str, str]]
) -> str:
    lines = [
        "| scenario | req/s | × F0 (min-max) | × F1 (min-max) | server CPU µs/req | "
        "wrk CPU µs/req | p50 ms | p99 ms | errors | Redis commands per request |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in rows.items():
        to_f0, to_f1 = row["ratios"]
        lines.append(
            f"| {LABELS[name]} | {row['rps']:,.0f} | {_ratio_cell(to_f0)} | "
            f"{_ratio_cell(to_f1)} | {row['cpu_us']:.0f} | {row['wrk_us']:.1f} | "
            f"{row['p50']:.2f} | {row['p99']:.2f} | {row['errors']:.0f} | "
            f"{commands.get(name, '')} |"
        )
    for label, result, used, ratios in extra:
        lines.append(
            f"| {label} | {result['rps']:,.0f} | {ratios} | {result['cpu_us']:.0f} | "
            f"{result['wrk_us']:.1f} | {result['p50']:.2f} | {result['p99']:.2f} | "
            f"{result['errors']:.0f} | {used} |"
        )
    return "\n".join(lines)


def target_verdicts(rows: dict[str, dict], connections: int) -> list[str]:
    """One line per target of the gateway-speed issue: met or not, by the median ratio."""
    verdicts = []
    for name, targets in TARGETS.items():
        if name not in rows:
            continue
        for floor_name, least in targets:
            median = rows[name]["ratios"][0 if floor_name == "F0" else 1][0]
            verdict = "met" if median >= least else "NOT met"
            verdicts.append(
                f"target {LABELS[name]} ≥ {least:.2f} × {floor_name}: {median:.2f}, {verdict}"
            )
    if "g" in rows:
        p99 = rows["g"]["p99"]
        # The floors' own p99 in the same rounds: what the machine allows any server at all.
        floors = ", ".join(
            f"{name}'s {rows[name]['p99']:.2f} ms" for name in FLOORS if name in rows
        )
        # At a fixed number of connections the mean latency is connections / throughput
        # (Little's law): p99 over that mean is the tail a server adds of its own, beside what
        # its throughput makes every request wait.
        tails = ", ".join(
            f"{name} {rows[name]['p99'] * rows[name]['rps'] / (connections * 1000):.2f}"
            for name in ("g", *FLOORS)
            if name in rows
        )
        verdicts.append(
            f"target g p99 ≤ 4 ms: {p99:.2f} ms, {'met' if p99 <= 4 else 'NOT met'}"
            + (f" (the floors' own p99 in the same rounds: {floors})" if floors else "")
            + f"; p99 over the mean latency of {connections} connections at the median req/s: "
            + tails
        )
    return verdicts


def count_instructions(
    count: int, scenarios: tuple[str, ...] = SCENARIOS, profiles: Path | None = None
) -> int:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, redis_server(Path(tmp)) as (url, _):
        seed = seed_account(url)
        entry = RedisKeys(PREFIX).key_entry(credentials.digest(seed["key"]))
        headers = scenario_headers(seed)
        print(
            "| scenario | server instructions per request | F0's count / this one | "
            "F1's count / this one |\n|---|---:|---:|---:|"
        )
        counts: dict[str, float] = {}
        for name in ("F0", "F1", *scenarios):
            counts[name] = instructions_per_request(
                url, Path(tmp), name, headers[name], entry, count
            )
            if profiles is not None:
                profiles.mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(tmp) / f"callgrind.{name}.1", profiles)
            print(
                f"| {LABELS[name]} | {counts[name] / 1000:,.1f}k | "
                f"{counts['F0'] / counts[name]:.2f} | "
                + (f"{counts['F1'] / counts[name]:.2f} |" if "F1" in counts else "– |"),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
