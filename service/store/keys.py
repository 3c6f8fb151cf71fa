"""The one place that names every Redis key the service uses.

Layout (``P`` is the per-deployment prefix, ``U`` a user id such as ``usr_…``):

=====================================  ======  ===============================================
key                                    type    holds
=====================================  ======  ===============================================
``P:key:<sha256 hex of secret>``        hash    the hot-path entry of one API key: user id,
                                               key id, permission mask, expiry; PEXPIREAT set
``P:session:<sha256 hex of token>``     hash    one session: user id, created, absolute and idle
                                               deadlines; PEXPIREAT at the nearer deadline
``P:rate:{<credential entry>}``         string  request-rate bucket of one key or session (the
                                               GCRA's theoretical arrival time, µs); lives a
                                               few seconds, never written to the AOF
``P:login-failures:email:<sha256>``     string  failed logins for one e-mail in the window
``P:login-failures:ip:<address>``       string  failed logins from one client address
``P:users:by-email``                    hash    lower-cased email -> user id
``P:{U}:user``                          hash    id, email, bcrypt hash, created
``P:{U}:keys``                          hash    key id -> JSON metadata for listing and revoking
``P:{U}:key-expiry``                    zset    key id scored by expiry (active-key count, pruning)
``P:{U}:key-last-used``                 hash    key id -> last use (ms), written at most once a
                                               minute per key and worker
``P:{U}:sessions``                      zset    session digest scored by absolute expiry, so a
                                               deleted user's sessions can be ended
``P:{U}:files``                         hash    file id -> JSON file record
=====================================  ======  ===============================================

The ``{U}`` hash tag keeps every key of one account in one Redis Cluster slot, so the scripts that
change several of them together stay valid on a cluster. Digest entries stand alone: they are
found by digest only, and every write that pairs them with account keys is ordered so that a
failure half-way leaves nothing usable behind (see ``redis_store``). A rate bucket's hash tag is
the whole name of its credential's entry, so the two share a slot and one script reads the entry
and takes from the bucket. Raw secrets never appear.
"""

from __future__ import annotations


class RedisKeys:
    __slots__ = (
        "_key_entry",
        "_login_failures",
        "_prefix",
        "_rate_bucket",
        "_session_entry",
        "users_by_email",
    )

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._key_entry = f"{prefix}:key:"
        self._session_entry = f"{prefix}:session:"
        self._rate_bucket = f"{prefix}:rate:"
        self._login_failures = f"{prefix}:login-failures:"
        self.users_by_email = f"{prefix}:users:by-email"

    def key_entry(self, secret_digest: str) -> str:
        return self._key_entry + secret_digest

    def session_entry(self, token_digest: str) -> str:
        return self._session_entry + token_digest

    def rate_bucket(self, credential_entry: str) -> str:
        return f"{self._rate_bucket}{{{credential_entry}}}"

    def login_failures_by_email(self, email_digest: str) -> str:
        return f"{self._login_failures}email:{email_digest}"

    def login_failures_by_address(self, address: str) -> str:
        return f"{self._login_failures}ip:{address}"

    def _account(self, user_id: str, name: str) -> str:
        return f"{self._prefix}:{{{user_id}}}:{name}"

    def user(self, user_id: str) -> str:
        return self._account(user_id, "user")

    def account_keys(self, user_id: str) -> str:
        return self._account(user_id, "keys")

    def account_key_expiry(self, user_id: str) -> str:
        return self._account(user_id, "key-expiry")

    def account_key_last_used(self, user_id: str) -> str:
        return self._account(user_id, "key-last-used")

    def account_sessions(self, user_id: str) -> str:
        return self._account(user_id, "sessions")

    def account_files(self, user_id: str) -> str:
        return self._account(user_id, "files")
