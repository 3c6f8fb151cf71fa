"""The ``users`` command line, run as a user would: ``python -m service users ...`` in a
subprocess, against the test Redis server (or the embedded store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.config.readers import secret_keys
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock, iso_of
from tests.support.files import uploaded
from tests.support.mfa import SECRETS_KEY, enable_totp
from tests.support.paths import REPO_ROOT
from tests.support.processes import CLI_BOUND
from tests.support.redis import free_port
from tests.support.terminal import on_a_terminal

PASSWORD = "Tr0ub4dor&3-horse"


def cli_env(redis_url: str | None, **extra: str) -> dict[str, str]:
    """The caller's environment without any inherited service setting, plus ours."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "REDIS_URL" and not name.startswith("FILEHOST_")
    }
    env["FILEHOST_BCRYPT_COST"] = "4"
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=CLI_BOUND,
        check=False,
    )


def create_user(email: str, env: dict[str, str], password: str = PASSWORD):  # type: ignore[no-untyped-def]
    return run_cli(
        "users", "create", "--email", email, "--password-stdin", env=env, stdin=password + "\n"
    )


# -- create and list -----------------------------------------------------------------------------


def test_create_then_list_shows_the_lowercased_email(redis_url: str) -> None:
    env = cli_env(redis_url)

    created = create_user("  Alice.Smith@Example.COM ", env)

    assert created.returncode == 0, created.stderr
    assert "alice.smith@example.com" in created.stdout
    listed = run_cli("users", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    header, *lines = listed.stdout.splitlines()
    assert header.split("  ")[0] == "ID" and len(lines) == 1
    assert "alice.smith@example.com" in lines[0]
    assert "Alice.Smith" not in listed.stdout


def test_list_json_prints_one_object_per_line(redis_url: str) -> None:
    env = cli_env(redis_url)
    for email in ("bob@example.com", "Carol@Example.org"):
        result = create_user(email, env)
        assert result.returncode == 0, result.stderr

    listed = run_cli("users", "list", "--json", env=env)

    assert listed.returncode == 0, listed.stderr
    lines = [line for line in listed.stdout.splitlines() if line.strip()]
    assert len(lines) == 2
    users = [json.loads(line) for line in lines]
    assert {user["email"] for user in users} == {"bob@example.com", "carol@example.org"}
    for user in users:
        assert set(user) == {"id", "email", "created_at", "second_factor", "last_login_at"}
        assert (user["second_factor"], user["last_login_at"]) == ("none", None)
        assert isinstance(user["id"], str) and user["id"]
        assert isinstance(user["created_at"], str) and user["created_at"]
    assert len({user["id"] for user in users}) == 2


async def test_list_shows_a_header_each_accounts_second_factors_and_last_login(
    make_api: Any, redis_url: str, clock: FakeClock
) -> None:
    api = await make_api(secrets_key=secret_keys("K", SECRETS_KEY))
    token = await api.user_with_session("totp@example.com")
    logged_in = iso_of(clock)
    await enable_totp(api, token, clock)
    env = cli_env(redis_url)
    assert create_user("quiet@example.com", env).returncode == 0

    listed = run_cli("users", "list", env=env)

    assert listed.returncode == 0, listed.stderr
    header, *rows = (line.split() for line in listed.stdout.splitlines())
    assert header == ["ID", "EMAIL", "CREATED", "SECOND", "FACTOR", "LAST", "LOGIN"]
    by_email = {row[1]: row[3:] for row in rows}
    assert by_email == {
        "totp@example.com": ["totp", logged_in],
        "quiet@example.com": ["none", "never"],
    }
    as_json = [
        json.loads(line) for line in run_cli("users", "list", "--json", env=env).stdout.splitlines()
    ]
    logins = {user["email"]: user["last_login_at"] for user in as_json}
    assert logins == {"totp@example.com": logged_in, "quiet@example.com": None}

    # A refusal in the command line's words: the option it was about, no code, no envelope.
    refused = create_user("not-an-email", env)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: --email must be an e-mail address")
    for api_word in ("validation_failed", "{", "Some fields are invalid", "Traceback"):
        assert api_word not in refused.stderr


def test_list_with_no_users_prints_nothing(redis_url: str) -> None:
    listed = run_cli("users", "list", "--json", env=cli_env(redis_url))

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == ""


async def test_created_user_logs_in_with_exactly_the_stdin_line(api: Api, redis_url: str) -> None:
    assert create_user("dave@example.com", cli_env(redis_url)).returncode == 0

    # The line read from stdin, newline stripped, is the password: nothing more, nothing less.
    token = await api.login("DAVE@example.com", PASSWORD)
    assert (await api.files(token=token)).status == 200
    for wrong in (PASSWORD + "\n", PASSWORD[:-1]):
        response = await api.client.post(
            "/api/v1/auth/login", json={"email": "dave@example.com", "password": wrong}
        )
        await assert_error(response, 401, "invalid_credentials")


# -- refusals ------------------------------------------------------------------------------------


def test_same_email_in_another_case_is_refused(redis_url: str) -> None:
    env = cli_env(redis_url)
    assert create_user("erin@example.com", env).returncode == 0

    again = create_user("ERIN@Example.com", env, password="another password 123")

    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert "Traceback" not in again.stderr
    listed = run_cli("users", "list", "--json", env=env)
    assert [json.loads(line)["email"] for line in listed.stdout.splitlines()] == [
        "erin@example.com"
    ]


@pytest.mark.parametrize("email", ["not-an-email", "a@b", "two@@example.com", "sp ace@example.com"])
def test_invalid_email_is_refused(redis_url: str, email: str) -> None:
    env = cli_env(redis_url)

    result = create_user(email, env)

    assert result.returncode == 1
    assert "email" in result.stderr
    assert "Traceback" not in result.stderr
    assert run_cli("users", "list", env=env).stdout.strip() == ""


def test_short_password_is_refused_naming_the_password(redis_url: str) -> None:
    env = cli_env(redis_url)

    result = create_user("frank@example.com", env, password="1234567")

    assert result.returncode == 1
    assert "password" in result.stderr
    assert "8" in result.stderr
    assert run_cli("users", "list", env=env).stdout.strip() == ""


def test_eight_character_password_is_accepted(redis_url: str) -> None:
    result = create_user("gina@example.com", cli_env(redis_url), password="12345678")

    assert result.returncode == 0, result.stderr


def test_password_min_length_setting_changes_the_bound(redis_url: str) -> None:
    env = cli_env(redis_url, FILEHOST_PASSWORD_MIN_LENGTH="12")

    too_short = create_user("hank@example.com", env, password="12345678901")
    long_enough = create_user("hank@example.com", env, password="123456789012")

    assert too_short.returncode == 1
    assert "password" in too_short.stderr
    assert "12" in too_short.stderr
    assert long_enough.returncode == 0, long_enough.stderr


def test_password_never_appears_in_the_output(redis_url: str) -> None:
    env = cli_env(redis_url)
    secret = "Zebra-Quartz-Marmalade-42"
    short_secret = "Zq9#xY"

    results = [
        create_user("ivy@example.com", env, password=secret),
        create_user("IVY@example.com", env, password=secret),  # duplicate
        create_user("bad email", env, password=secret),  # invalid email
        create_user("jack@example.com", env, password=short_secret),  # too short
        run_cli("users", "list", env=env),
        run_cli("users", "list", "--json", env=env),
        run_cli("users", "delete", "--email", "ivy@example.com", "--yes", env=env),
    ]

    assert [r.returncode for r in results] == [0, 1, 1, 1, 0, 0, 0]
    for result in results:
        assert secret not in result.stdout and secret not in result.stderr
        assert short_secret not in result.stdout and short_secret not in result.stderr


# -- delete --------------------------------------------------------------------------------------


def test_delete_removes_the_user(redis_url: str) -> None:
    env = cli_env(redis_url)
    assert create_user("kim@example.com", env).returncode == 0
    assert create_user("lee@example.com", env).returncode == 0

    deleted = run_cli("users", "delete", "--email", "KIM@example.com", "--yes", env=env)

    assert deleted.returncode == 0, deleted.stderr
    assert "kim@example.com" in deleted.stdout
    listed = run_cli("users", "list", "--json", env=env)
    assert [json.loads(line)["email"] for line in listed.stdout.splitlines()] == ["lee@example.com"]
    # The email is free again.
    assert create_user("kim@example.com", env).returncode == 0


def test_delete_unknown_email_is_refused(redis_url: str) -> None:
    env = cli_env(redis_url)
    assert create_user("mia@example.com", env).returncode == 0

    result = run_cli("users", "delete", "--email", "nobody@example.com", env=env)

    assert result.returncode == 1
    assert "No user" in result.stderr
    assert "Traceback" not in result.stderr
    _header, *users = run_cli("users", "list", env=env).stdout.splitlines()
    assert len(users) == 1


async def test_delete_refuses_the_users_session_and_api_key(api: Api, redis_url: str) -> None:
    token = await api.user_with_session("nora@example.com")
    key = await api.create_key(token)
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await api.files(token=token)).status == 200
    # Another user's credentials must survive the deletion.
    other_token = await api.user_with_session("oscar@example.com")
    other_key = await api.create_key(other_token)

    deleted = run_cli(
        "users", "delete", "--email", "nora@example.com", "--yes", env=cli_env(redis_url)
    )

    assert deleted.returncode == 0, deleted.stderr
    await assert_error(await api.files(key=key["secret_key"]), 401, "invalid_api_key")
    await assert_error(await api.files(token=token), 401, "invalid_session")
    response = await api.client.post(
        "/api/v1/auth/login",
        json={"email": "nora@example.com", "password": "correct horse battery staple"},
    )
    await assert_error(response, 401, "invalid_credentials")
    assert (await api.files(key=other_key["secret_key"])).status == 200
    assert (await api.files(token=other_token)).status == 200


