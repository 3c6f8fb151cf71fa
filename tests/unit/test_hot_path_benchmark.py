"""Micro-benchmark of the per-request auth work that needs no I/O: shape and checksum check,
digest, permission check. Run with `scripts/test tests/unit/test_hot_path_benchmark.py`; it
reports timings and asserts only correctness, never speed."""

from service.domain import credentials
from service.domain.permissions import to_mask
from service.domain.principal import CredentialType, Principal

KEY = credentials.generate_api_key()
PRINCIPAL = Principal("usr_x", CredentialType.API_KEY, to_mask(["files.read"]), 0)


def hot_path(secret: str) -> str | None:
    if not credentials.is_well_formed(secret, credentials.API_KEY_KIND):
        return None
    digest = credentials.digest(secret)
    return digest if PRINCIPAL.may("files.read") else None


def test_benchmark_valid_key_parse_checksum_digest_and_permission(benchmark) -> None:
    assert benchmark(hot_path, KEY) == credentials.digest(KEY)


def test_benchmark_malformed_key_is_refused_before_any_digest(benchmark) -> None:
    assert benchmark(hot_path, KEY[:-1] + ("A" if KEY[-1] != "A" else "B")) is None
