"""The dashboard's HTML files as written, parsed without a browser: the scripts each page loads,
its permission boxes and options, its forms, and anything inline."""

from __future__ import annotations

from html.parser import HTMLParser
from importlib.resources import files

STATIC = files("service.dashboard").joinpath("static")
# Each page's one script: its own entry module, which imports what it needs.
PAGE_SCRIPTS = {
    "index.html": {"type": "module", "src": "/static/js/pages/login.js"},
    "keys.html": {"type": "module", "src": "/static/js/pages/keys.js"},
    "files.html": {"type": "module", "src": "/static/js/pages/files.js"},
    "aliases.html": {"type": "module", "src": "/static/js/pages/aliases.js"},
    "sessions.html": {"type": "module", "src": "/static/js/pages/sessions.js"},
    "security.html": {"type": "module", "src": "/static/js/pages/security.js"},
    "activity.html": {"type": "module", "src": "/static/js/pages/activity.js"},
    "settings.html": {"type": "module", "src": "/static/js/pages/settings.js"},
    "not-found.html": {"type": "module", "src": "/static/js/pages/not-found.js"},
}


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self.permissions: list[str] = []
        self.options: list[str] = []
        self.forms: list[dict[str, str | None]] = []
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
        if tag == "form":
            self.forms.append(found)

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
