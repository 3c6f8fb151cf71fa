"""The documents stay short where they should be, link only to what exists, and point at tests
that exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?")
# The README and every page of docs/: what a reader follows links through.
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
README_MAX_LINES = 300

_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text without fenced code blocks: a link or heading inside one is only an example."""
    return _FENCED.sub("", text)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation dropped,
    spaces as hyphens, and -1, -2, ... for a repeated one."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_prose(path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _relative_links(path: Path) -> list[str]:
    prose = _CODE_SPAN.sub("", _prose(path.read_text()))
    links = _INLINE_LINK.findall(prose) + _DEFINITION.findall(prose)
    return [link for link in links if not _SCHEME.match(link)]


def _broken(document: Path, link: str) -> str | None:
    """Why ``link`` in ``document`` leads nowhere, or None when it resolves."""
    target, _, anchor = link.partition("#")
    path = (document.parent / target).resolve() if target else document
    if not path.is_relative_to(ROOT):
        return "leaves the repository"
    if not path.exists():
        return "no such file"
    if anchor and (path.suffix != ".md" or anchor not in _anchors(path)):
        return f"no heading makes #{anchor}"
    return None


def _missing_tests(text: str) -> list[str]:
    """The backticked ``tests/...py[::name]`` references in ``text`` that name nothing."""
    return [
        f"{path}::{name}" if name else path
        for path, name in sorted(set(REFERENCE.findall(text)))
        if not (ROOT / path).is_file() or (name and f"def {name}(" not in (ROOT / path).read_text())
    ]


def test_every_test_docs_security_names_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    references = set(REFERENCE.findall(text))
    assert len(references) > 20  # the threat model names its proofs
    assert _missing_tests(text) == []


def test_every_test_the_readme_or_a_docs_page_names_exists() -> None:
    missing = {
        document.relative_to(ROOT).as_posix(): _missing_tests(document.read_text())
        for document in DOCUMENTS
    }
    assert {name: tests for name, tests in missing.items() if tests} == {}


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    checked, broken = 0, []
    for document in DOCUMENTS:
        for link in _relative_links(document):
            checked += 1
            why = _broken(document, link)
            if why is not None:
                broken.append(f"{document.relative_to(ROOT).as_posix()}: ({link}) {why}")
    assert broken == []
    assert checked > 40  # the pages link to each other; finding none means the pattern broke


# A line of the service's part of the layout tree: two spaces a level, the module or package
# (a package with its slash), then what it holds.
_TREE_LINE = re.compile(r"^(?P<indent>(?:  )+)(?P<name>[\w.]+/?)(?: {2,}(?P<holds>\S.*))?$")


def _layout_tree_of_the_service() -> dict[str, str]:
    """What the layout tree in docs/development.md names under ``service/``: each module's or
    package's path (``api/routes/files.py``, ``api/routes``) with what it says it holds."""
    text = (ROOT / "docs" / "development.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    lines = section.split("\n```\n", 2)[1].splitlines()
    named: dict[str, str] = {}
    packages: list[str] = []  # the packages the current line is inside, outermost first
    for line in lines[lines.index("service/") + 1 :]:
        if not line.startswith(" "):  # the tree's next top-level folder
            break
        match = _TREE_LINE.match(line)
        assert match, f"not a line of the tree (a module or package, what it holds): {line!r}"
        depth = len(match["indent"]) // 2
        assert depth <= len(packages) + 1, f"deeper than its package: {line!r}"
        del packages[depth - 1 :]
        name = match["name"].removesuffix("/")
        named["/".join([*packages, name])] = match["holds"] or ""
        if match["name"].endswith("/"):
            packages.append(name)
    return named


def _modules_and_packages_of_the_service() -> set[str]:
    service = ROOT / "service"
    packages = {path.parent for path in service.rglob("__init__.py")} - {service}
    modules = {path for path in service.rglob("*.py") if path.name != "__init__.py"}
    return {path.relative_to(service).as_posix() for path in packages | modules}


def test_the_layout_tree_names_every_module_of_the_service_and_nothing_else() -> None:
    """The tree in docs/development.md cannot go stale: a module added, moved or removed fails
    here until the tree says so, and each line says what its module or package holds."""
    named = _layout_tree_of_the_service()
    present = _modules_and_packages_of_the_service()
    assert len(present) > 100, "the walk found the service's modules"
    assert sorted(present - named.keys()) == [], "in service/ but not in the tree"
    assert sorted(named.keys() - present) == [], "in the tree but not in service/"
    assert [path for path, holds in named.items() if not holds] == [], "says nothing it holds"


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_link_checker_finds_what_is_broken(tmp_path: Path) -> None:
    """The checker itself: a dead file, a dead anchor and a link out of the repository are caught,
    a live anchor and a link inside a code block are not."""
    page = ROOT / "docs" / "api.md"
    assert _broken(page, "security.md#a-compromised-dashboard-page") is None
    assert _broken(page, "#errors") is None
    assert _broken(page, "missing.md") == "no such file"
    assert _broken(page, "security.md#no-such-heading") == "no heading makes #no-such-heading"
    assert _broken(page, "../../outside.md") == "leaves the repository"
    sample = tmp_path / "sample.md"
    sample.write_text(
        "# A `Title`: here\n\n[ok](#a-title-here) `[not a link](nowhere.md)`\n\n"
        "```\n[also not](nowhere.md)\n```\n"
    )
    assert _relative_links(sample) == ["#a-title-here"]
    assert _anchors(sample) == {"a-title-here"}


# How the README's prerequisites name each Debian package scripts/_system_deps.sh may install.
_PACKAGE_IN_README = {"nodejs": "Node.js", "docker-compose": "`docker-compose`"}


def _readme_section(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n### {heading}\n")
    return text[start : text.index("\n#", start + 1)]


def test_the_readme_prerequisites_name_every_program_the_two_commands_and_the_tour_need() -> None:
    """Only python3 for scripts/run; for scripts/test, every system package it installs (as
    root, with apt) or asks for; for the tour, every program its commands run."""
    prerequisites = _readme_section("Prerequisites")
    system_deps = (ROOT / "scripts" / "_system_deps.sh").read_text()
    packages = re.findall(r"missing\+=\(([\w.-]+)\)", system_deps)
    assert packages, "scripts/_system_deps.sh installs nothing?"
    for package in packages:
        assert _PACKAGE_IN_README.get(package, f"`{package}`") in prerequisites, package
    assert "apt-get" in prerequisites and "root" in prerequisites
    assert "`scripts/run`** needs only `python3`" in prerequisites
    assert "apt" not in (ROOT / "scripts" / "run").read_text()  # so it stays true
    tour = (ROOT / "README.md").read_text().split("## A five-minute tour", 1)[1]
    tour_code = "\n".join(re.findall(r"```sh\n(.*?)```", tour, re.DOTALL))
    programs = {
        word
        for line in tour_code.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
        for word in re.findall(r"(?:^|\$\(|\| )\s*([a-z][\w/-]*)", line)
    }
    programs -= {"echo", "scripts/run"}  # a shell built-in; the first command's own
    assert programs == {"curl", "jq"}, programs
    for program in programs:
        assert f"`{program}`" in prerequisites, program
