"""The pages a browser gets from a vanity alias's link: a folder's listing and the password form.

Plain HTML made here, every value escaped (``html.escape``: names, sizes, links), no script and
no inline style: one stylesheet of the service's own (``/static/alias.css``). They carry a
Content-Security-Policy of their own, ``PAGE_CSP``: the dashboard's, but that the password form
may post to its own page (``form-action 'self'``) and no script at all. Never a password in a
page, a link or a URL: the form posts it in its body.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from service.clock import iso

PAGE_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'; require-trusted-types-for 'script'; "
    "trusted-types 'none'"
)


@dataclass(frozen=True, slots=True)
class Link:
    name: str
    href: str


@dataclass(frozen=True, slots=True)
class FileItem:
    name: str
    href: str
    size: int
    content_type: str
    created_at: int  # ms


def _page(title: str, body: str) -> bytes:
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)}</title>\n"
        '<link rel="stylesheet" href="/static/alias.css">\n'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        f'</head>\n<body>\n<main class="shared">\n{body}</main>\n</body>\n</html>\n'
    ).encode()


def size_text(size: int) -> str:
    """A size as people read it: bytes, then KiB, MiB, GiB with one decimal."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def password_page(action: str, problem: str | None = None) -> bytes:
    """The form that asks for a link's password and posts it to ``action`` (its own page)."""
    alert = f'<p class="problem" role="alert">{escape(problem)}</p>\n' if problem else ""
    return _page(
        "Password required",
        "<h1>This link is protected</h1>\n"
        "<p>Enter its password to open it.</p>\n"
        f"{alert}"
        f'<form method="post" action="{escape(action)}">\n'
        # What a password manager files the password under: the link (never sent on).
        f'<input name="link" autocomplete="username" value="{escape(action)}" readonly hidden>\n'
        '<label for="password">Password</label>\n'
        '<input id="password" name="password" type="password" required '
        'autocomplete="current-password" maxlength="1024">\n'
        '<button type="submit">Open</button>\n'
        "</form>\n",
    )


def listing_page(
    crumbs: Iterable[Link],
    folders: Iterable[Link],
    files: Iterable[FileItem],
    more: str | None,
    folders_cut: bool,
) -> bytes:
    """A shared folder: the way down from the aliased folder (``crumbs``, the shown folder
    last), its folders, its files, and the link to more files when there are."""
    trail = list(crumbs)
    here = trail[-1]
    steps = [f'<a href="{escape(step.href)}">{escape(step.name)}</a>' for step in trail[:-1]]
    steps.append(f'<span aria-current="page">{escape(here.name)}</span>')
    parts = [
        '<nav aria-label="Folders"><ol class="crumbs">'
        + "".join(f"<li>{step}</li>" for step in steps)
        + "</ol></nav>\n",
        f"<h1>{escape(here.name)}</h1>\n",
    ]
    folder_rows = [
        f'<li><a class="folder" href="{escape(folder.href)}">{escape(folder.name)}</a></li>'
        for folder in folders
    ]
    if folder_rows:
        parts.append('<h2>Folders</h2>\n<ul class="folders">\n' + "\n".join(folder_rows))
        parts.append("\n</ul>\n")
        if folders_cut:
            parts.append('<p class="note">Only the first folders are shown.</p>\n')
    file_rows = [
        "<tr>"
        f'<td><a href="{escape(item.href)}">{escape(item.name)}</a></td>'
        f'<td class="size">{escape(size_text(item.size))}</td>'
        f"<td>{escape(item.content_type)}</td>"
        f'<td><time datetime="{escape(iso(item.created_at) or "")}">'
        f"{escape(iso(item.created_at) or '')}</time></td>"
        "</tr>"
        for item in files
    ]
    if file_rows:
        parts.append(
            '<h2>Files</h2>\n<table class="files">\n<thead><tr><th scope="col">Name</th>'
            '<th scope="col">Size</th><th scope="col">Type</th><th scope="col">Added</th>'
            "</tr></thead>\n<tbody>\n" + "\n".join(file_rows) + "\n</tbody>\n</table>\n"
        )
    if not folder_rows and not file_rows:
        parts.append('<p class="note">This folder is empty.</p>\n')
    if more is not None:
        parts.append(f'<p><a class="more" href="{escape(more)}">More files</a></p>\n')
    return _page(here.name, "".join(parts))
