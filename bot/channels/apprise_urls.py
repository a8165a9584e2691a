"""Apprise URLs read offline: what service one names, whether it carries a secret, its key,
how it is shown, the shape of the messages it takes; and Apprise's log lines, caught.

Everything here asks the `apprise` library's own plugins (`Apprise.instantiate`, which
parses a URL without any I/O): a URL is good when a plugin takes it; it carries a secret
when Apprise's privacy form of it (`url(privacy=True)`, tokens shown as `a...z`,
passwords as `****`) differs from it; it is shown as that privacy form without its query
(`label`); its key (a target's channel "apprise:<key>") is a digest of that label, so
that no secret can be read back from a key, the queue or the history.

Apprise reports through the "apprise" logger (and requests through urllib3's), whatever
thread sends. `captured()` catches the records of the calling thread while it runs and
keeps them from every handler: what Apprise says of a failure is read here (its HTTP
status, "error=404"), masked, and logged by paperbell, never as Apprise wrote it (with a
URL's path, a token in it).
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

# `apprise` is imported in the functions that ask it: a process with no Apprise
# destination (a sender of an email-only site) never loads the library and its plugins.
from bot.channels.guard import Resolve, host_refusal, lookup
from bot.core.addresses import Reach
from bot.render.apprise import MIN_BODY, ChatShape

MAX_URL = 4096  # characters: longer is no URL anyone typed
KEY_CHARS = 12  # hex digits of a destination's key
LABEL_CHARS = 200
# ntfy takes a message as JSON up to its upstream size limit, else as an attachment: the
# title and the other fields need this much of it beside the message.
NTFY_OVERHEAD = 1500
# The loggers Apprise and the HTTP library under it write to, whose records a sending
# thread keeps to itself (`captured`).
CAUGHT_LOGGERS = ("apprise", "urllib3", "requests")
_STATUS = re.compile(r"\berror=(\d{3})\d*\b")
# Services a subscriber may not give on the manage page, whatever their plugin: they send
# mail (through whatever server the URL names, as whichever sender), join chat networks,
# write to a system log or a message bus, or keep key files on this server. The rest are
# also refused unless their plugin speaks HTTP (`self_service_refusal`).
NOT_SELF_SERVICE = frozenset(
    {
        "mailto",
        "mailtos",
        "irc",
        "ircs",
        "syslog",
        "rsyslog",
        "xmpp",
        "xmpps",
        "mqtt",
        "mqtts",
        "amqp",
        "amqps",
        "smpp",
        "smpps",
        "aprs",
        "vapid",
    }
)
_WORDS = re.compile(r"[/:@?&=#,;+\s]+")
MIN_SECRET_WORD = 4


@dataclass(frozen=True, slots=True)
class Destination:
    """One Apprise URL, read: its key and label (no secret in either), the service, the
    shape of its messages, the seconds to leave between two messages (the plugin's own
    pacing), and whether the URL carries a secret (`secrets`: its parts that do)."""

    key: str
    label: str
    service: str
    shape: ChatShape
    interval: float
    secrets: tuple[str, ...]

    @property
    def channel(self) -> str:
        return f"apprise:{self.key}"

    @property
    def secret(self) -> bool:
        return bool(self.secrets)

    def mask(self, text: str) -> str:
        """`text` with this URL's secret parts hidden."""
        for word in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(word, "***")
        return text


class Unreadable(ValueError):
    """A URL no Apprise plugin takes; the message never shows the URL itself."""


def split_urls(text: str) -> list[str]:
    """The URLs of a variable's value: whitespace or comma separated (Apprise's own
    splitting, which leaves a comma inside a URL alone)."""
    try:
        from apprise.utils.parse import parse_urls
    except ImportError:  # Apprise 1.x
        from apprise.utils import parse_urls  # type: ignore[attr-defined,no-redef]
    with captured():
        return [str(url).strip() for url in parse_urls(text) if str(url).strip()]


def destination(url: str) -> Destination:
    """The destination a URL names, read offline by Apprise's plugins. Raises Unreadable
    (its message shows the URL's scheme at most)."""
    return _destination(url.strip())


@lru_cache(maxsize=1024)
def _destination(url: str) -> Destination:
    import apprise

    shown = scheme_of(url)
    if not url or len(url) > MAX_URL:
        raise Unreadable(f"{shown}: not an Apprise URL (empty or over {MAX_URL} characters)")
    if any(ord(char) < 32 or ord(char) == 127 for char in url):
        raise Unreadable(f"{shown}: not an Apprise URL (it holds control characters)")
    with captured() as records:
        try:
            plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
        except Exception:  # a plugin that fails on odd input: the URL is unreadable
            plugin = None
    if plugin is None:
        why = _reason(records, url) or "no Apprise service takes it"
        if "://" not in url:
            why = "not a URL (service://...)"
        raise Unreadable(f"{shown}: {why}")
    return _read(url, plugin)


