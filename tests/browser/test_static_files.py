"""The dashboard's files themselves: no inline code or style anywhere, no HTML built from data,
nothing written to the console, and the permission checkboxes are exactly the service's."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib.resources import files

from service.dashboard.routes import PAGES as ROUTES
from service.domain.permissions import PERMISSIONS

STATIC = files("service.dashboard").joinpath("static")
PAGES = tuple(ROUTES.values())  # every page the dashboard serves


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self.permissions: list[str] = []
        self.options: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name, _ in attrs:
            if name.startswith("on"):
                self.problems.append(f"inline event handler {name} on <{tag}>")
            if name == "style":
                self.problems.append(f"inline style attribute on <{tag}>")
        if tag == "style":
            self.problems.append("a <style> element")
        if tag == "script":
            self.scripts.append(found)
            self._in_script = True
        if tag == "a" and (found.get("href") or "").lower().startswith("javascript:"):
            self.problems.append("a javascript: link")
        if tag == "input" and found.get("name") == "permissions":
            self.permissions.append(found.get("value") or "")
        if tag == "option":
            self.options.append(found.get("value") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.problems.append("an inline <script>")


def parse(name: str) -> Collector:
    collector = Collector()
    collector.feed(STATIC.joinpath(name).read_text("utf-8"))
    collector.close()
    return collector


def test_pages_have_no_inline_script_handler_or_style() -> None:
    for name in PAGES:
        page = parse(name)
        assert page.problems == [], name
        assert page.scripts == [{"src": "/static/app.js", "defer": None}], name


def test_the_script_builds_no_html_from_strings_and_logs_nothing() -> None:
    source = STATIC.joinpath("app.js").read_text("utf-8")
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))
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
    # The token goes only into the Authorization header, never into a URL.
    assert re.findall(r"\$\{token\}", code) == ["${token}"]
    assert "headers.Authorization = `Bearer ${token}`" in code


def test_the_permission_checkboxes_are_the_services_permissions_in_order() -> None:
    assert parse("keys.html").permissions == list(PERMISSIONS)
    assert parse("index.html").permissions == []
