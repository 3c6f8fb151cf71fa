"""Link unfurlers as the public side meets them: the User-Agent strings they really send, and the
Open Graph and Twitter-card metadata read out of a page as they read it."""

from __future__ import annotations

from html.parser import HTMLParser

# Each as its fetcher sends it.
DISCORD = "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)"
SLACK = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
MASTODON = "http.rb/5.2.0 (Mastodon/4.3.2; +https://mastodon.social/) Bot"
IMESSAGE = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) "
    "Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0"
)
TWITTER = "Twitterbot/1.0"
TELEGRAM = "TelegramBot (like TwitterBot)"
UNFURLERS = {
    "discord": DISCORD,
    "slack": SLACK,
    "mastodon": MASTODON,
    "imessage": IMESSAGE,
    "twitter": TWITTER,
    "telegram": TELEGRAM,
}
# People's browsers and API clients: never taken for an unfurler.
CHROME = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36"
)
SAFARI_IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
)
CURL = "curl/8.5.0"


class _Metadata(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "meta":
            return
        named = dict(attrs)
        key = named.get("property") or named.get("name")
        if key and (key.startswith(("og:", "twitter:"))) and named.get("content") is not None:
            self.found[key] = str(named["content"])


def metadata(page: str) -> dict[str, str]:
    """A page's ``og:`` and ``twitter:`` metadata, by property or name."""
    parser = _Metadata()
    parser.feed(page)
    return parser.found
