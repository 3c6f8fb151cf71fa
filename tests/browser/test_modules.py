"""The dashboard's JavaScript modules as the browser loads them: every import of every served
module resolves to a served module that exports what is imported, every module is served,
shipped in the package and reached from a page, and the permissions the pages render from
(``js/permissions.js``) are the service's.

Without a build step nothing else checks the imports before a browser does, and one that does
not resolve stops the whole page (a module graph that fails to link runs nothing)."""

from __future__ import annotations

import glob
import re
import tomllib
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path, PurePosixPath
from posixpath import normpath

import pytest
from playwright.async_api import expect

from service.api.validation import MAX_EXPIRES_DAYS, MAX_KEY_NAME_LENGTH, _check_name
from service.auth.rate_limits import KEY_MAX_BURST, KEY_MAX_PER_SECOND
from service.dashboard.routes import ASSETS, NOT_FOUND_PAGE, PAGES, STATIC_PREFIX
from service.domain.file_search import name_holds, search_words
from service.domain.folders import name_key
from service.domain.key_rules import MAX_ALLOWED_IPS, MAX_NETWORK_TEXT, canonical_network
from service.domain.permissions import ENFORCED_BY, PERMISSION_DESCRIPTIONS, PERMISSIONS
from tests.support.browser import LATER_PERMISSIONS, Tab, create_key, sign_in
from tests.support.pages import PAGE_SCRIPTS
from tests.support.paths import REPO_ROOT

STATIC = files("service.dashboard").joinpath("static")
# Every module, by its path under static/: what the pages can load.
MODULES = {
    name: STATIC.joinpath(*name.split("/")).read_text("utf-8")
    for name, content_type in ASSETS.items()
    if content_type == "text/javascript"
}

# A static import or re-export: `import {a, b as c} from "./x.js";`, `import "./x.js";`,
# `export {a} from "./x.js";`. The clause holds only names, braces, commas and `as`.
IMPORT = re.compile(
    r'^(import|export)\s+(?:([\w$\s{},*]+?)\s*from\s*)?"([^"]*)";',
    re.MULTILINE,
)
DECLARED_EXPORT = re.compile(
    r"^export\s+(?:async\s+)?(?:function\*?|class|const|let|var)\s+([\w$]+)", re.MULTILINE
)
LISTED_EXPORT = re.compile(r"^export\s*\{([^}]*)\}", re.MULTILINE)


def code_of(source: str) -> str:
    """The source without its comments (whole lines of ``//``, as the modules write them)."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))


def exports_of(source: str) -> set[str]:
    code = code_of(source)
    names = set(DECLARED_EXPORT.findall(code))
    for listed in LISTED_EXPORT.findall(code):
        for item in listed.split(","):
            if item.strip():
                names.add(item.split(" as ")[-1].strip())
    if re.search(r"^export\s+default\b", code, re.MULTILINE):
        names.add("default")
    return names


def imported_names(clause: str) -> Iterator[str]:
    """What an import clause takes from the other module: `{a, b as c}` takes a and b, a
    default import `x` takes default, and `* as m` nothing in particular."""
    braces = re.search(r"\{([^}]*)\}", clause)
    if braces:
        for item in braces.group(1).split(","):
            if item.strip():
                yield item.split(" as ")[0].strip()
    outside = re.sub(r"\{[^}]*\}", "", clause).replace(",", " ").split()
    if outside and outside[0] != "*":
        yield "default"


def imports_of(name: str) -> list[tuple[str, str, str]]:
    """(kind, clause, specifier) of each static import or re-export in module ``name``; fails
    on any import this cannot read, so that none goes unchecked."""
    code = code_of(MODULES[name])
    found = [match.groups("") for match in IMPORT.finditer(code)]
    rest = IMPORT.sub("", code)
    assert not re.search(r"^\s*import\b", rest, re.MULTILINE), f"{name}: an import not read"
    assert not re.search(r"\bimport\s*\(", rest), f"{name}: a dynamic import, unchecked"
    return found


def resolve(name: str, specifier: str) -> str:
    """The served path (under static/) that ``specifier`` in module ``name`` loads, as a
    browser resolves it against the module's URL."""
    assert specifier.startswith(("./", "../")), f"{name}: {specifier!r} is not relative"
    url = normpath(str(PurePosixPath(STATIC_PREFIX + name).parent / specifier))
    assert url.startswith(STATIC_PREFIX), f"{name}: {specifier!r} leaves /static/"
    return url.removeprefix(STATIC_PREFIX)


