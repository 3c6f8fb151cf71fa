"""The one place that names every Redis key the service uses.

Layout (``P`` is the per-deployment prefix, ``U`` a user id such as ``usr_…``):

=====================================  ======  ===============================================
key                                    type    holds
=====================================  ======  ===============================================
``P:key:<sha256 hex of secret>``        hash    the hot-path entry of one API key secret: user
                                               id ``u``, key id ``k``, permission mask ``p``
                                               (with ``BOUND_TO_FOLDERS`` beside the
                                               permissions for a key bound to folders),
                                               expiry ``e``; only when set: disabled ``x``,
                                               allowed networks ``n`` ("net,net,…"), its own
                                               rate ``r`` ("<per second>:<burst>"), and on a
                                               rolled-out secret the end of its grace ``g``;
                                               ``v`` the version of the listing metadata it
                                               copies (read by writes only). All the
                                               per-request lookup needs, in one HMGET.
                                               PEXPIREAT 24 h past the expiry (answered
                                               api_key_expired), or the grace's end
``P:session:<sha256 hex of token>``     hash    one session: user id, created, absolute and idle
                                               deadlines (``u c a i``, all the per-request
                                               lookup reads); for the owner's list only: public
                                               id ``id``, last seen ``s`` (moved by renewal),
                                               login address ``ip`` and User-Agent ``ua``;
                                               when it last authenticated ``aa`` and with how
                                               many factors ``l`` (none: at ``c``, with 1);
                                               opened by single sign-on: method ``m``, the
                                               provider ``pi``, its session id ``ps``;
                                               PEXPIREAT 1 h past the nearer deadline
                                               (answered session_expired)
``P:key-gone:{<key entry>}``            string  why and when an API key secret stopped
                                               working, written as its digest entry goes:
                                               ``revoked:<ms>``, ``leaked:<ms>`` (revoked as
                                               reported leaked) or ``replaced:<ms>`` (rolled
                                               out, its grace over); read only when the entry
                                               is missing, so a refusal can say why; expires
                                               KEY_GONE_MS (90 days) after that
``P:rate:{<credential entry>}``         string  request-rate bucket of one key or session (the
                                               GCRA's theoretical arrival time, µs); lives a
                                               few seconds, never written to the AOF
``P:login-failures:email:<sha256>``     string  login attempts counted for one e-mail in the
                                               window: failures, and logins still checking
``P:login-failures:ip:<address>``       string  the same, for one client address
``P:leak-reports:ip:<address>``         string  leak reports (``POST /keys/leaked``) counted
                                               for one client address (IPv6: its /64) in the
                                               window; expires with the window
``P:oidc-starts:ip:<address>``          string  trips to the OpenID provider begun from one
                                               client address in the window; the same
``P:oidc-state:{<sha256 of state>}``   string  a trip to the OpenID provider begun by
                                               ``GET /auth/oidc/start`` (``PendingSignIn``
                                               JSON), taken once by its callback; PX 10 min
``P:oidc-code:{<sha256 of code>}``      string  a verified sign-in waiting for its one-time
                                               exchange (``SignedIn`` JSON); PX 60 s
``P:download-ticket:<sha256>``          string  what a download ticket downloads
                                               (``DownloadTicket`` JSON: account, kind and
                                               ids, the session that took it, its end);
                                               PX its minute and a minute more
``P:oidc-identity:<sha256 of iss,sub>`` string  the account an identity at the provider is
                                               linked to (its ``{U}:identities`` must agree)
``P:oidc-sid:{<sha256 of iss,sid>}``    set     ``<user id> <session digest>`` of the sessions
                                               a provider's session opened (back-channel
                                               logout); expires with the longest of them
``P:oidc-jti:<sha256 of iss,jti>``      string  a logout token already used; PX 10 min
``P:{U}:identities``                    hash    sha256 of (iss, sub) -> ``Identity`` JSON: the
                                               account's identities at the provider
``P:users:by-email``                    hash    lower-cased email -> user id
``P:{U}:user``                          hash    id, email, bcrypt hash, created; deleted first
                                               when the user is, and checked by every creation
                                               of a session or key, before and after
``P:{U}:keys``                          hash    key id -> JSON metadata for listing, changing,
                                               revoking and deleting the user: the truth the
                                               digest entries copy (name, prefix, permissions,
                                               created, expiry, disabled, allowed networks,
                                               own rate, the folders it is bound to, version),
                                               naming the secret's digest and, during a roll's
                                               grace, the previous one's and the grace's end;
                                               kept until the entry's grace has passed. A bound
                                               key's requests read its folders from here
                                               (``service.store.bindings``)
``P:{U}:key-expiry``                    zset    key id scored by expiry (active-key count, pruning)
``P:{U}:key-last-used``                 hash    key id -> last use (ms), written at most once a
                                               minute per key and worker
``P:{U}:key-usage:<K>:<day>``           hash    key ``K``'s requests ``r`` and refusals ``x`` on
                                               one UTC day (``YYYY-MM-DD``), added to by each
                                               worker's flush (``service.store.key_usage``)
                                               while the key is listed; PEXPIRE 35 days
``P:{U}:key-usage:<K>:last``            string  ``<ms> <address>`` of key ``K``'s last flushed
                                               use; PEXPIRE 35 days. Both deleted when the key
                                               is revoked or its user deleted
``P:{U}:sessions``                      zset    session digest scored by when its entry is gone
                                               (absolute deadline + 1 h), so a deleted user's
                                               sessions can be ended; expires with its
                                               longest-lived member, never sooner
``P:{U}:file-order``                    zset    ``<created ms, 13 digits>:<file id>:<JSON
                                               record>`` per file, all scored 0: newest first
                                               by ``ZRANGE … BYLEX REV``, so a page of the
                                               list is one command; its size is the account's
                                               file count (the quota)
``P:{U}:files``                         hash    file id -> that same member (read one file,
                                               delete it); both keys written and removed
                                               together in one script, after the bytes are in
                                               place and before they are removed
``P:{U}:folders``                       hash    folder id -> ``<parent>:<created ms>:<updated
                                               ms>:<name>``; parent empty at the top level,
                                               ``-`` for the top of a subtree being deleted
                                               (``service.store.folders``)
``P:{U}:folder-children:<F>``           zset    the folders in folder ``F`` (``root``: the top
                                               level), ``<name key>\0<id>`` all scored 0: by
                                               name with ``ZRANGE … BYLEX``, and a name taken
                                               by one lexical range
``P:{U}:folder-heights:<F>``            zset    the same folders' ids, each scored by how many
                                               levels of folders it holds below it (the depth
                                               bound of a move)
``P:{U}:folder-files:<F>``              zset    ``<created ms, 13 digits>:<file id>`` per file
                                               in ``F`` (``root``: the top level), all scored
                                               0: newest first, like ``file-order``
``P:{U}:top-files-placed``              string  ``1`` once every file recorded before folders
                                               existed is in ``folder-files:root``
``P:{U}:folder-trash``                  set     subtrees detached by a deletion whose folders
                                               and files are still being removed
``P:{U}:removed``                       set     ids of files and folders whose records are gone
                                               and whose bytes and aliases may still be there
                                               (``service.store.folder_removal``)
``P:{U}:settings``                      hash    setting name -> value, for the settings changed
                                               from their defaults
``P:{U}:mfa``                           hash    the account's second factors: TOTP secret
                                               ``t`` (sealed: AES-GCM with the operator's
                                               key, ``service.auth.secret_box``), enabled at
                                               ``ta``, last step a code was accepted for
                                               ``ts``; ``g`` the factors' generation, moved by
                                               every factor change and checked when a session
                                               is confirmed
``P:{U}:totp-pending``                  hash    a TOTP enrolment not yet confirmed: sealed
                                               secret ``s``, expiry ``e``; PEXPIREAT ``e``
                                               (10 minutes)
``P:{U}:recovery-codes``                set     HMAC-SHA-256 of each unused recovery code
``P:{U}:passkeys``                      hash    passkey id -> JSON: name, credential id and
                                               public key (base64url), created, transports
``P:{U}:passkey-uses``                  hash    passkey id -> ``<sign count>:<last used ms>``
``P:{U}:webauthn-challenges``           hash    ``register:<ses_…>`` or ``reauth:<ses_…>`` ->
                                               ``<expires ms>:<challenge>``, single use
``P:{U}:mfa-logins``                    hash    digest of a login's ``mfa_token`` ->
                                               ``<expires>:<answers>:<generation>:<WebAuthn
                                               challenge or ->:<password hash checked>``;
                                               PEXPIREAT its newest (5 minutes)
``P:session-replaced:{<entry>}``        string  the digest of the session that replaced this
                                               one (a reauthentication), while it is made:
                                               ending this session ends that one; lives 60 s
``P:folder-removals``                   set     user ids of accounts that may have a removal to
                                               finish, visited at start-up
``P:alias:<slug, lower case>``          hash    one vanity alias, found by its slug alone (no
                                               hash tag: the public path's one round trip):
                                               user id ``u`` and alias id ``i`` (without
                                               ``usr_``/``als_``), target ``t`` (``fil_…`` or
                                               ``fld_…``); only when set: views ``v``, max
                                               views ``m``, expiry ``e`` (ms), bcrypt hash
                                               ``p``, disabled ``x``, and ``k`` while the
                                               account's public aliases are switched off
                                               (``service.store.aliases``)
``P:{U}:aliases``                       zset    ``<target id>:<slug>`` per alias of the
                                               account, scored by when it was made (ms, which
                                               its id carries): newest first, an id's place,
                                               a target's aliases; its size is the account's
                                               alias count (the bound)
``P:{U}:alias-pending``                 hash    ``<target id>:<slug>`` -> ms, for an index
                                               member written ahead of its entry by a change
                                               still under way (a creation, a new slug);
                                               empty but for that moment
``P:alias-switches``                    set     user ids of accounts whose aliases may not all
                                               yet carry the account's public_aliases_enabled,
                                               visited at start-up
``P:alias-guesses:alias:<alias id>``    string  wrong passwords counted for one alias in the
                                               window; expires with the window
``P:alias-guesses:ip:<address>``        string  the same, for one client address (IPv6: its /64)
``P:alias-guesses:pair:<alias>:<addr>`` string  the same, for one alias from one address
``P:rate:{alias-ip:<address>}``         string  request-rate bucket of one client address on
                                               the public alias pages; lives seconds
``P:alias-cookie-secret``               string  the key that signed the cookie a folder alias's
                                               password grants, in releases before it was
                                               derived from the secrets key; deleted at start-up
``P:{U}:upload:<id>``                   hash    one resumable upload (``service.store.uploads``):
                                               its file id, length, offset, expiry, metadata,
                                               who made it, where its bytes are, the PATCH
                                               writing it now; once finished, its file.
                                               PEXPIREAT a week past its expiry
``P:{U}:uploads``                       hash    upload id -> ``<expires ms>:<length>`` of each
                                               unfinished upload (limits, the sweep)
``P:uploads``                           set     user ids of accounts that may have one
``P:{U}:audit``                         zset    the account's audit trail: ``<type>:<JSON
                                               event>`` scored by a sequence number (at least
                                               the event's ms × 1000, above every earlier
                                               one), newest last; trimmed on every write to
                                               FILEHOST_AUDIT_RETENTION_DAYS and
                                               FILEHOST_AUDIT_MAX_EVENTS, PEXPIREAT the newest
                                               event's time + the retention
``P:upgraded:uploader-keys``            string  present once the keys uploader configurations
                                               made before keys carried the upload-only mark
                                               were found (by their ``key.created`` event) and
                                               marked: a start-up step, done once; an upgrade
                                               mark (``upgrade_marks``), no data of its own
``P:replicated``                        string  the marker a write that must reach a replica
                                               writes before ``WAIT`` (FILEHOST_REPLICA_WAIT_MS);
                                               lives a minute
``P:backing-up``                        string  present while a backup copies the files' bytes
                                               out of an object store: deletions leave the
                                               bytes they remove noted for later meanwhile;
                                               expires 10 minutes after the backup last
                                               renewed it, should the backup die
``P:restoring``                         string  the id of the backup a ``restore`` is writing
                                               into an empty store; deleted when it is done, so
                                               one cut short can be run again
=====================================  ======  ===============================================

A backup (``service.store.backup``) copies every key under ``P:`` except the transient ones
(``is_transient``): rate buckets, the replication marker, a backup's and a restore's markers.
A restore takes a store that holds only upgrade marks for empty (every ``serve`` start writes
them, over no data), and removes them before writing the backup's records, which hold the
backup's own: a backup made before an upgrade still gets it.

The ``{U}`` hash tag keeps every key of one account in one Redis Cluster slot, so the scripts that
change several of them together stay valid on a cluster; the folder scripts, which walk parents
and subtrees, name the per-folder indexes they reach from the ``folder_*_prefix`` names below,
all under that tag. Digest entries stand alone: they are
found by digest only, and every write that pairs them with account keys is ordered so that a
failure half-way leaves nothing usable behind, and so that creating a session or key and deleting
its user exclude each other (see "Creating a credential" in ``service.store.sessions``); a key's
changes (edit, roll, revocation) are ordered so that once one has answered, every entry of the key
holds it (see "Changing a key" in ``service.store.key_entries``). A rate bucket's hash tag is the
whole name of a credential's entry, so the two share a slot and one script reads the entry and
takes from the bucket; a rolled key's secrets share the bucket of one of them, and every secret of
a key is drawn into that bucket's slot. A secret's ``key-gone`` record is tagged the same way, so
the lookup script reads it, when the entry is missing, in the same round trip. Raw secrets never
appear.
"""

