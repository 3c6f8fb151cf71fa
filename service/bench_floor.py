"""Benchmark floor: the real server and app with authentication replaced by a fixed principal.

Exists only so ``scripts/bench`` can measure what authentication costs against the same server,
workers and handler. It is not reachable from the CLI, from any setting or environment variable,
and refuses to listen anywhere but loopback, so it can never be switched on in a deployment.
Usage: ``python -m service.bench_floor --user-id usr_…`` (REDIS_URL and FILEHOST_* as usual).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence

from service.auth.permissions import ALL_PERMISSIONS_MASK
from service.auth.principal import CredentialType, Principal
from service.config import ConfigError, load_settings


class FloorAuthenticator:
    """Answers every request as one user, without reading any header."""

    def __init__(self, user_id: str) -> None:
        self._principal = Principal(user_id, CredentialType.SESSION, ALL_PERMISSIONS_MASK, 0)

    async def authenticate(
        self, api_key: str | None, authorization: str | None, *, session_only: bool = False
    ) -> Principal:
        return self._principal


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.bench_floor", description=__doc__)
    parser.add_argument("--user-id", required=True)
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    if not is_loopback(settings.host):
        print("bench_floor listens only on loopback addresses", file=sys.stderr)
        return 2
    if settings.redis_url is None:
        print("bench_floor needs REDIS_URL", file=sys.stderr)
        return 2
    from service.server import serve

    return serve(settings, bench_floor_user=args.user_id)


if __name__ == "__main__":
    raise SystemExit(main())