def test_every_relative_import_resolves_to_a_served_module_that_exports_it() -> None:
    assert "js/pages/keys.js" in MODULES and "js/permissions.js" in MODULES
    checked = 0
    for name in MODULES:
        for _, clause, specifier in imports_of(name):
            target = resolve(name, specifier)
            assert ASSETS.get(target) == "text/javascript", f"{name}: {specifier} is not served"
            missing = set(imported_names(clause)) - exports_of(MODULES[target])
            assert not missing, f"{name}: {target} does not export {sorted(missing)}"
            checked += 1
    assert checked > len(MODULES)  # the pattern does find the imports


def test_every_module_is_served_and_loaded_by_a_page() -> None:
    on_disk = {
        path.relative_to(Path(str(STATIC))).as_posix()
        for path in Path(str(STATIC)).joinpath("js").rglob("*")
        if path.is_file()
    }
    assert on_disk == set(MODULES)
    # From each page's script, everything it imports, and so on: that is every module.
    reached: set[str] = set()
    waiting = [script["src"].removeprefix(STATIC_PREFIX) for script in PAGE_SCRIPTS.values()]
    while waiting:
        name = waiting.pop()
        if name not in reached:
            reached.add(name)
            waiting += [resolve(name, specifier) for _, _, specifier in imports_of(name)]
    assert reached == set(MODULES)


