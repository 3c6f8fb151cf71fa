"""The scenarios and the floors: each one's label, path, request headers, expected status, and the
targets the scenarios are held to."""

from __future__ import annotations

FILES_PATH = "/api/v1/files"
# The floors: servers outside the service (benchmark.floors), measured in the same run.
FLOORS = {"F0": "bare", "F1": "lookup"}
SCENARIOS = ("b", "c", "d", "e", "f", "g", "h", "p", "a")
# The vanity alias the bench account's seeding makes, of a 1 KiB file (benchmark.seeding).
ALIAS_PATH = "/a/bench-alias"
PATHS = {name: "/api/v1/auth/verify" for name in ("g", "h", "p")} | {"a": ALIAS_PATH}
# Scenarios sent to a second service started with FILEHOST_GATEWAY_LANE=off: beside g, what the
# gateway lane buys.
WITHOUT_LANE = ("p",)
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
    "p": "p g with the gateway lane off (FILEHOST_GATEWAY_LANE=off)",
    "a": "a GET /a/{slug} of a 1 KiB file, no credential",
}
EXPECTED = {"F0": 200, "F1": 200, "b": 200, "c": 200, "d": 401, "e": 401, "f": 403}
EXPECTED |= {"g": 200, "h": 200, "p": 200, "a": 200}
# The targets the service keeps (docs/performance.md): scenario -> (floor, least ratio to it).
TARGETS = {
    "g": (("F0", 0.70), ("F1", 0.85)),
    "h": (("F1", 0.85),),
    "b": (("F0", 0.60), ("F1", 0.70)),
    "e": (("F0", 0.80),),
    "a": (("F0", 0.50),),
}
# The most g's p99 may be at the bench's concurrency, in ms.
GATEWAY_P99_MS = 3.0


def path(name: str) -> str:
    """The path a scenario or floor sends its requests to."""
    return PATHS.get(name, FILES_PATH)


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
        "p": f"X-API-Key: {seed['key']}\nX-Required-Permission: files.read",
        "a": None,
    }