async def test_a_deletion_cut_short_is_finished_by_running_it_again(
    api: Api, redis_url: str, redis_client: redis_sync.Redis
) -> None:
    """A deletion that crashed right after removing the user record (its first step) must not
    leave the user's credentials working, nor refuse to be repeated."""
    token = await api.user_with_session("uma@example.com")
    key = await api.create_key(token)
    user_id = redis_client.hget("fh:users:by-email", "uma@example.com")
    redis_client.delete(f"fh:{{{user_id}}}:user")  # the crash, just after step 1

    again = run_cli(
        "users", "delete", "--email", "uma@example.com", "--yes", env=cli_env(redis_url)
    )

    assert again.returncode == 0, again.stderr
    assert "cut short" in again.stdout
    await assert_error(await api.files(key=key["secret_key"]), 401, "invalid_api_key")
    await assert_error(await api.files(token=token), 401, "invalid_session")
    assert redis_client.keys(f"fh:{{{user_id}}}:*") == []
    assert create_user("uma@example.com", cli_env(redis_url)).returncode == 0  # email free


# -- usage and settings errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("users", "create", "--password-stdin"),
        ("users", "delete"),
        ("users", "create", "--email", "x@example.com"),
        ("users",),
        ("users", "rename", "--email", "x@example.com"),
        ("users", "set-password", "--email", "x@example.com"),
        ("backup",),
        ("backup", "--to", "somewhere", "--max-pause-ms", "0"),
        ("backup", "--to", "somewhere", "--max-pause-ms", "soon"),
        ("restore",),
        ("users", "list", "extra"),
        (),
    ],
)
def test_bad_usage_exits_2(redis_url: str, args: tuple[str, ...]) -> None:
    result = run_cli(*args, env=cli_env(redis_url), stdin=PASSWORD + "\n")

    assert result.returncode == 2
    assert "usage:" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_email_names_the_option(redis_url: str) -> None:
    result = run_cli("users", "create", "--password-stdin", env=cli_env(redis_url))

    assert result.returncode == 2
    assert "--email" in result.stderr