def _read(url: str, plugin: Any) -> Destination:
    with captured():
        private = str(plugin.url(privacy=True))
        public = str(plugin.url(privacy=False))
    label = _without_query(private)[:LABEL_CHARS]
    secrets = secret_words(url, private) if private != public else ()
    if private != public and not secrets:
        secrets = (url,)
    key = hashlib.sha256(label.encode()).hexdigest()[:KEY_CHARS]
    return Destination(
        key=key,
        label=label,
        service=str(getattr(plugin, "service_name", None) or scheme_of(url)),
        shape=shape_of(plugin),
        interval=max(float(getattr(plugin, "request_rate_per_sec", 0) or 0), 0.0),
        secrets=secrets,
    )


def destination_channel(given: str) -> str:
    """The target's channel of a destination given as its URL, or as its label (the masked
    form `list` shows: its key is a digest of that label)."""
    try:
        return destination(given).channel
    except Unreadable:
        label = _without_query(given.strip())[:LABEL_CHARS]
        return "apprise:" + hashlib.sha256(label.encode()).hexdigest()[:KEY_CHARS]


def plugin_for(url: str) -> Any:
    """A fresh Apprise plugin for a URL `destination` read (to send with: each sender keeps
    its own, pacing itself instead of Apprise's blocking throttle)."""
    import apprise

    with captured():
        plugin = apprise.Apprise.instantiate(url.strip(), suppress_exceptions=True)
    if plugin is None:
        raise Unreadable(f"{scheme_of(url)}: no Apprise service takes it")
    plugin.request_rate_per_sec = 0  # paced by the sender, without holding a thread
    return plugin


def self_service_refusal(url: str, reach: Reach, *, resolve: Resolve = lookup) -> str | None:
    """Why a subscriber may not give this URL on the manage page, said plainly, or None:
    the site takes none there; a kind of service that is no remote web service; an option
    naming a file on this server; a host that is not on the public internet (looked up
    now; each send checks again, `bot.channels.guard`). The URL must be one `destination`
    reads."""
    import apprise

    if not reach.on:
        return "this site takes no destinations given on this page"
    url = url.strip()
    with captured():
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        raise Unreadable(f"{scheme_of(url)}: no Apprise service takes it")
    refusal = kind_refusal(url, plugin)
    if refusal is not None:
        return refusal
    for host in network_hosts(url, plugin):
        refusal = host_refusal(host, reach, resolve=resolve)
        if refusal is not None:
            return f"{refusal}: destinations given here go to public services only"
    return None


def kind_refusal(url: str, plugin: Any) -> str | None:
    """Why this kind of destination is not for the manage page (see NOT_SELF_SERVICE; a
    `keyfile=`-like option), or None."""
    scheme = url.partition("://")[0].lower()
    if scheme in NOT_SELF_SERVICE or not _speaks_http(plugin):
        return (
            f"{scheme}:// destinations cannot be given here: only web services (ntfy, "
            "Discord, Matrix, Telegram, a webhook ...)"
        )
    query = url.partition("?")[2].partition("#")[0]
    for key, _ in parse_qsl(query, keep_blank_values=True):
        if key.lower().lstrip("+-:").endswith("file"):
            return f"the option {key[:40]!r} names a file on this server: not taken here"
    return None


def _speaks_http(plugin: Any) -> bool:
    """Whether the plugin sends over HTTP: a module of its class (or of a class it builds
    on) uses the requests library, as every web service's plugin does; mail, chat
    networks, logs and desktop notifications do not."""
    for cls in type(plugin).__mro__:
        module = sys.modules.get(cls.__module__)
        plugins = module is not None and cls.__module__.startswith("apprise.plugins")
        if plugins and "requests" in vars(module):
            return True
    return False


def network_hosts(url: str, plugin: Any) -> set[str]:
    """The hosts a plugin may connect to that the URL names: its host, for the plugins
    whose URL takes one (`{host}` among their tokens: ntfy, a webhook, Matrix ...), as the
    plugin reads it and as written (ntfy reads `ntfy://127.0.0.1` as a topic on ntfy.sh;
    a subscriber meant a host). Other plugins reach their own service only."""
    if "host" not in (getattr(plugin, "template_tokens", None) or {}):
        return set()
    hosts = {str(plugin.host or "")}
    with suppress(ValueError):  # a malformed authority: the plugin's reading stands
        hosts.add(urlsplit(url).hostname or "")
    return {host for host in hosts if host}


