"""What a body that is not the answer expected looks like, for a parser's error message.

Shared by every source's parser (arxiv, arxiv_api, feed, huggingface): when one refuses a
body, it says what it received instead: an empty body, an HTML page (with its title, e.g.
'Service unavailable'), binary data, JSON, XML of another kind, truncated XML, plain text;
and, before that, the HTTP status when it was not a success.

Pure: no network, no clock, no files. It only describes; refusing is the parser's job.
"""

from __future__ import annotations

import re
import xml.sax
from collections.abc import Mapping
from typing import Any

from bot.sources.feedtext import collapse

# An HTML page's opening (its doctype, or an html, head or body tag).
HTML_RE = re.compile(rb"<!doctype\s+html|<html[\s>]|<body[\s>]|<head[\s>]", re.IGNORECASE)
# Linear on any body: a tag ends at the next `<` too, and only the first <title> is read.
_HTML_TITLE_RE = re.compile(rb"<title[^<>]*>", re.IGNORECASE)
_TAG_RE = re.compile(rb"<[^<>]*>")
_ROOT_RE = re.compile(rb"<([A-Za-z_][\w.:-]*)")


def status_prefix(status: int) -> str:
    """`HTTP 503: ` to open an error message about a body that came with an error status;
    empty for a success (2xx)."""
    return "" if 200 <= status < 300 else f"HTTP {status}: "


def describe_body(body: bytes, doc: Mapping[str, Any]) -> str:
    """Say what a body that is not a feed looks like (`doc`: feedparser's reading of it)."""
    head = body[:8192].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        return "received an empty body, not a feed"
    if HTML_RE.search(head):
        return f"received HTML, not a feed{html_gist(body)}"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return "received binary data, not a feed"
    if text.startswith(("{", "[")):
        return "received JSON, not a feed"
    if text.startswith("<"):
        problem = doc.get("bozo_exception")
        if doc.get("bozo") and isinstance(problem, xml.sax.SAXException):
            return f"the feed is not well-formed XML: {problem}; the download may be truncated"
        root = _ROOT_RE.search(head.split(b"?>", 1)[-1] if head.startswith(b"<?") else head)
        name = root.group(1).decode("ascii", "replace") if root else "?"
        return f"received XML that is not an RSS or Atom feed (root element <{name}>)"
    return f"received text, not a feed: {collapse(text)[:80]!r}"


def html_gist(body: bytes) -> str:
    """The page's title or first text, to show what the server said (e.g. 'Service unavailable')."""
    head = body[:65536]
    found = _HTML_TITLE_RE.search(head)
    if found:
        end = head.lower().find(b"</title>", found.end())
        raw = head[found.end() : end if end >= 0 else found.end() + 200]
    else:
        raw = _TAG_RE.sub(b" ", head)
    gist = collapse(raw.decode("utf-8", "replace"))[:80]
    return f": {gist!r}" if gist else ""