def test_bad_setting_exits_2_naming_it(redis_url: str) -> None:
    env = cli_env(redis_url, FILEHOST_BCRYPT_COST="abc")

    result = create_user("pat@example.com", env)

    assert result.returncode == 2
    assert "FILEHOST_BCRYPT_COST" in result.stderr
    assert "Traceback" not in result.stderr
    assert run_cli("users", "list", env=cli_env(redis_url)).stdout.strip() == ""


def test_redis_url_password_is_not_echoed_on_a_bad_scheme() -> None:
    env = cli_env("http://admin:Hunter2-Secret@127.0.0.1:1/0")

    result = run_cli("users", "list", env=env)

    assert result.returncode == 2
    assert "REDIS_URL" in result.stderr
    assert "Hunter2-Secret" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "url",
    [
        "redis://:Hunter2-Secret@127.0.0.1:notaport/0",
        "redis://:Hunter2-Secret@127.0.0.1:99999/0",
        "redis://:Hunter2-Secret@[::1",
        "redis://:Hunter2-Secret@127.0.0.1:6379/abc",  # was database 0, quietly
    ],
)
def test_a_malformed_redis_url_is_a_configuration_error_that_never_echoes_it(url: str) -> None:
    result = run_cli("users", "list", env=cli_env(url))

    assert result.returncode == 2
    assert result.stderr.startswith("configuration error: REDIS_URL "), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "Hunter2-Secret" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "args",
    [("users", "list"), ("users", "create", "--email", "q@example.com", "--password-stdin")],
)
def test_unreachable_redis_exits_1_without_a_traceback(args: tuple[str, ...]) -> None:
    url = f"redis://:Secret-Pw-987@127.0.0.1:{free_port()}/0"

    result = run_cli(*args, env=cli_env(url), stdin=PASSWORD + "\n")

    assert result.returncode == 1
    assert "unreachable" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Secret-Pw-987" not in result.stderr + result.stdout
    assert PASSWORD not in result.stderr + result.stdout


