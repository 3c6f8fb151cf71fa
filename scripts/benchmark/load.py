"""The load: wrk runs and what they measured, the status checks from the service's access log,
the Redis commands per request, the login storm, and the instruction counts under valgrind."""

from __future__ import annotations

import asyncio
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import redis

from benchmark import ROOT
from benchmark.processes import (
    cpu_seconds,
    floor_command,
    free_port,
    package_command,
    redis_server,
    service_command,
    stop,
    wait_for_port,
)
from benchmark.scenarios import (
    EXPECTED,
    FILES_PATH,
    FLOORS,
    LABELS,
    SCENARIOS,
    WITHOUT_LANE,
    path,
    scenario_headers,
)
from benchmark.seeding import EMAIL, PASSWORD, SEARCH_EMAIL, key_entry, seed_account

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
    path: str = FILES_PATH,
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
    result = parse_wrk(output, expected)
    result["wrk_us"] = wrk_seconds / max(result["requests"], 1) * 1e6
    return result


def parse_wrk(output: str, expected: int) -> dict[str, float]:
    """req/s, p50 and p99 (ms), requests and errors from wrk's report."""
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


class Measurer:
    """Measures one wrk run of a scenario or a floor against a running server: what wrk saw,
    the server's CPU per request, the errors (for the service, its access lines included) and
    the Redis commands per request; prints a line as each run ends."""

    def __init__(
        self,
        client: redis.Redis,
        service_log: Path,
        headers: dict[str, str | None],
        seconds: int,
        connections: int,
    ) -> None:
        self.client = client
        self.service_log = service_log
        self.headers = headers
        self.seconds = seconds
        self.connections = connections

    def warm_up(self, url: str, header: str | None, path: str = FILES_PATH) -> None:
        wrk(url, header, 200, 1, self.connections, path)

    def __call__(
        self, label: str, target: tuple[str, int], name: str, header: str | None = None
    ) -> tuple[dict[str, float], str]:
        url, pid = target
        expected = EXPECTED.get(name, 200)
        of_service = name not in FLOORS
        if of_service:  # the lines of what ran before are written; then where they end
            time.sleep(LOG_SETTLE_SECONDS)
            offset = self.service_log.stat().st_size
        self.client.config_resetstat()
        cpu_before = cpu_seconds(pid)
        result = wrk(
            url,
            self.headers.get(name) if header is None else header,
            expected,
            self.seconds,
            self.connections,
            path(name),
        )
        result["cpu_us"] = (cpu_seconds(pid) - cpu_before) / result["requests"] * 1e6
        if of_service:
            time.sleep(LOG_SETTLE_SECONDS)
            statuses = logged_statuses(self.service_log, offset)
            right = statuses.pop(expected, 0)
            # wrk closes its connections when its time is up: an answer still being streamed
            # then (a file's, as an alias's) is logged 499, at most one per connection, and is
            # not among the requests wrk counts.
            if statuses.get(499, 0) <= self.connections:
                statuses.pop(499, None)
            # Any other status is wrong, and so is an answer wrk counted but no line shows.
            result["errors"] += sum(statuses.values()) + max(0, result["requests"] - right)
        print(
            f"  {label}: {result['rps']:,.0f} req/s, {result['cpu_us']:.0f} µs CPU "
            f"(wrk {result['wrk_us']:.1f}), "
            f"p50 {result['p50']:.2f} ms, p99 {result['p99']:.2f} ms, "
            f"errors {result['errors']:.0f}",
            flush=True,
        )
        return result, commands_per_request(self.client, result["requests"])


# -- the login storm ----------------------------------------------------------------------------


async def login_storm(url: str, clients: int, seconds: float) -> dict[str, int]:
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


def start_login_storm(url: str, clients: int, seconds: int) -> subprocess.Popen:
    """The login storm in a process of its own (this one waits on wrk meanwhile); it prints its
    counts as JSON when done."""
    command, env = package_command("benchmark", "--_login-storm", url, str(clients), str(seconds))
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


# -- the search storm ---------------------------------------------------------------------------


async def search_storm(url: str, seconds: float) -> dict[str, int]:
    """One person searching a large account back to back (``seeding.SEARCH_EMAIL``) until
    ``seconds`` pass: how many searches were answered, by status."""
    import aiohttp

    counts: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds + 30)) as session:
        login = {"email": SEARCH_EMAIL, "password": PASSWORD}
        async with session.post(f"{url}/api/v1/auth/login", json=login) as response:
            token = (await response.json())["data"]["token"]
        headers = {"Authorization": f"Bearer {token}"}
        while time.monotonic() < deadline:
            params = {"q": "report", "limit": "100"}
            async with session.get(f"{url}{FILES_PATH}", params=params, headers=headers) as answer:
                await answer.read()
                counts[str(answer.status)] = counts.get(str(answer.status), 0) + 1
    return counts


def start_search_storm(url: str, seconds: int) -> subprocess.Popen:
    """The search storm in a process of its own; it prints its counts as JSON when done."""
    command, env = package_command("benchmark", "--_search-storm", url, str(seconds))
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


# -- instruction counts -------------------------------------------------------------------------


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
        command, env = service_command(
            redis_url, port, 1, lane=name not in WITHOUT_LANE, data_dir=workdir / "data"
        )
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
        url = f"http://127.0.0.1:{port}"
        asyncio.run(_send_requests(url, _header_dict(header), path(name), 300))  # warm-up
        control = {
            "check": True,
            "timeout": 60,
            "stdout": subprocess.DEVNULL,
            "stderr": subprocess.DEVNULL,
        }
        subprocess.run(["callgrind_control", "-z", str(process.pid)], **control)
        asyncio.run(_send_requests(url, _header_dict(header), path(name), count))
        subprocess.run(["callgrind_control", "-d", str(process.pid)], **control)
    finally:
        stop(process)
    dump = Path(f"{output}.1").read_text()
    match = re.search(r"^(?:summary|totals): (\d+)", dump, re.M)
    if match is None:
        raise RuntimeError(f"no instruction count in {output}.1")
    return int(match.group(1)) / count


def count_instructions(
    count: int, scenarios: tuple[str, ...] = SCENARIOS, profiles: Path | None = None
) -> int:
    """Print the instructions per request of F0, F1 and ``scenarios``, as a table."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, redis_server(Path(tmp)) as (url, _):
        seed = seed_account(url, data_dir=Path(tmp) / "data")
        entry = key_entry(seed)
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
