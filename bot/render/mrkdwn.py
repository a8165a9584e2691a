"""Text in Slack's mrkdwn: escaped, a link only to a URL that `bot.core.links.web_url`
passes, cut to a limit at a word.

Owns how any text becomes safe mrkdwn: the digest's Block Kit messages (`bot.render.slack`)
and the slash command's replies (`bot.slack`) both write it. Pure, and free of slack-sdk:
a reply needs no Block Kit.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from bot.core.links import web_url
from bot.render.text import tidy

__all__ = [
    "ELLIPSIS",
    "REPLY_CHARS",
    "as_code",
    "as_text",
    "escape_mrkdwn",
    "fit",
    "link",
    "shorten",
    "url_length",
]

ELLIPSIS = "\u2026"
REPLY_CHARS = 2600  # a rule in a reply: whole (500 characters, each escaped at most 5 long)

# Slack mrkdwn has no escape for its formatting marks inside a link label: swap each for a
# look-alike (the way jsx-slack does). A `|` would end the URL part, `>` the link itself.
_LOOKALIKES = str.maketrans(
    {
        "*": "\u2217",  # asterisk operator
        "_": "\u02cd",  # modifier letter low macron
        "~": "\u223c",  # tilde operator
        "`": "\u02cb",  # modifier letter grave accent
        "|": "\u2223",  # divides
    }
)
_ESCAPED_WIDTH = {"&": len("&amp;"), "<": len("&lt;"), ">": len("&gt;")}
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"
_TRAILING = re.compile(r"[\s,;:.(\[{\-\u2013\u2014]+$")


def escape_mrkdwn(text: str) -> str:
    """Slack's escaping of its three control characters: `&`, `<`, `>`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _safe_url(url: str) -> str:
    """A URL that cannot end a link early: spaces, `|`, `<`, `>` percent-encoded, `&` escaped."""
    return escape_mrkdwn(quote(url.strip(), safe=_URL_SAFE))


def url_length(url: str) -> int:
    """How many characters `url` takes in a link, once encoded and escaped (a URL's `&` takes
    five): what counts against a block's limit."""
    return len(_safe_url(url))


def link(url: str | None, label: str, *, url_limit: int | None = None) -> str:
    """`<url|label>`: the label escaped, its `|` and formatting marks swapped for look-alikes.
    Only a URL that `bot.core.links.web_url` passes becomes a link, and (with `url_limit`)
    only one that takes at most that many characters; otherwise the label alone."""
    shown = escape_mrkdwn(tidy(label).translate(_LOOKALIKES))
    checked = web_url(url)
    if checked is None:
        return shown
    target = _safe_url(checked)
    if url_limit is not None and len(target) > url_limit:
        return shown
    return f"<{target}|{shown}>" if shown else f"<{target}>"


def shorten(text: str, limit: int) -> str:
    """`text` with whitespace tidied, cut to at most `limit` characters at a word boundary
    with an ellipsis (mid-word only when a word is longer than half the limit)."""
    text = tidy(text)
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return _TRAILING.sub("", cut) + ELLIPSIS


def fit(text: str, limit: int) -> str:
    """`text` shortened so that its mrkdwn escaping takes at most `limit` characters."""
    text = tidy(text)
    if len(escape_mrkdwn(text)) <= limit:
        return text
    if limit <= 0:
        return ""
    used = size = 0
    for char in text:  # the longest prefix that fits beside the ellipsis, once escaped
        width = _ESCAPED_WIDTH.get(char, 1)
        if used + width > limit - 1:
            break
        used += width
        size += 1
    return shorten(text, size + 1)


def as_text(text: str, limit: int = REPLY_CHARS) -> str:
    """Text shown as itself in mrkdwn (a rule's label): escaped, its formatting marks and `|`
    swapped for look-alikes, cut to `limit`."""
    return escape_mrkdwn(fit(text, limit).translate(_LOOKALIKES))


def as_code(text: str, limit: int = REPLY_CHARS) -> str:
    """A rule shown as itself: a code span (nothing formats inside one), backticks swapped,
    escaped, cut to `limit`."""
    return "`" + escape_mrkdwn(fit(text.replace("`", "\u02cb"), limit)) + "`"