# -- embedded store ------------------------------------------------------------------------------


def test_embedded_store_without_serve_persists_and_stops_its_server(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = cli_env(None, FILEHOST_DATA_DIR=str(data_dir))

    created = create_user("rita@example.com", env)
    assert created.returncode == 0, created.stderr

    # The CLI started the embedded server and stopped it again when done.
    client = redis_sync.Redis(
        unix_socket_path=str(data_dir / "redis.sock"),
        socket_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        with pytest.raises(redis_sync.ConnectionError):
            client.ping()
    finally:
        client.close()
    assert (data_dir / "appendonlydir").is_dir()  # the data is on disk, not in a live server

    # A second run starts it again on the same data and sees the user.
    listed = run_cli("users", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["email"] for line in listed.stdout.splitlines()] == [
        "rita@example.com"
    ]


async def test_delete_removes_the_users_files_bytes_and_all(
    make_api: Any, redis_url: str, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path)
    token = await api.user_with_session("pia@example.com")
    other_token = await api.user_with_session("quinn@example.com")
    mine = [await uploaded(api, b"pia %d" % n, token=token) for n in range(3)]
    theirs = await uploaded(api, b"quinn's", token=other_token)
    stored = tmp_path / "files"
    assert {path.name for path in stored.iterdir()} == {f["id"] for f in [*mine, theirs]}

    env = cli_env(redis_url, FILEHOST_DATA_DIR=str(tmp_path))
    deleted = run_cli("users", "delete", "--email", "pia@example.com", "--yes", env=env)

    assert deleted.returncode == 0, deleted.stderr
    assert "3 file(s) removed" in deleted.stdout
    assert {path.name for path in stored.iterdir()} == {theirs["id"]}
    response = await api.client.get(
        f"/api/v1/files/{theirs['id']}/content", headers=bearer(other_token)
    )
    assert await response.read() == b"quinn's"


# -- delete asks first ---------------------------------------------------------------------------


async def user_with_keys_files_and_a_session(api: Api, email: str) -> str:
    """A user with 2 API keys, 3 files and 1 session; that session's token."""
    token = await api.user_with_session(email)
    for _ in range(2):
        await api.create_key(token)
    for n in range(3):
        await uploaded(api, b"file %d" % n, token=token)
    return token


async def test_delete_off_a_terminal_without_yes_is_refused_naming_what_it_would_delete(
    make_api: Any, redis_url: str, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path)
    token = await user_with_keys_files_and_a_session(api, "rae@example.com")

    result = run_cli(
        "users", "delete", "--email", "rae@example.com", env=cli_env(redis_url), stdin=""
    )

    assert result.returncode == 2
    assert "--yes" in result.stderr
    for counted in ("2 API keys", "3 files", "1 session"):
        assert counted in result.stderr, result.stderr
    assert (await api.files(token=token)).status == 200  # nothing was deleted
    assert len(list((tmp_path / "files").iterdir())) == 3


async def test_delete_on_a_terminal_says_what_is_lost_and_deletes_on_yes(
    make_api: Any, redis_url: str, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path)
    token = await user_with_keys_files_and_a_session(api, "sol@example.com")
    env = cli_env(redis_url, FILEHOST_DATA_DIR=str(tmp_path))

    with on_a_terminal("users", "delete", "--email", "SOL@example.com", env=env) as terminal:
        question = terminal.expect("[y/N]")
        terminal.type("y")
        assert terminal.wait() == 0, terminal.shown

    assert "sol@example.com" in question
    for counted in ("2 API keys", "3 files", "1 session", "cannot be undone"):
        assert counted in question
    assert "deleted user sol@example.com" in terminal.shown
    await assert_error(await api.files(token=token), 401, "invalid_session")
    assert list((tmp_path / "files").iterdir()) == []


@pytest.mark.parametrize("answer", ["", "n", "no", "yes please"])
async def test_delete_on_a_terminal_keeps_the_user_unless_the_answer_is_yes(
    api: Api, redis_url: str, answer: str
) -> None:
    token = await api.user_with_session("tia@example.com")

    with on_a_terminal(
        "users", "delete", "--email", "tia@example.com", env=cli_env(redis_url)
    ) as terminal:
        terminal.expect("[y/N]")
        terminal.type(answer)
        assert terminal.wait() == 1

    assert "not deleted" in terminal.shown
    assert (await api.files(token=token)).status == 200


# -- set-password --------------------------------------------------------------------------------

NEW_PASSWORD = "a new and long passphrase"


async def test_set_password_replaces_it_ends_every_session_and_keeps_the_keys(
    api: Api, redis_url: str
) -> None:
    first = await api.user_with_session("una@example.com")
    second = await api.login("una@example.com")
    key = await api.create_key(first)
    other = await api.user_with_session("vic@example.com")

    result = run_cli(
        "users",
        "set-password",
        "--email",
        "UNA@example.com",
        "--password-stdin",
        env=cli_env(redis_url),
        stdin=NEW_PASSWORD + "\n",
    )

    assert result.returncode == 0, result.stderr
    assert "2 sessions ended" in result.stdout
    for token in (first, second):
        await assert_error(await api.files(token=token), 401, "invalid_session")
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await api.files(token=other)).status == 200  # another account is untouched
    response = await api.client.post(
        "/api/v1/auth/login",
        json={"email": "una@example.com", "password": "correct horse battery staple"},
    )
    await assert_error(response, 401, "invalid_credentials")
    token = await api.login("una@example.com", NEW_PASSWORD)
    events = await api.client.get(
        "/api/v1/audit-events?type=password.changed", headers=bearer(token)
    )
    [event] = (await events.json())["data"]["events"]
    assert event["actor"] == {"type": "cli"}
    assert NEW_PASSWORD not in result.stdout + result.stderr


async def test_set_password_holds_the_new_one_to_the_minimum_length_setting(
    api: Api, redis_url: str
) -> None:
    token = await api.user_with_session("wes@example.com")
    env = cli_env(redis_url, FILEHOST_PASSWORD_MIN_LENGTH="30")

    result = run_cli(
        "users",
        "set-password",
        "--email",
        "wes@example.com",
        "--password-stdin",
        env=env,
        stdin=NEW_PASSWORD + "\n",
    )

    assert result.returncode == 1
    assert "password" in result.stderr and "30" in result.stderr
    assert (await api.files(token=token)).status == 200  # nothing changed, nothing ended
    await api.login("wes@example.com")


def test_set_password_of_an_unknown_email_is_refused(redis_url: str) -> None:
    result = run_cli(
        "users",
        "set-password",
        "--email",
        "nobody@example.com",
        "--password-stdin",
        env=cli_env(redis_url),
        stdin=NEW_PASSWORD + "\n",
    )

    assert result.returncode == 1
    assert "No user" in result.stderr
    assert "Traceback" not in result.stderr


async def test_set_password_on_a_terminal_asks_twice_without_echo(api: Api, redis_url: str) -> None:
    await api.create_user("xia@example.com")
    args = ("users", "set-password", "--email", "xia@example.com", "--password-stdin")

    with on_a_terminal(*args, env=cli_env(redis_url)) as terminal:
        terminal.expect("Password: ")
        terminal.type(NEW_PASSWORD)
        terminal.expect("Repeat it: ")
        terminal.type(NEW_PASSWORD + "!")  # a typo: nothing changes
        assert terminal.wait() == 1
    assert "differ" in terminal.shown
    with on_a_terminal(*args, env=cli_env(redis_url)) as terminal:
        terminal.expect("Password: ")
        terminal.type(NEW_PASSWORD)
        terminal.expect("Repeat it: ")
        terminal.type(NEW_PASSWORD)
        assert terminal.wait() == 0, terminal.shown

    assert NEW_PASSWORD not in terminal.shown  # typed, never shown
    await api.login("xia@example.com", NEW_PASSWORD)


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("users",),
        ("users", "create"),
        ("users", "set-password"),
        ("users", "delete"),
        ("backup",),
        ("restore",),
    ],
)
def test_help_names_the_installed_command_and_gives_examples(args: tuple[str, ...]) -> None:
    installed = Path(sys.executable).parent / "filehost-auth"

    result = subprocess.run(
        [str(installed), *args, "--help"],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: filehost-auth {' '.join(args)}".rstrip() + " ")
    examples = result.stdout.split("\nexamples:\n")[1]
    assert "filehost-auth " in examples.splitlines()[0]
    assert "python -m service" not in examples
    if not args:
        assert "Installed as `filehost-auth`" in result.stdout


async def test_delete_removes_the_users_folders_settings_and_bytes_of_a_removal_cut_short(
    make_api: Any, redis_url: str, redis_client: redis_sync.Redis, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path)
    user = await api.create_user("rob@example.com")
    token = await api.login("rob@example.com")
    headers = bearer(token)
    made = await api.client.post("/api/v1/folders", json={"name": "docs"}, headers=headers)
    docs = (await made.json())["data"]
    inner = await api.client.post(
        "/api/v1/folders", json={"name": "inner", "parent_id": docs["id"]}, headers=headers
    )
    assert inner.status == 201
    in_docs = await uploaded(api, b"in docs", token=token, folder_id=docs["id"])
    changed = await api.client.patch(
        "/api/v1/settings", json={"default_folder_id": docs["id"]}, headers=headers
    )
    assert changed.status == 200
    # A deleted file whose bytes are still to go, as a removal cut short leaves it.
    noted = await uploaded(api, b"noted", token=token)
    member = redis_client.hget(f"fh:{{{user.id}}}:files", noted["id"])
    redis_client.hdel(f"fh:{{{user.id}}}:files", noted["id"])
    redis_client.zrem(f"fh:{{{user.id}}}:file-order", member)
    redis_client.zrem(f"fh:{{{user.id}}}:folder-files:root", member[:40])
    redis_client.sadd(f"fh:{{{user.id}}}:removed", noted["id"])
    stored = tmp_path / "files"
    assert {path.name for path in stored.iterdir()} == {in_docs["id"], noted["id"]}

    env = cli_env(redis_url, FILEHOST_DATA_DIR=str(tmp_path))
    deleted = run_cli("users", "delete", "--email", "rob@example.com", "--yes", env=env)

    assert deleted.returncode == 0, deleted.stderr
    assert "2 file(s) removed" in deleted.stdout
    assert list(stored.iterdir()) == []
    assert redis_client.keys(f"*{{{user.id}}}*") == []
