"""Gateway and transfer benchmark: what authentication costs, and what moving big files through
the service costs, as ratios to floors measured in the same run.

Starts its own Redis-compatible server and the service (workers = cores), loads it with wrk from
a separate process on loopback only, and prints one table. Every run is bounded in time; every
process it starts is stopped by pid. Run it as ``scripts/bench`` (no arguments needed).

Floors, servers outside the service (``benchmark.floors``), measured beside every scenario:
  F0 bare aiohttp answering the same small envelope   F1 the same plus one pipelined HMGET
Scenarios, ``GET /api/v1/files`` (g, h, p: ``GET /api/v1/auth/verify``; a: ``GET /a/{slug}``) at
the same concurrency:
  b  X-API-Key holding files.read          c  Authorization: Bearer session
  d  unknown key of valid format (401)      e  malformed key, bad checksum (401)
  f  key lacking files.read (403)           g  forward-auth sub-request, X-API-Key (200)
  h  forward-auth sub-request, Bearer (200)
  p  g against a second service with FILEHOST_GATEWAY_LANE=off: what the gateway lane buys
  a  GET /a/{slug} of a 1 KiB file through a vanity alias, no credential (200)
(``--only`` picks some of them, e.g. ``--only gb``); then b with rate limits off, b during a
login storm, g on a Redis Cluster, and b and c again with 1,000,000 keys and 1,000,000 sessions
loaded (and the memory of 1,000,000 aliases loaded after them).

Transfers (``benchmark.transfers``), 100 MiB files one at a time and 16 at once, each run beside
nginx on the same machine moving the same bytes (``sendfile on``; WebDAV ``PUT``, also followed by
an fsync by the client since nginx cannot fsync a body itself):
  r  download, GET /api/v1/files/{id}/content   w  upload, POST /api/v1/files (multipart)
  v  download, GET /a/{slug} of the same file through a vanity alias, no credential
then a 1 GiB upload and download through a one-worker service and how much each grew it.
``--only rvw`` runs only these, ``--only gb`` only gateway scenarios.

wrk runs without a Lua script: a ``response`` callback makes wrk build a table of every answer's
headers, which costs wrk (sharing the cores) more for the server sending more headers. Statuses
are checked without it: wrk counts the answers of 400 and above, and every access line the service
logged during a run must hold the scenario's status (``logged_statuses``).

``scripts/bench --instructions 1000`` instead counts the server's instructions per request of each
scenario under valgrind: repeatable to about 1% for the same number of requests (the per-second
background work is spread over however many requests a run makes, so compare counts made with
the same number), for comparing two versions of the code on a machine whose req/s drift.
"""

# The modules (this docstring is also the --help text): __main__ the options and the run's order;
# runs each part of a run, the servers it starts and what it measures; processes starting and
# stopping the store, the service, the floors and nginx; seeding; load (wrk, the login storm, the
# status checks, the instruction counts); scenarios; report; floors; transfers (the transfer
# scenarios, their runs and the memory runs) and transfer_client (their load generator).

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# This checkout's service, whatever the working directory: the project is also installed in the
# venv (editable), possibly from another checkout.
sys.path.insert(0, str(ROOT))