from __future__ import annotations


class RedisKeys:
    __slots__ = (
        "_alias_entry",
        "_alias_guesses",
        "_key_entry",
        "_key_gone_open",
        "_leak_reports",
        "_login_failures",
        "_prefix",
        "_rate_bucket",
        "_session_entry",
        "_session_replaced_open",
        "_sso_starts",
        "alias_cookie_secret",
        "alias_switches",
        "backup_marker",
        "folder_removals",
        "replicated_marker",
        "restore_marker",
        "upload_accounts",
        "uploader_keys_marked",
        "users_by_email",
    )

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._key_entry = f"{prefix}:key:"
        self._key_gone_open = f"{prefix}:key-gone:{{"
        self._session_entry = f"{prefix}:session:"
        self._session_replaced_open = f"{prefix}:session-replaced:{{"
        self._rate_bucket = f"{prefix}:rate:"
        self._login_failures = f"{prefix}:login-failures:"
        self._leak_reports = f"{prefix}:leak-reports:"
        self._sso_starts = f"{prefix}:oidc-starts:"
        self.users_by_email = f"{prefix}:users:by-email"
        self.replicated_marker = f"{prefix}:replicated"
        self.restore_marker = f"{prefix}:restoring"
        self.backup_marker = f"{prefix}:backing-up"
        self.folder_removals = f"{prefix}:folder-removals"
        self._alias_entry = f"{prefix}:alias:"
        self._alias_guesses = f"{prefix}:alias-guesses:"
        self.alias_switches = f"{prefix}:alias-switches"
        self.alias_cookie_secret = f"{prefix}:alias-cookie-secret"
        self.uploader_keys_marked = f"{prefix}:upgraded:uploader-keys"
        self.upload_accounts = f"{prefix}:uploads"

    @property
    def prefix(self) -> str:
        return self._prefix

    def is_transient(self, name: str) -> bool:
        """Whether the key ``name`` is one a backup leaves out: a rate bucket (lives seconds,
        starts full again), the replication marker, a restore's marker."""
        return name.startswith(self._rate_bucket) or name in (
            self.replicated_marker,
            self.restore_marker,
            self.backup_marker,
        )

    @property
    def upgrade_marks(self) -> tuple[str, ...]:
        """The keys that say a one-time upgrade of the records was done: no data of their own,
        and written by every start, so a store a ``serve`` started on (over no data) holds
        them."""
        return (self.uploader_keys_marked,)

    def is_signed_in_state(self, name: str) -> bool:
        """Whether the key ``name`` holds a signed-in state (a session's entry, the mark of a
        session replaced by a reauthentication, a session's download ticket, an account's session
        index, its logins waiting for a second step): what a restore leaves out unless asked to
        keep sessions."""
        if name.startswith(
            (self._session_entry, self._session_replaced_open, self.download_ticket(""))
        ):
            return True
        head = f"{self._prefix}:{{"
        return name.startswith(head) and name.endswith(("}:sessions", "}:mfa-logins"))

    def account_files_owner(self, name: str) -> str | None:
        """The user id whose ``account_files`` key is named ``name``; None for any other key."""
        head, tail = f"{self._prefix}:{{", "}:files"
        if name.startswith(head) and name.endswith(tail):
            user_id = name[len(head) : -len(tail)]
            if "}" not in user_id and self.account_files(user_id) == name:
                return user_id
        return None

    def key_entry(self, secret_digest: str) -> str:
        return self._key_entry + secret_digest

    def key_gone(self, secret_digest: str) -> str:
        """Why and when a secret stopped working, in its entry's cluster slot."""
        return self.key_gone_of_entry(self.key_entry(secret_digest))

    def key_gone_of_entry(self, key_entry: str) -> str:
        """``key_gone`` of the secret whose entry is named ``key_entry``."""
        return self._key_gone_open + key_entry + "}"

    def session_entry(self, token_digest: str) -> str:
        return self._session_entry + token_digest

    def session_replaced(self, token_digest: str) -> str:
        """Which session replaced this one (a reauthentication), in its entry's cluster slot."""
        return self._session_replaced_open + self.session_entry(token_digest) + "}"

    def rate_bucket(self, credential_entry: str) -> str:
        return f"{self._rate_bucket}{{{credential_entry}}}"

    def login_failures_by_email(self, email_digest: str) -> str:
        return f"{self._login_failures}email:{email_digest}"

    def login_failures_by_address(self, address: str) -> str:
        return f"{self._login_failures}ip:{address}"

    def leak_reports_by_address(self, address: str) -> str:
        return f"{self._leak_reports}ip:{address}"

    def sso_starts_by_address(self, address: str) -> str:
        return f"{self._sso_starts}ip:{address}"

    def alias_entry(self, slug_key: str) -> str:
        """A vanity alias's entry, by its slug in lower case (``domain.aliases.slug_key``)."""
        return self._alias_entry + slug_key

    def alias_guesses_by_alias_address(self, alias_id: str, address: str) -> str:
        return f"{self._alias_guesses}pair:{alias_id}:{address}"

    def alias_guesses_by_alias(self, alias_id: str) -> str:
        return f"{self._alias_guesses}alias:{alias_id}"

    def alias_guesses_by_address(self, address: str) -> str:
        return f"{self._alias_guesses}ip:{address}"

    def alias_rate(self, address: str) -> str:
        """The public alias pages' request-rate bucket of one client address (transient)."""
        return f"{self._rate_bucket}{{alias-ip:{address}}}"

    def _account(self, user_id: str, name: str) -> str:
        return f"{self._prefix}:{{{user_id}}}:{name}"

    def user(self, user_id: str) -> str:
        return self._account(user_id, "user")

    def oidc_state(self, state_digest: str) -> str:
        return f"{self._prefix}:oidc-state:{{{state_digest}}}"

    def oidc_code(self, code_digest: str) -> str:
        return f"{self._prefix}:oidc-code:{{{code_digest}}}"

    def download_ticket(self, ticket_digest: str) -> str:
        return f"{self._prefix}:download-ticket:{ticket_digest}"

    def oidc_identity(self, identity_digest: str) -> str:
        return f"{self._prefix}:oidc-identity:{identity_digest}"

    def oidc_sid(self, sid_digest: str) -> str:
        return f"{self._prefix}:oidc-sid:{{{sid_digest}}}"

    def oidc_jti(self, jti_digest: str) -> str:
        return f"{self._prefix}:oidc-jti:{jti_digest}"

    def account_identities(self, user_id: str) -> str:
        return self._account(user_id, "identities")

    def account_keys(self, user_id: str) -> str:
        return self._account(user_id, "keys")

    def account_key_expiry(self, user_id: str) -> str:
        return self._account(user_id, "key-expiry")

    def account_key_last_used(self, user_id: str) -> str:
        return self._account(user_id, "key-last-used")

    def key_usage_day(self, user_id: str, key_id: str, day: str) -> str:
        return self._account(user_id, f"key-usage:{key_id}:{day}")

    def key_usage_last(self, user_id: str, key_id: str) -> str:
        return self._account(user_id, f"key-usage:{key_id}:last")

    def account_sessions(self, user_id: str) -> str:
        return self._account(user_id, "sessions")

    def account_files(self, user_id: str) -> str:
        return self._account(user_id, "files")

    def account_file_order(self, user_id: str) -> str:
        return self._account(user_id, "file-order")

    def account_audit(self, user_id: str) -> str:
        return self._account(user_id, "audit")

    def account_folders(self, user_id: str) -> str:
        return self._account(user_id, "folders")

    def folder_children(self, user_id: str, place: str) -> str:
        """The folders in ``place``: a folder id, or ``domain.folders.TOP`` for the top level."""
        return self.folder_children_prefix(user_id) + place

    def folder_heights(self, user_id: str, place: str) -> str:
        return self.folder_heights_prefix(user_id) + place

    def folder_files(self, user_id: str, place: str) -> str:
        return self.folder_files_prefix(user_id) + place

    # The three above without their place: the scripts that walk folders name them from these.
    def folder_children_prefix(self, user_id: str) -> str:
        return self._account(user_id, "folder-children:")

    def folder_heights_prefix(self, user_id: str) -> str:
        return self._account(user_id, "folder-heights:")

    def folder_files_prefix(self, user_id: str) -> str:
        return self._account(user_id, "folder-files:")

    def top_files_placed(self, user_id: str) -> str:
        return self._account(user_id, "top-files-placed")

    def folder_trash(self, user_id: str) -> str:
        return self._account(user_id, "folder-trash")

    def account_removed(self, user_id: str) -> str:
        return self._account(user_id, "removed")

    def account_uploads(self, user_id: str) -> str:
        return self._account(user_id, "uploads")

    def account_upload(self, user_id: str, upload_id: str) -> str:
        return self._account(user_id, f"upload:{upload_id}")

    def account_settings(self, user_id: str) -> str:
        return self._account(user_id, "settings")

    def account_aliases(self, user_id: str) -> str:
        return self._account(user_id, "aliases")

    def account_alias_pending(self, user_id: str) -> str:
        return self._account(user_id, "alias-pending")

    def account_mfa(self, user_id: str) -> str:
        return self._account(user_id, "mfa")

    def account_totp_pending(self, user_id: str) -> str:
        return self._account(user_id, "totp-pending")

    def account_recovery_codes(self, user_id: str) -> str:
        return self._account(user_id, "recovery-codes")

    def account_passkeys(self, user_id: str) -> str:
        return self._account(user_id, "passkeys")

    def account_passkey_uses(self, user_id: str) -> str:
        return self._account(user_id, "passkey-uses")

    def account_webauthn_challenges(self, user_id: str) -> str:
        return self._account(user_id, "webauthn-challenges")

    def account_mfa_logins(self, user_id: str) -> str:
        return self._account(user_id, "mfa-logins")

    def account_mfa_keys(self, user_id: str) -> tuple[str, ...]:
        """Every key of the account's second factors (what ``users reset-mfa`` and deleting
        the user remove; the factors' generation in ``account_mfa`` too)."""
        return (
            self.account_mfa(user_id),
            self.account_totp_pending(user_id),
            self.account_recovery_codes(user_id),
            self.account_passkeys(user_id),
            self.account_passkey_uses(user_id),
            self.account_webauthn_challenges(user_id),
            self.account_mfa_logins(user_id),
        )
