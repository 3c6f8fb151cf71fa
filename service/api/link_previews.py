"""What a link unfurler (Discord, Slack, Mastodon, iMessage, X, Telegram, ...) gets from a vanity
alias's link: a small page with Open Graph and Twitter-card metadata, so that the link pasted in
a chat shows the file's name, size and a picture of it, and never a view spent.

**Who is an unfurler**: a request whose ``User-Agent`` names one of the unfurlers below
(``UNFURLERS``), whatever its ``Accept`` says (several send ``*/*``). A browser, ``curl`` or an
API client is not one, and is answered as before.

**What it gets** (``routes.public_aliases``): for an alias without a password and without a view
limit, the preview page (``preview_page``) with ``og:title`` (the file's or folder's name),
``og:description`` (its size and type), ``og:url``, and for a raster image ``og:image`` (its
thumbnail at ``/a/{slug}/thumbnail``) with ``twitter:card`` ``summary_large_image``, for a video
``og:video`` (the file at ``/a/{slug}/{file_id}``). For any other alias the same page without
any of that metadata (``BARE_PREVIEW``): a protected or counted link tells a chat nothing, and
never loses a view to it. None of these requests counts a view, and neither does the fetch of
the thumbnail or of the video by the unfurler: such an alias has no limit, so a ``User-Agent``
made up to look like an unfurler gains nothing a browser could not have, and an alias that
has one gets the bare page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from service.api.alias_pages import page
from service.api.page_formats import size_text

# The unfurlers' own words in their User-Agent (iMessage's says facebookexternalhit, Facebot and
# Twitterbot; Mastodon's says Mastodon; X's Twitterbot; Signal and WhatsApp theirs).
UNFURLERS = re.compile(
    r"Discordbot|Slackbot|Slack-ImgProxy|Twitterbot|facebookexternalhit|Facebot|Mastodon/"
    r"|TelegramBot|WhatsApp/|LinkedInBot|SkypeUriPreview|redditbot|Iframely|Embedly"
    r"|Pinterestbot|vkShare|Snapchat|Synapse \(bot",
    re.IGNORECASE,
)


def is_unfurler(user_agent: str | None) -> bool:
    """Whether a request's ``User-Agent`` is a link unfurler's (see the module)."""
    return user_agent is not None and UNFURLERS.search(user_agent) is not None


@dataclass(frozen=True, slots=True)
class Preview:
    """What a link's preview says: absolute URLs (an unfurler fetches them from elsewhere)."""

    title: str
    description: str
    url: str
    image: str | None = None
    video: str | None = None
    video_type: str | None = None


def file_description(size: int, content_type: str) -> str:
    """ "1.5 KiB · image/png": a file's size, as the dashboard says it, and its type."""
    return f"{size_text(size)} · {content_type}"


def _meta(kind: str, name: str, value: str) -> str:
    return f'<meta {kind}="{escape(name)}" content="{escape(value)}">\n'


def preview_page(preview: Preview) -> bytes:
    """The preview of a link without a password or a view limit: its metadata, and for a person
    who opens it anyway, the same in words with the thumbnail and a link to the file."""
    head = [
        _meta("property", "og:type", "video.other" if preview.video else "website"),
        _meta("property", "og:site_name", "filehost"),
        _meta("property", "og:title", preview.title),
        _meta("property", "og:description", preview.description),
        _meta("property", "og:url", preview.url),
        _meta("name", "description", preview.description),
    ]
    if preview.image is not None:
        head += [
            _meta("property", "og:image", preview.image),
            _meta("property", "og:image:type", "image/webp"),
            _meta("property", "og:image:alt", preview.title),
            _meta("name", "twitter:card", "summary_large_image"),
            _meta("name", "twitter:image", preview.image),
        ]
    else:
        head.append(_meta("name", "twitter:card", "summary"))
    if preview.video is not None:
        head += [
            _meta("property", "og:video", preview.video),
            _meta("property", "og:video:url", preview.video),
            _meta("property", "og:video:type", preview.video_type or "video/mp4"),
        ]
    head += [
        _meta("name", "twitter:title", preview.title),
        _meta("name", "twitter:description", preview.description),
    ]
    picture = (
        f'<img src="{escape(preview.image)}" alt="" width="320">\n'
        if preview.image is not None
        else ""
    )
    return page(
        preview.title,
        '<section class="card narrow preview">\n'
        f"{picture}"
        f"<h1>{escape(preview.title)}</h1>\n"
        f'<p class="lede">{escape(preview.description)}</p>\n'
        f'<p><a href="{escape(preview.url)}">Open</a></p>\n'
        "</section>\n",
        "".join(head),
    )


# The preview of every other alias (a password, a view limit): nothing about it.
BARE_PREVIEW = page(
    "A shared link · filehost",
    '<section class="card narrow">\n'
    "<h1>A shared link</h1>\n"
    '<p class="lede">Open this link in a browser to see what it holds.</p>\n'
    "</section>\n",
)
