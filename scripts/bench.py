"""Gateway benchmark: what authentication costs, as ratios to a floor measured in the same run.

Starts its own Redis-compatible server and the service (workers = cores), loads it with wrk from
a separate process on loopback only, and prints one table. Every run is bounded in time; every
process it starts is stopped by pid. Run it as ``scripts/bench`` (no arguments needed).

Scenarios, ``GET /api/v1/files`` (g: ``GET /api/v1/auth/verify``) at the same concurrency:
  a  floor: the same server and workers with authentication bypassed (``service.bench_floor``)
  b  X-API-Key holding files.read          c  Authorization: Bearer session
  d  unknown key of valid format (401)      e  malformed key, bad checksum (401)
  f  key lacking files.read (403)           g  forward-auth sub-request, X-API-Key (200)
then b and c again with 1,000,000 keys and 1,000,000 sessions loaded, and b during a login storm.

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

from service.auth import credentials
from service.auth.permissions import to_mask
from service.store.embedded import find_server_binary
from service.store.keys import RedisKeys

PASSWORD = "bench password 1234"
EMAIL = "bench@example.com"
PREFIX = "fh"
DAY_MS = 86_400_000

WRK_SCRIPT = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) expected = tonumber(args[1]); wrong = 0 end
function response(status, headers, body)
  if status ~= expected then wrong = wrong + 1 end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("wrong") end
  io.write(string.format("WRONG_STATUS %d\\n", total))
end
"""


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
    redis_url: str, port: int, workers: int, floor_user: str | None, rate_limits: bool = True
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of the service, or of the floor for ``floor_user``."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "FILEHOST_LOG_LEVEL": "WARNING",
        "FILEHOST_PORT": str(port),
        "FILEHOST_WORKERS": str(workers),
        # Limits stay on, so their cost is measured, at a rate no wrk run can reach (one key
        # sends every request); the "limits off" row shows what folding them in costs. The
        # burst keeps the bucket's tolerance at 1 s, far above the workers' clock differences.
        "FILEHOST_RATE_LIMIT_PER_SECOND": "1000000" if rate_limits else "0",
        "FILEHOST_RATE_LIMIT_BURST": "1000000",
    }
    if floor_user is None:
        return [sys.executable, "-m", "service", "serve"], env
    return [sys.executable, "-m", "service.bench_floor", "--user-id", floor_user], env


