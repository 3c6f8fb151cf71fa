"""The pages a browser gets from a vanity alias's link: a folder's listing, the password form, and
the one page of every link that can't be used (``UNUSABLE_PAGE``).

Plain HTML made here, every value escaped (``html.escape``: names, sizes, links), no script and
no inline style: the service's own stylesheets (``/static/base.css``, the colours of both
schemes every page shares, and ``/static/alias.css``), sizes and times as the dashboard writes
them (``page_formats``). They
carry a Content-Security-Policy of their own, ``PAGE_CSP``: the dashboard's, but that the
password form may post to its own page (``form-action 'self'``) and no script at all. Never a
password in a page, a link or a URL: the form posts it in its body.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from service.api.page_formats import size_text, when_html

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


def page(title: str, body: str, head: str = "") -> bytes:
    """A public page: ``head`` (already escaped) in its head, the top bar, then ``body`` in its
    main column."""
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)}</title>\n"
        f"{head}"
        '<link rel="stylesheet" href="/static/base.css">\n'
        '<link rel="stylesheet" href="/static/alias.css">\n'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        '</head>\n<body>\n<header class="topbar"><div class="bar">'
        '<p class="brand">filehost</p></div></header>\n'
        f'<main class="shared">\n{body}</main>\n</body>\n</html>\n'
    ).encode()


# What a browser gets for every link that can't be used (unknown, expired, used up, disabled,
# deleted, switched off): one page, the same bytes whatever the reason, naming no slug.
UNUSABLE_PAGE = page(
    "Link not available · filehost",
    '<section class="card narrow">\n'
    "<h1>This link is not available</h1>\n"
    '<p class="lede">There is nothing to show at this address. The link may be mistyped, or '
    "it may have expired, been used up, or been switched off by whoever shared it.</p>\n"
    "<p>Ask them for a new link.</p>\n"
    "</section>\n",
)


def password_page(action: str, problem: str | None = None, below: str | None = None) -> bytes:
    """The form that asks for a link's password and posts it to ``action`` (the link's own
    address), with ``below``, what was asked for under it (an item's id, ``archive``), to go
    on to once the password is right."""
    alert = f'<p class="problem" role="alert">{escape(problem)}</p>\n' if problem else ""
    then = (
        f'<input name="below" value="{escape(below)}" type="hidden">\n' if below is not None else ""
    )
    return page(
        "Password required",
        '<section class="card narrow">\n'
        "<h1>This link is protected</h1>\n"
        '<p class="lede">Enter its password to open it.</p>\n'
        f"{alert}"
        f'<form method="post" action="{escape(action)}">\n'
        # What a password manager files the password under: the link (never sent on).
        f'<input name="link" autocomplete="username" value="{escape(action)}" readonly hidden>\n'
        f"{then}"
        '<label for="password">Password</label>\n'
        '<input id="password" name="password" type="password" required '
        'autocomplete="current-password" maxlength="1024">\n'
        '<button type="submit">Open</button>\n'
        "</form>\n"
        "</section>\n",
    )


def listing_page(
    crumbs: Iterable[Link],
    folders: Iterable[Link],
    files: Iterable[FileItem],
    more: str | None,
    folders_cut: bool,
    now_ms: int,
    archive: str | None = None,
) -> bytes:
    """A shared folder: the way down from the aliased folder (``crumbs``, the shown folder
    last), its folders, its files (when each was added said as of ``now_ms``), the link to
    more files when there are, and to the whole shared folder as one ZIP (``archive``)."""
    trail = list(crumbs)
    here = trail[-1]
    steps = [f'<a href="{escape(step.href)}">{escape(step.name)}</a>' for step in trail[:-1]]
    steps.append(f'<span aria-current="page">{escape(here.name)}</span>')
    parts = [
        '<nav aria-label="Folders"><ol class="crumbs">'
        + "".join(f"<li>{step}</li>" for step in steps)
        + "</ol></nav>\n",
        f"<h1>{escape(here.name)}</h1>\n",
        '<p class="lede">A shared folder.</p>\n',
    ]
    if archive is not None:
        parts.append(
            f'<p><a class="more" href="{escape(archive)}" download>'
            "Download everything as a ZIP</a></p>\n"
        )
    folder_rows = [
        f'<li><a class="folder" href="{escape(folder.href)}">{escape(folder.name)}</a></li>'
        for folder in folders
    ]
    if folder_rows:
        parts.append(
            '<section class="card" aria-labelledby="shared-folders">\n'
            '<h2 id="shared-folders">Folders</h2>\n<ul class="folders">\n'
            + "\n".join(folder_rows)
            + "\n</ul>\n"
        )
        if folders_cut:
            parts.append('<p class="note">Only the first folders are shown.</p>\n')
        parts.append("</section>\n")
    file_rows = [
        "<tr>"
        f'<td class="name" data-label="Name"><a href="{escape(item.href)}">'
        f"{escape(item.name)}</a></td>"
        f'<td class="size" data-label="Size">{escape(size_text(item.size))}</td>'
        f'<td class="type" data-label="Type">{escape(item.content_type)}</td>'
        f'<td data-label="Added">{when_html(item.created_at, now_ms)}</td>'
        "</tr>"
        for item in files
    ]
    if file_rows or more is not None:
        parts.append('<section class="card" aria-labelledby="shared-files">\n')
        parts.append('<h2 id="shared-files">Files</h2>\n')
    if file_rows:
        parts.append(
            '<table class="files">\n<thead><tr><th scope="col">Name</th>'
            '<th scope="col">Size</th><th scope="col">Type</th><th scope="col">Added</th>'
            "</tr></thead>\n<tbody>\n" + "\n".join(file_rows) + "\n</tbody>\n</table>\n"
        )
    if more is not None:
        parts.append(f'<p><a class="more" href="{escape(more)}">More files</a></p>\n')
    if file_rows or more is not None:
        parts.append("</section>\n")
    if not folder_rows and not file_rows:
        parts.append('<p class="note">This folder is empty.</p>\n')
    return page(here.name, "".join(parts))