def shape_of(plugin: Any) -> ChatShape:
    """The messages a plugin takes: Markdown where it declares Markdown (the format it
    renders a Markdown body as, `resolve_format`, honouring a `?format=` in the URL), else
    plain text; its body and title limits (ntfy: its JSON upstream limit too)."""
    import apprise

    markdown = apprise.NotifyFormat.MARKDOWN
    resolve = getattr(plugin, "resolve_format", None)
    if callable(resolve):
        takes_markdown = resolve(markdown) == markdown
    else:  # Apprise 1.x: one format per plugin
        takes_markdown = plugin.notify_format == markdown
    body = int(getattr(plugin, "body_maxlen", 0) or 0)
    title = max(int(getattr(plugin, "title_maxlen", 0) or 0), 0)
    upstream = getattr(plugin, "ntfy_json_upstream_size_limit", None)
    counted_as_json = isinstance(upstream, int) and upstream > 0
    if isinstance(upstream, int) and upstream > 0:
        body = min(body, upstream - NTFY_OVERHEAD - 6 * title)
    if getattr(plugin, "overflow_amalgamate_title", False):
        body -= title  # the title counts in the body's limit
    return ChatShape(
        markdown=takes_markdown, body=max(body, MIN_BODY), title=title, json=counted_as_json
    )


def scheme_of(url: str) -> str:
    """How a URL is named where it cannot be shown: its scheme (`discord://…`)."""
    scheme, sep, _ = url.strip().partition("://")
    if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,31}", scheme):
        return f"{scheme.lower()}://…"
    return "(not a URL)"


def secret_words(url: str, private: str) -> tuple[str, ...]:
    """The parts of `url` its privacy form hides (tokens, passwords), as written and
    decoded: what must never be shown or logged."""
    shown = set(_WORDS.split(unquote(private))) | set(_WORDS.split(private))
    found: set[str] = set()
    for text in (url, unquote(url)):
        for word in _WORDS.split(text):
            if len(word) >= MIN_SECRET_WORD and word not in shown:
                found.add(word)
    return tuple(sorted(found, key=len, reverse=True))


def _without_query(url: str) -> str:
    return url.partition("?")[0]


# -- Apprise's log lines, caught per thread ---------------------------------------------


class _Catcher(logging.Filter):
    """Keeps the records of the threads that asked (`captured`) from every handler, and
    hands them to those threads."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[int, list[logging.LogRecord]] = {}
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        caught = self.threads.get(record.thread or 0)
        if caught is None:
            return True
        caught.append(record)
        return False


_CATCHER = _Catcher()
_installed: set[str] = set()
_seen = [0]  # how many loggers there were at the last look


def _install() -> None:
    """Put the catcher on Apprise's logger and the HTTP library's (each module's logger:
    a logger's filter sees only its own records); again when new loggers appeared."""
    known = logging.root.manager.loggerDict
    if len(known) == _seen[0] and _installed:
        return
    _seen[0] = len(known)
    for name in (*CAUGHT_LOGGERS, *list(known)):
        if name not in _installed and any(
            name == n or name.startswith(n + ".") for n in CAUGHT_LOGGERS
        ):
            logging.getLogger(name).addFilter(_CATCHER)
            _installed.add(name)


@contextmanager
def captured() -> Iterator[list[logging.LogRecord]]:
    """Catch what Apprise (and requests, urllib3) log in this thread meanwhile: the
    records, kept from every handler."""
    _install()
    ident = threading.get_ident()
    records: list[logging.LogRecord] = []
    with _CATCHER.lock:
        outer = _CATCHER.threads.get(ident)
        _CATCHER.threads[ident] = records
    try:
        yield records
    finally:
        with _CATCHER.lock:
            if outer is None:
                del _CATCHER.threads[ident]
            else:
                outer.extend(records)
                _CATCHER.threads[ident] = outer


def status_of(records: list[logging.LogRecord]) -> int | None:
    """The HTTP status Apprise's last failure line gives ("... error=404."; ntfy's own
    codes, 40401, start with it), if any."""
    for record in reversed(records):
        if record.levelno >= logging.WARNING:
            match = _STATUS.search(_message(record))
            if match:
                return int(match.group(1))
    return None


def _reason(records: list[logging.LogRecord], url: str) -> str | None:
    """What Apprise's last warning says, the URL and its parts hidden."""
    for record in reversed(records):
        if record.levelno >= logging.WARNING:
            return hide_url(_message(record), url)
    return None


def reason_of(records: list[logging.LogRecord], url: str, found: Destination) -> str | None:
    """What Apprise's last warning says of a send: the URL shown as its label, its secret
    parts masked."""
    for record in reversed(records):
        if record.levelno >= logging.WARNING:
            text = found.mask(_message(record).replace(url, found.label))
            return " ".join(text.split())[:300]
    return None


def hide_url(text: str, url: str) -> str:
    """`text` without `url` or any part of it longer than three characters but its scheme
    (an Apprise message may quote a token, a path, a user; for some services the host is
    a token too)."""
    text = text.replace(url, scheme_of(url))
    scheme = url.partition("://")[0].lower()
    words = set(_WORDS.split(url)) | set(_WORDS.split(unquote(url)))
    for word in sorted(words, key=len, reverse=True):
        if len(word) >= MIN_SECRET_WORD and word.lower() != scheme:
            text = text.replace(word, "***")
    return " ".join(text.split())[:300]


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a bad format string in a library: its template, then
        return str(record.msg)
