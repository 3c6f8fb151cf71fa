"""The dashboard's files themselves: no inline code or style anywhere, each page's one script,
no HTML built from data, nothing written to the console, no form that could put what it holds in
a URL, and no page with a hand-written copy of the permissions (the keys page draws them from
``js/permissions.js``; see test_modules.py)."""

from __future__ import annotations

import re
from pathlib import Path

from service.config import Settings
from service.dashboard import routes
from service.dashboard.routes import ASSETS, NOT_FOUND_PAGE, render
from service.dashboard.routes import PAGES as ROUTES
from tests.support.pages import PAGE_SCRIPTS, STATIC, parse

PAGES = (*ROUTES.values(), NOT_FOUND_PAGE)  # every page the dashboard serves
# Every script the pages can load, by its path under static/.
SCRIPTS = tuple(name for name, content_type in ASSETS.items() if content_type == "text/javascript")


def test_pages_have_no_inline_script_handler_or_style() -> None:
    assert set(PAGE_SCRIPTS) == set(PAGES)
    for name in PAGES:
        page = parse(name)
        assert page.problems == [], name
        assert page.scripts == [PAGE_SCRIPTS[name]], name
        assert ASSETS[PAGE_SCRIPTS[name]["src"].removeprefix("/static/")] == "text/javascript"


# The one form whose fields may be sent in a URL: the files page's search, whose fields are that
# page's own address (``/files?q=…``).
SEARCH_FORMS = {"files-find"}


def test_no_form_could_send_what_it_holds_in_a_url() -> None:
    """``form-action 'self'`` lets a download ticket's form be posted natively: every other form
    is sent by script, and if a page's script never ran, a native submission of one still puts
    nothing in a URL (a ``post`` goes in the body, a ``dialog`` nowhere)."""
    forms = [form for name in PAGES for form in parse(name).forms]
    assert len(forms) > 10
    for form in forms:
        if form.get("id") in SEARCH_FORMS:
            continue
        assert (form.get("method") or "").lower() in ("post", "dialog"), form
    made = [
        (path.name, match)
        for path in STATIC.joinpath("js").rglob("*.js")
        for match in re.findall(r'el\("form", \{ attrs: \{[^}]*\}', path.read_text("utf-8"))
    ]
    assert {name for name, _ in made} == {"reauth.js", "save.js"}
    for name, form in made:
        assert re.search(r'method: "post"', form, re.IGNORECASE), (name, form)


def test_the_scripts_build_no_html_from_strings_and_log_nothing() -> None:
    assert "js/api.js" in SCRIPTS
    assert all(name.startswith("js/") for name in SCRIPTS)  # every script is one of the modules
    sources = [STATIC.joinpath(*name.split("/")).read_text("utf-8") for name in SCRIPTS]
    code = "\n".join(
        line
        for source in sources
        for line in source.splitlines()
        if not line.lstrip().startswith("//")
    )
    for forbidden in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "console.",
        "localStorage",
        ".style.",
    ):
        assert forbidden not in code, forbidden
    # The token goes only into the Authorization header, never into a URL: in all the modules,
    # one line writes it anywhere.
    written = [line.strip() for line in code.splitlines() if "${token}" in line]
    assert written == ["headers.Authorization = `Bearer ${token}`;"]
    assert re.findall(r"\$\{token\}", code) == ["${token}"]


def test_no_page_writes_the_permission_checkboxes_by_hand() -> None:
    for name in PAGES:
        assert parse(name).permissions == [], name


def test_only_plain_files_of_known_kinds_under_static_are_assets(tmp_path: Path) -> None:
    """A file is served only with a known extension and a plain name; nothing hidden, no page,
    and nothing a symbolic link leads to (which could be outside the package)."""
    (tmp_path / "js" / "pages").mkdir(parents=True)
    for name in ("app.js", "style.css", "icon.svg", "page.html", "notes.md", ".hidden.js"):
        (tmp_path / name).write_text("x")
    (tmp_path / "js" / "pages" / "keys.js").write_text("x")
    (tmp_path / "js" / "Odd Name.js").write_text("x")
    (tmp_path / "js" / "backup.js~").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.js").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.js").write_text("x")
    (tmp_path / "js" / "linked.js").symlink_to(outside / "secret.js")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    assert routes._assets(tmp_path) == {
        "app.js": "text/javascript",
        "icon.svg": "image/svg+xml",
        "js/pages/keys.js": "text/javascript",
        "style.css": "text/css",
    }


def test_a_page_gets_the_services_own_settings_written_in_and_nothing_else() -> None:
    """The sessions page is served with the password minimum the service enforces; every
    ``{{name}}`` of every page is one the routes know (else adding them fails at start-up)."""
    served = render("sessions.html", Settings(password_min_length=12)).decode()
    assert 'minlength="12"' in served and "At least 12" in served
    for name in PAGES:
        assert "{{" not in render(name, Settings()).decode(), name


def test_times_are_written_by_one_module() -> None:
    """Every page shows a time the same way (how long ago, the local time, UTC on hover):
    through js/time.js, the only module that formats one."""
    formatting = ("DateTimeFormat", "RelativeTimeFormat", "toLocale", "getHours", "toISOString")
    assert all(
        word in STATIC.joinpath("js", "time.js").read_text("utf-8") for word in formatting[:2]
    )
    for name in SCRIPTS:
        if name != "js/time.js":
            source = STATIC.joinpath(*name.split("/")).read_text("utf-8")
            assert not [word for word in formatting if word in source], name