def test_the_package_data_ships_every_served_file() -> None:
    """An installed (not editable) package holds only what pyproject.toml's package-data
    names: every page and asset must match one of its patterns."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["service.dashboard"]
    package = Path(str(files("service.dashboard")))
    shipped = {found for pattern in patterns for found in glob.glob(pattern, root_dir=package)}
    served = {f"static/{name}" for name in [*PAGES.values(), NOT_FOUND_PAGE, *ASSETS]}
    assert served - shipped == set()


@pytest.mark.asyncio(loop_scope="module")
async def test_the_permission_list_is_the_services(tab: Tab) -> None:
    """Names, what each grants and who enforces it, as service/domain/permissions.py says."""
    page = tab.page
    await page.goto("/")
    listed = await page.evaluate(
        """async () => (await import('/static/js/permissions.js')).PERMISSIONS
            .map((item) => [item.name, item.description, item.enforcedBy])"""
    )
    assert listed == [
        [name, PERMISSION_DESCRIPTIONS[name], ENFORCED_BY[name]] for name in PERMISSIONS
    ]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_keys_page_draws_both_permission_grids_from_the_list(tab: Tab, user: str) -> None:
    page = tab.page
    await sign_in(page, user)
    for grid, prefix in (("permissions", "perm-"), ("edit-permissions", "edit-perm-")):
        boxes = page.locator(f'input[type="checkbox"][name="{grid}"]')
        drawn = await boxes.evaluate_all(
            """(boxes) => boxes.map((box) => [
                box.value, box.id, box.labels[0].textContent, Boolean(box.closest("details"))
            ])"""
        )
        assert drawn == [
            [
                name,
                prefix + name.replace(".", "-"),
                f"{name.split('.')[1].capitalize()} {PERMISSION_DESCRIPTIONS[name]}",
                ENFORCED_BY[name] != "service",  # behind the disclosure unless enforced here
            ]
            for name in sorted(PERMISSIONS, key=lambda name: ENFORCED_BY[name] != "service")
        ], grid
    # The note on the API keys group describes that group, in each grid.
    for note in ("perm-keys-note", "edit-perm-keys-note"):
        group = page.locator(f'fieldset[aria-describedby="{note}"] legend')
        await expect(group).to_have_text("API keys")

    # What the service enforces is offered first; the rest waits behind a disclosure that says
    # why, closed until opened.
    await page.locator("#create-open").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await expect(dialog.get_by_role("checkbox", name="Read List files")).to_be_visible()
    await expect(dialog.get_by_role("checkbox", name="Read List a folder's")).to_be_visible()
    await expect(dialog.get_by_role("checkbox", name="Read List vanity aliases")).to_be_visible()
    keys = dialog.get_by_role("checkbox", name=re.compile(r"^Read Nothing: only a signed-in"))
    await expect(keys).to_be_hidden()
    await dialog.get_by_text(LATER_PERMISSIONS).click()
    await expect(keys).to_be_visible()
    await expect(dialog.locator("#perm-later-about")).to_contain_text(
        "The API key permissions grant nothing here"
    )
    await dialog.get_by_role("button", name="Cancel").click()

    # A key created with some is edited with exactly those checked, the disclosure open when
    # it holds one of those behind it, so nothing it holds is out of sight.
    await create_key(page, "drawn", ["keys.read", "settings.read"])
    await page.get_by_role("button", name="Edit key drawn").click()
    checked = page.locator('input[name="edit-permissions"]:checked')
    assert await checked.evaluate_all("(boxes) => boxes.map((box) => box.value)") == [
        "settings.read",  # what the service enforces first, as the grid draws them
        "keys.read",
    ]
    await expect(checked).to_have_count(2)
    for box in await checked.all():
        await expect(box).to_be_visible()


# Allow-list entries the service takes or refuses, each for a reason of Python's ipaddress.
NETWORK_SAMPLES = [
    "203.0.113.7",
    "10.0.0.0/8",
    "10.1.2.3/8",  # host bits set: taken, cleared
    "0.0.0.0/0",
    "10.0.0.0/08",  # a prefix with a leading zero
    "10.0.0.0/255.0.0.0",  # a netmask
    "10.0.0.0/0.0.0.255",  # a hostmask
    "10.0.0.0/255.0.255.0",  # neither
    "10.0.0.0/33",
    "10.0.0.0/",
    "10.0.0.0/8/8",
    "010.0.0.1",  # a leading zero
    "256.0.0.1",
    "1.2.3",
    "1.2.3.4.5",
    "1.2.3.4 ",
    "١.٢.٣.٤",  # digits, but not ASCII ones
    "not-an-ip",
    "",
    "::",
    "::1",
    "1::",
    "::/0",
    "2001:db8::/32",
    "2001:db8::1/128",
    "2001:db8::1/129",
    "2001:DB8:0:0:0:0:0:1",
    "2001:db8:0:0:0:0:0:0:1",
    "1:2:3:4:5:6:7::",
    "1:2:3:4:5:6:7:8::",
    ":1:2:3:4:5:6:7",
    "1:2:3:4:5:6:7:",
    "1::2::3",
    ":::",
    "12345::1",
    "g::1",
    "::ffff:192.0.2.1",
    "::ffff:192.0.2.1/120",
    "::ffff:192.0.02.1",
    "1:2:3:4:5:6:1.2.3.4",
    "1:2:3:4:5:6:7:1.2.3.4",
    "fe80::1%eth0",
    "2001:db8::/255.255.0.0",
    "1" * 65,
    "0:0:0:0:0:0:0:0/" + "0" * 60,
]
NAME_SAMPLES = ["", "  ", "ok", " padded ", "a\x00b", "x" * 100, "x" * 101, "🔑" * 100, "\x1fname"]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_key_forms_check_what_the_service_checks(tab: Tab) -> None:
    """The bounds are the service's, and each allow-list entry and name is taken or refused as
    the service takes or refuses it (its own functions, over the same inputs)."""
    page = tab.page
    await page.goto("/")
    found = await page.evaluate(
        """async ([networks, names]) => {
            const rules = await import('/static/js/keys/rules.js');
            return {
                bounds: [rules.MAX_NAME_LENGTH, rules.MAX_EXPIRES_DAYS, rules.MAX_ALLOWED_IPS,
                         rules.MAX_NETWORK_TEXT, rules.MAX_PER_SECOND, rules.MAX_BURST],
                networks: networks.map((sample) => rules.isNetwork(sample)),
                names: names.map((name) => rules.nameProblem(name)),
            };
        }""",
        [NETWORK_SAMPLES, NAME_SAMPLES],
    )
    assert found["bounds"] == [
        MAX_KEY_NAME_LENGTH,
        MAX_EXPIRES_DAYS,
        MAX_ALLOWED_IPS,
        MAX_NETWORK_TEXT,
        KEY_MAX_PER_SECOND,
        KEY_MAX_BURST,
    ]
    taken = [canonical_network(sample) is not None for sample in NETWORK_SAMPLES]
    assert dict(zip(NETWORK_SAMPLES, found["networks"], strict=True)) == dict(
        zip(NETWORK_SAMPLES, taken, strict=True)
    )
    assert True in taken and False in taken
    assert found["names"] == [_check_name(name)[1] for name in NAME_SAMPLES]


SEARCHED_NAMES = [
    "Invoice_April_2026.pdf",
    "Résumé final.docx",
    "RESUME-old.txt",
    "Straße",
    "STRASSE.txt",
    "Ἀθῆναι.jpg",
    "ΌΣΟΣ.txt",
    "ёлка.png",
    "नमस्ते.txt",
    "ﬁle.txt",
    "re\u0301sume\u0301.txt",
]
SEARCHES = [
    "april invoice",
    "2026   APRIL",
    "resume",
    "RÉSUMÉ final",
    "re\u0301sume\u0301",
    "strasse",
    "Straße",
    "αθηναι",
    "όσος",
    "елка",
    "नमसत",
    "नमस्ते",
    "file",
    "april resume",
]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_files_page_finds_folders_as_the_service_finds_files(tab: Tab) -> None:
    """The search box's folders (matched in the page) by the service's own rule for files:
    every word, ignoring case and accents; a search of only spaces and accents is none. Names
    compare as the service compares siblings' (``nameKey``, its ``name_key``)."""
    page = tab.page
    await page.goto("/")
    found = await page.evaluate(
        """async ([names, searches]) => {
            const find = await import('/static/js/files/find.js');
            const folders = await import('/static/js/folders.js');
            return {
                keys: names.map(folders.nameKey),
                holds: searches.map((q) => names.map((name) => find.nameHolds(name, q))),
                searches: [" padded  ", "", "   ", " \u0301 ", "x".repeat(101)].map(find.searchOf),
            };
        }""",
        [SEARCHED_NAMES, SEARCHES],
    )
    assert found["keys"] == [name_key(name) for name in SEARCHED_NAMES]
    expected = [[name_holds(name, search_words(q)) for name in SEARCHED_NAMES] for q in SEARCHES]
    assert found["holds"] == expected
    by_search = dict(zip(SEARCHES, expected, strict=True))
    assert sum(by_search["resume"]) == 3 and not any(by_search["नमसत"])
    assert found["searches"] == ["padded", "", "", "", "x" * 100]
    assert search_words(" \u0301 ") == []


@pytest.mark.asyncio(loop_scope="module")
async def test_a_refusal_of_invalid_fields_is_said_once(tab: Tab) -> None:
    """The service's message of a validation_failed names each field already: the page's
    words for it are that message, not the message and the fields again."""
    page = tab.page
    await page.goto("/")
    said = await page.evaluate(
        """async () => {
            const { api, describe } = await import('/static/js/api.js');
            try {
                await api("POST", "/auth/login", { body: { email: 5, password: "" } });
            } catch (error) {
                return [error.code, error.message, describe(error)];
            }
            return null;
        }"""
    )
    assert said is not None
    code, message, described = said
    assert code == "validation_failed"
    assert message.startswith("Some fields are invalid: email ")
    assert described == message