@contextmanager
def service(
    redis_url: str,
    workers: int,
    *,
    floor_user: str | None = None,
    log: Path | None = None,
    rate_limits: bool = True,
) -> Iterator[str]:
    port = free_port()
    command, env = service_command(redis_url, port, workers, floor_user, rate_limits)
    with open(log or os.devnull, "ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


# -- seeding ----------------------------------------------------------------------------------


def seed_account(redis_url: str) -> dict[str, str]:
    """One user, its keys and a session, written through the service's own code paths."""
    from service.app import connect_redis
    from service.auth.accounts import Accounts
    from service.auth.passwords import PasswordHasher
    from service.clock import SystemClock
    from service.config import Settings
    from service.store.redis_store import RedisStore

    async def run() -> dict[str, str]:
        settings = Settings(redis_url=redis_url, bcrypt_cost=12)
        client = connect_redis(redis_url, 2.0)
        passwords = PasswordHasher(12, 1, 0)
        accounts = Accounts(RedisStore(client, PREFIX), passwords, SystemClock(), settings)
        user = await accounts.create_user(EMAIL, PASSWORD)
        reader = await accounts.create_key(user.id, "bench reader", ["files.read"], 30)
        other = await accounts.create_key(user.id, "bench folders", ["folders.read"], 30)
        for n in range(8):
            await accounts.create_key(user.id, f"filler {n}", ["files.read"], 30)
        session = await accounts.login(EMAIL, PASSWORD)
        passwords.close()
        await client.aclose()
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
    """The exact layout RedisStore.add_api_key writes, for ``count`` keys."""
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
        yield _resp("PEXPIREAT", entry, expires)


def session_commands(count: int, sessions_per_user: int = 4) -> Iterator[bytes]:
    """The exact layout RedisStore.add_session writes, for ``count`` sessions."""
    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    idle, absolute = now + DAY_MS, now + 7 * DAY_MS
    for n in range(count):
        user = f"usr_sess{n // sessions_per_user:018d}"
        digest = os.urandom(32).hex()
        yield _resp("ZADD", names.account_sessions(user), absolute, digest)
        entry = names.session_entry(digest)
        yield _resp("HSET", entry, "u", user, "c", now, "a", absolute, "i", idle)
        yield _resp("PEXPIREAT", entry, idle)


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
    script: Path,
    path: str = "/api/v1/files",
) -> dict[str, float]:
    """One wrk run; ``header`` may hold several headers separated by newlines."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script)]
    for line in (header or "").splitlines():
        command += ["-H", line]
    command += [f"{url}{path}", "--", str(expected)]
    output = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds + 60, check=True
    ).stdout
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": _ms(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1)),
        "p99": _ms(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1)),
        "requests": float(re.search(r"(\d+) requests in", output).group(1)),
        "errors": float(re.search(r"WRONG_STATUS (\d+)", output).group(1))
        + (sum(int(g) for g in socket_errors.groups()) if socket_errors else 0),
    }


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
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")) / 4)

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
    redis_url: str, workdir: Path, name: str, header: str | None, floor_user: str, count: int
) -> float:
    """The server's instructions per request (valgrind's callgrind, one worker, 16 connections):
    within about 1% for every run of the same code and ``count``, where req/s on a shared machine
    drift by far more. Counts user space only: the kernel's share (sockets) and Redis's are not
    in it."""
    port = free_port()
    command, env = service_command(redis_url, port, 1, floor_user if name == "a" else None)
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


SCENARIOS = ("b", "c", "d", "e", "f", "g")
PATHS = {"g": "/api/v1/auth/verify"}
LABELS = {
    "a": "a floor (auth bypassed)",
    "b": "b X-API-Key, files.read",
    "c": "c Bearer session",
    "d": "d unknown key (401)",
    "e": "e malformed key (401)",
    "f": "f key lacking files.read (403)",
    "g": "g forward-auth verify, X-API-Key (200, no body)",
}


def scenario_headers(seed: dict[str, str]) -> dict[str, str | None]:
    """Each scenario's request headers, one per line (wrk's ``-H``)."""
    return {
        "a": None,
        "b": f"X-API-Key: {seed['key']}",
        "c": f"Authorization: Bearer {seed['token']}",
        "d": f"X-API-Key: {seed['unknown_key']}",
        "e": f"X-API-Key: {seed['malformed_key']}",
        "f": f"X-API-Key: {seed['key_without_files_read']}",
        "g": f"X-API-Key: {seed['key']}\nX-Required-Permission: files.read",
    }


def median_row(results: list[dict[str, float]], floors: list[dict[str, float]]) -> dict[str, float]:
    """The medians over rounds; the ratio is each round's ratio to that round's floor."""
    ratios = [r["rps"] / f["rps"] for r, f in zip(results, floors, strict=True)]
    return {
        "rps": statistics.median(r["rps"] for r in results),
        "ratio": statistics.median(ratios),
        "ratio_low": min(ratios),
        "ratio_high": max(ratios),
        "p50": statistics.median(r["p50"] for r in results),
        "p99": statistics.median(r["p99"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "requests": sum(r["requests"] for r in results),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=2, help="length of each wrk run")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds of b-g, each run right after a floor run; the table shows their medians",
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--large",
        type=int,
        default=1_000_000,
        help="keys and sessions loaded for the scale runs (0 skips them)",
    )
    parser.add_argument("--storm-clients", type=int, default=50)
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
    args = parser.parse_args()
    if args.login_storm:
        url, clients, seconds = args.login_storm
        counts = asyncio.run(_login_storm(url, int(clients), float(seconds)))
        print(orjson.dumps(counts).decode())
        return 0
    if args.instructions:
        return count_instructions(args.instructions)
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2

    started = time.monotonic()
    labels = LABELS
    per_round: dict[str, list[dict[str, float]]] = {name: [] for name in labels}
    commands: dict[str, str] = {}
    extra_rows: list[tuple[str, dict[str, float], str, float | None]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        script = workdir / "status.lua"
        script.write_text(WRK_SCRIPT)
        with redis_server(workdir) as (redis_url, client):
            seed = seed_account(redis_url)
            run_versions = versions(client)
            headers = scenario_headers(seed)
            expected = {"a": 200, "b": 200, "c": 200, "d": 401, "e": 401, "f": 403, "g": 200}

            def measure(
                label: str, url: str, header: str | None, status: int, path: str = "/api/v1/files"
            ) -> tuple:
                client.config_resetstat()
                result = wrk(url, header, status, args.seconds, args.connections, script, path)
                print(
                    f"  {label}: {result['rps']:,.0f} req/s, p50 {result['p50']:.2f} ms, "
                    f"p99 {result['p99']:.2f} ms, errors {result['errors']:.0f}",
                    flush=True,
                )
                return result, commands_per_request(client, result["requests"])

            print(
                f"benchmark: {args.workers} workers, {args.connections} connections, "
                f"{args.seconds}s per run, {args.rounds} rounds, {os.cpu_count()} cores",
                flush=True,
            )
            # Both servers stay up; every scenario run follows a floor run at once, and each
            # ratio is taken within that pair, so the machine's drift (shared, noisy cores)
            # between runs that far apart cannot pass for a cost of authentication.
            paired_floors: dict[str, list[dict[str, float]]] = {name: [] for name in SCENARIOS}
            with (
                service(redis_url, args.workers, floor_user=seed["user_id"]) as floor_url,
                service(redis_url, args.workers, log=workdir / "service.log") as url,
            ):
                wrk(floor_url, None, 200, 1, args.connections, script)  # warm-up
                wrk(url, headers["b"], 200, 1, args.connections, script)  # warm-up
                for round_number in range(1, args.rounds + 1):
                    print(f"round {round_number}/{args.rounds}", flush=True)
                    for name in SCENARIOS:

                        def run_floor() -> dict[str, float]:
                            floor, commands["a"] = measure(labels["a"], floor_url, None, 200)
                            per_round["a"].append(floor)
                            return floor

                        def run_scenario(name: str = name) -> dict[str, float]:
                            result, commands[name] = measure(
                                labels[name],
                                url,
                                headers[name],
                                expected[name],
                                PATHS.get(name, "/api/v1/files"),
                            )
                            return result

                        # The floor goes first in odd rounds and second in even ones, so the
                        # order within a pair cannot favour either side.
                        if round_number % 2:
                            floor, result = run_floor(), run_scenario()
                        else:
                            result = run_scenario()
                            floor = run_floor()
                        paired_floors[name].append(floor)
                        per_round[name].append(result)
            rows = {"a": median_row(per_round["a"], per_round["a"])}
            rows.update(
                (name, median_row(per_round[name], paired_floors[name])) for name in SCENARIOS
            )
            floor_rps = rows["a"]["rps"]

            with service(redis_url, args.workers, rate_limits=False) as url:
                wrk(url, headers["b"], 200, 1, args.connections, script)  # warm-up
                result, used = measure("b with rate limits off", url, headers["b"], 200)
                extra_rows.append(("b X-API-Key, rate limits off", result, used, None))
            with service(redis_url, args.workers, log=workdir / "service.log") as url:
                wrk(url, headers["b"], 200, 1, args.connections, script)  # warm-up
                unloaded, _ = measure("b before the storm", url, headers["b"], 200)
                # Login storm: every client logs in with the right password, so every attempt
                # passes throttling and costs a bcrypt check: the worst case for the CPU.
                storm = subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--_login-storm",
                        url,
                        str(args.storm_clients),
                        str(args.seconds + 2),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                time.sleep(1)  # let the storm fill the login queues before measuring
                stormy, used = measure(
                    f"b during {args.storm_clients}-client login storm", url, headers["b"], 200
                )
                storm_out, _ = storm.communicate(timeout=args.seconds + 60)
                extra_rows.append(
                    (f"b during a {args.storm_clients}-client login storm", stormy, used, None)
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

            if args.large:
                # The scale runs are paired with floor runs too: what is compared is each run's
                # ratio to its floor, before and after loading, not req/s a minute apart.
                with (
                    service(redis_url, args.workers, floor_user=seed["user_id"]) as floor_url,
                    service(redis_url, args.workers, log=workdir / "service.log") as url,
                ):
                    wrk(floor_url, None, 200, 1, args.connections, script)  # warm-up
                    wrk(url, headers["b"], 200, 1, args.connections, script)  # warm-up

                    def paired(label: str, name: str) -> tuple[dict[str, float], str, float]:
                        floor, _ = measure(f"{labels['a']} (for {label})", floor_url, None, 200)
                        result, used = measure(label, url, headers[name], 200)
                        return result, used, result["rps"] / floor["rps"]

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
                    key_label = f"b X-API-Key, {args.large:,} keys loaded"
                    large_key, used, large_key_ratio = paired(key_label, "b")
                    extra_rows.append((key_label, large_key, used, large_key_ratio))
                    session_label = f"c Bearer, {args.large:,} sessions loaded"
                    large_session, used, large_session_ratio = paired(session_label, "c")
                    extra_rows.append((session_label, large_session, used, large_session_ratio))
                    notes.append(
                        f"scale: X-API-Key's ratio to its floor with {args.large:,} keys loaded "
                        f"= {large_key_ratio / small_key:.2f} of its ratio with 10 keys just "
                        f"before loading; Bearer's with {args.large:,} sessions loaded = "
                        f"{large_session_ratio / small_session:.2f} of its ratio before (each "
                        "run paired with a floor run)"
                    )

    elapsed = time.monotonic() - started
    header = (
        "| scenario | req/s | ratio to floor (min-max) | p50 ms | p99 ms | errors | "
        "Redis commands per request |\n|---|---:|---:|---:|---:|---:|---|"
    )
    lines = [header]
    for name, label in labels.items():
        row = rows[name]
        lines.append(
            f"| {label} | {row['rps']:,.0f} | {row['ratio']:.2f} ({row['ratio_low']:.2f}-"
            f"{row['ratio_high']:.2f}) | {row['p50']:.2f} | {row['p99']:.2f} | "
            f"{row['errors']:.0f} | {commands[name]} |"
        )
    for label, result, used, ratio in extra_rows:
        paired_note = "one run, paired" if ratio is not None else "one run"
        ratio = ratio if ratio is not None else result["rps"] / floor_rps
        lines.append(
            f"| {label} | {result['rps']:,.0f} | {ratio:.2f} ({paired_note}) | "
            f"{result['p50']:.2f} | {result['p99']:.2f} | {result['errors']:.0f} | {used} |"
        )
    table = "\n".join(lines)
    print()
    print(table)
    print()
    for note in notes:
        print(f"- {note}")
    print(f"- total benchmark time {elapsed:.0f} s")
    if str(args.output) != "-":
        args.output.parent.mkdir(parents=True, exist_ok=True)
        versions_line = ", ".join(f"{name} {value}" for name, value in run_versions.items())
        args.output.write_text(
            "# Benchmarks\n\n"
            "Produced by `scripts/bench` (no arguments); rerun it to refresh this file. Every "
            "scenario but g is `GET /api/v1/files` (g is the forward-auth sub-request "
            "`GET /api/v1/auth/verify` a gateway sends), driven by wrk (`-t1`, "
            f"{args.connections} connections, {args.seconds} s) on loopback against "
            f"{args.workers} worker processes. Scenarios b-g run in {args.rounds} rounds, each "
            "run right after (or, every other round, right before) a run of the floor (the "
            "same server with authentication bypassed, still reading the account's files, up "
            "beside it), and each ratio is taken within "
            "that pair, so the drift of a shared machine between runs cancels out; the table "
            "shows medians over the rounds and the range of the per-pair ratios (the floor's "
            "row: the median of all its runs). The rows below them are single runs, compared "
            "with the median floor. Rate limits are on (at a rate no run reaches) except where "
            "a row says off. Compare ratios across machines, not absolute numbers. Errors "
            "counts responses with an unexpected status plus socket errors.\n\n"
            f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
            f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}\n"
            f"- versions: {versions_line}\n\n"
            f"{table}\n\n"
            + "".join(f"- {note}\n" for note in notes)
            + f"- total benchmark time {elapsed:.0f} s\n"
        )
        print(f"wrote {args.output}")
    return 0


def count_instructions(count: int) -> int:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, redis_server(Path(tmp)) as (url, _):
        seed = seed_account(url)
        headers = scenario_headers(seed)
        print(
            "| scenario | server instructions per request | floor's count / this one |\n"
            "|---|---:|---:|"
        )
        floor = None
        for name in ("a", *SCENARIOS):
            per_request = instructions_per_request(
                url, Path(tmp), name, headers[name], seed["user_id"], count
            )
            floor = floor or per_request
            print(f"| {LABELS[name]} | {per_request / 1000:,.1f}k | {floor / per_request:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
