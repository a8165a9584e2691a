"""The Apprise channel: digests to the chat services and push servers the `apprise` library
speaks (ntfy, Discord, Telegram, Microsoft Teams, Matrix, Mattermost, Feishu/Lark,
DingTalk, WeChat Work, a JSON webhook ...), through Apprise's own plugins.

`AppriseKind` is the kind's entry in the channel registry. A subscriber's `apprise` URLs
(in the config file: none may carry a secret) and the URLs in the variable its
`apprise_env` names (a database subscriber's too, and those it gave on the manage page)
are its targets, one each: "apprise:<key>", the key a digest of the URL's privacy form
(`bot.channels.apprise_urls`), so that each has its own outbox records, retries, pause and
delivery history, and a queued digest names its destination by key, never by URL: the
sender takes the URL with that key among its subscriber's own (two subscribers' URLs may
share a key: they differ only in their query). The digest is rendered by
`bot.render.apprise` in the shape the service takes.

`AppriseChannel` sends, the only I/O. Apprise is synchronous (requests): each message is
sent in a worker thread within an overall deadline. Destinations are served side by side,
so a slow or failing one delays no other; one destination's messages go in order, paced at
the plugin's own interval (Apprise's `request_rate_per_sec`, waited out here without
holding a thread). Each message accepted is reported at once (`on_progress`): a digest cut
off half-way goes on with its next message on the next attempt. A refusal is told from a
passing failure by the HTTP status Apprise reports ("error=404" in its log line, caught
per thread): 4xx but 408, 425 and 429 is permanent; 5xx, 408, 425, 429, a timeout, a
connection error or no status at all is worth another attempt. A failure is recorded (and
shown to the subscriber) in plain words ("the service refused the message (HTTP 400)"),
never as the service answered: what Apprise said of it, masked, is the operator's log's.

A destination a subscriber gave on the manage page (`AppriseSettings.given_on_page`) is
sent through the guard (`bot.channels.guard`): only a web service's plugin, no redirect
followed, and every connection of its send to a public address or one the operator allows
([apprise] self_service_allow); anything else is a permanent refusal.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.channels.apprise_urls import (
    Destination,
    Unreadable,
    captured,
    destination,
    kind_refusal,
    network_hosts,
    plugin_for,
    reason_of,
    scheme_of,
    split_urls,
    status_of,
)
from bot.channels.base import (
    OnProgress,
    OnSent,
    RenderContext,
    Rendered,
    SendOutcome,
    ShouldStop,
    Target,
    describe,
    failed,
    notify,
)
from bot.channels.guard import Connections, guarded, watched
from bot.channels.registry import ChannelKind, register
from bot.core.addresses import Reach
from bot.core.links import UNSIGNED
from bot.core.models import Digest, Subscriber, version_key
from bot.render.apprise import ChatShape, chat_messages

log = logging.getLogger(__name__)

MAX_URLS = 20  # per subscriber's `apprise` list
ENV_HINT = "put it in an environment variable and name that variable in apprise_env"
# HTTP statuses that say "later": a timeout, too early, too many requests.
PASSING = frozenset({408, 425, 429})


@dataclass(frozen=True)
class AppriseSettings:
    """What the Apprise channel is given: where the variables that hold URLs are read
    (`environ`), every URL a destination may be, with the id of the subscriber whose it is
    (`urls`: the config's lists, the variables' values, those subscribers gave on the
    manage page; asked again before each batch, so a destination added meanwhile is
    found), the deadline of one message, and a pace that overrides each plugin's own
    (None: the plugin's). `given_on_page`: the URLs subscribers gave on the manage page
    (asked with `urls`), sent through the guard to where `reach` allows."""

    environ: Mapping[str, str] = field(default_factory=dict)
    urls: Callable[[], Iterable[tuple[int | None, str]]] = lambda: ()
    deadline: float = 60.0
    pace: float | None = None
    given_on_page: Callable[[], Collection[str]] = lambda: ()
    reach: Reach = field(default_factory=Reach)


@register("apprise")
class AppriseKind(ChannelKind):
    """Digests to each Apprise URL of a subscriber, one target each."""

    pauses = "target"  # a service that keeps refusing stops alone
    file_suffix = ".json"

    @classmethod
    def config_problems(cls, raw: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
        """Each subscriber's `apprise` URLs read offline (a URL no plugin takes, one with a
        secret, one given twice), and the URLs in the variable `apprise_env` names, when it
        is set; each problem at its key (`subscribers[2].apprise[1]: ...`), URLs masked."""
        problems: list[str] = []
        subscribers = raw.get("subscribers")
        if not isinstance(subscribers, list):
            return problems
        for index, sub in enumerate(subscribers):
            if not isinstance(sub, Mapping):
                continue
            where = f"subscribers[{index}]"
            seen: dict[str, str] = {}
            urls = sub.get("apprise")
            if isinstance(urls, list) and len(urls) <= MAX_URLS:
                for number, url in enumerate(urls):
                    if isinstance(url, str):  # else the schema says what it should be
                        key = f"{where}.apprise[{number}]"
                        problems += _url_problems(key, f"apprise[{number}]", url, seen)
            name = sub.get("apprise_env")
            value = environ.get(name) if isinstance(name, str) and name else None
            if value is not None and value.strip():
                for number, url in enumerate(split_urls(value), start=1):
                    named = f"{name}'s URL {number}"
                    key = f"{where}.apprise_env: {named}"
                    problems += _url_problems(key, named, url, seen, secret_ok=True)
        return problems

    @classmethod
    def targets(cls, subscriber: Subscriber, settings: Any) -> list[Target]:
        """One target per URL (the subscriber's own, then the variable's), each once; a
        URL that cannot be read, or a variable that is not set, is a target that says so
        (its digest is skipped, the run's report tells why)."""
        environ = settings.environ if isinstance(settings, AppriseSettings) else {}
        found: dict[str, Target] = {}
        for number, url in enumerate(subscriber.apprise, start=1):
            target = _target(url, source=f"URL {number}")
            found.setdefault(target.channel if target.shape else f"?{number}", target)
        name = subscriber.apprise_env
        if name:
            value = environ.get(name)
            if value is None or not value.strip():
                unset = "is not set" if value is None else "is empty"
                found[f"apprise:${name}"] = Target(
                    f"apprise:${name}",
                    f"${name}",
                    f"apprise ${name}",
                    problem=f"the variable {name} (apprise_env) {unset} in this process",
                )
            else:
                for number, url in enumerate(split_urls(value), start=1):
                    target = _target(url, source=f"${name} URL {number}")
                    found.setdefault(target.channel if target.shape else f"${name}{number}", target)
        return list(found.values())

    @classmethod
    def render(cls, digest: Digest, target: Target, context: RenderContext) -> Rendered:
        """The digest as the messages the target's service takes (Markdown or text, each
        within its limits), queued with the destination's key, never its URL."""
        shape = target.shape
        if not isinstance(shape, ChatShape):
            raise ValueError(f"{target.label}: the destination could not be read")
        links = context.links(digest.subscriber, [], digest.digest_id)
        manage = getattr(links, "manage", None) if links is not None else None
        if manage is not None and UNSIGNED in manage:  # a preview's: never sent to anyone
            manage = None
        messages = chat_messages(digest, shape, manage_url=manage)
        items = [item.paper for item in digest.items]
        data = {
            "destination": target.channel.partition(":")[2],
            "label": target.recipient,
            "format": "markdown" if shape.markdown else "text",
            "messages": [{"title": m.title, "body": m.body} for m in messages],
            "papers": [
                [version_key(items[n - 1].id, items[n - 1].version) for n in m.numbers]
                for m in messages
            ],
        }
        return Rendered(digest, json.dumps(data, ensure_ascii=False).encode())

    @classmethod
    def sender(cls, settings: Any) -> AppriseChannel | None:
        return AppriseChannel(settings) if isinstance(settings, AppriseSettings) else None


def _url_problems(
    where: str, name: str, url: str, seen: dict[str, str], *, secret_ok: bool = False
) -> list[str]:
    """A URL's problems at `where` (`name`: how another problem names it)."""
    try:
        found = destination(url)
    except Unreadable as exc:
        return [f"{where}: {exc}"]
    if found.secret and not secret_ok:
        return [
            f"{where}: {found.label} carries a secret (shown masked): keep it out of the "
            f"file: {ENV_HINT}"
        ]
    if found.key in seen:
        return [f"{where}: {found.label} is the same destination as {seen[found.key]}"]
    seen[found.key] = name
    return []


def _target(url: str, *, source: str | None = None) -> Target:
    """The target a URL is: its key and label, and the shape of its messages; or, a URL
    Apprise cannot read, a target that says so (named by where it came from)."""
    try:
        found = destination(url)
    except Unreadable as exc:
        label = f"apprise {source or scheme_of(url)}"
        return Target("apprise:?", source or scheme_of(url), label, problem=str(exc))
    return Target(found.channel, found.label, f"apprise {found.label}", shape=found.shape)


# -- sending ------------------------------------------------------------------------------


@dataclass
class AppriseDelivery:
    """A queued digest: its destination's key and label, its messages, how many of them
    were sent, and the papers of each."""

    key: str
    label: str
    markdown: bool
    messages: tuple[tuple[str, str], ...]  # (title, body)
    papers: tuple[tuple[str, ...], ...] = ()
    sent: int = 0

    def sent_papers(self) -> tuple[str, ...]:
        return tuple(p for message in self.papers[: self.sent] for p in message)


class AppriseFailure(Exception):
    """A message a service did not take, said plainly (what the subscriber may read), with
    whether a retry can help and what Apprise said of it (`detail`: for the log only)."""

    def __init__(self, message: str, *, permanent: bool, detail: str | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.detail = detail


class AppriseChannel:
    """Delivers digests to Apprise destinations: each destination's messages in order,
    paced; destinations side by side."""

    name = "apprise"

    def __init__(
        self,
        settings: AppriseSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._sleep, self._monotonic = sleep, monotonic
        self._last: dict[str, float] = {}  # destination key -> when a message last went
        self._plugins: dict[str, Any] = {}  # URL -> its plugin (kept: paced)
        self._locks: dict[str, asyncio.Lock] = {}  # of the event loop that made them
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guarded: set[str] = set()  # keys of destinations given on the manage page

    def load(self, payload: bytes, progress: str | None = None) -> AppriseDelivery:
        data = json.loads(payload)
        sent = int(json.loads(progress).get("sent", 0)) if progress else 0
        return AppriseDelivery(
            key=str(data["destination"]),
            label=str(data.get("label", "")),
            markdown=data.get("format") == "markdown",
            messages=tuple((str(m["title"]), str(m["body"])) for m in data["messages"]),
            papers=tuple(tuple(p) for p in data.get("papers", ())),
            sent=sent,
        )

    async def send_all(
        self,
        batch: Sequence[tuple[Any, AppriseDelivery]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Send each digest's messages in order; destinations side by side, so one that is
        slow or failing holds up no other. Before each message, stop if `should_stop()`
        (a digest cut off there has no outcome and goes on later)."""
        if not batch:
            return []
        if self._loop is not asyncio.get_running_loop():  # a lock serves one loop
            self._loop, self._locks = asyncio.get_running_loop(), {}
        urls = self._urls()
        queues: dict[str, list[tuple[Any, AppriseDelivery]]] = {}
        for item, delivery in batch:
            queues.setdefault(delivery.key, []).append((item, delivery))
        results = await asyncio.gather(
            *(
                self._serve(key, queue, urls, on_sent, should_stop, on_progress)
                for key, queue in queues.items()
            )
        )
        done = {id(o.item): o for outcomes in results for o in outcomes}
        return [done[id(item)] for item, _ in batch if id(item) in done]

    def _urls(self) -> dict[tuple[int | None, str], str]:
        """Every known destination's URL, by its subscriber's id and its key (asked now: one
        added meanwhile is found). Two subscribers' URLs may share a key (they differ in
        their query: a header, a thread): each digest goes with its own subscriber's. The
        keys of those given on the manage page are kept to send through the guard (a key
        the page gave too, whoever else did)."""
        found: dict[tuple[int | None, str], str] = {}
        try:
            urls = list(self.settings.urls())
            given = list(self.settings.given_on_page())
        except Exception:  # the database is gone: each digest waits, as for a lost URL
            log.exception("cannot list the Apprise destinations")
            return found
        for owner, url in urls:
            try:
                found.setdefault((owner, destination(url).key), url)
            except Unreadable:
                continue
        guarded = set()
        for url in given:
            try:
                guarded.add(destination(url).key)
            except Unreadable:
                continue
        self._guarded = guarded
        return found

    async def _serve(
        self,
        key: str,
        queue: list[tuple[Any, AppriseDelivery]],
        urls: Mapping[tuple[int | None, str], str],
        on_sent: OnSent,
        should_stop: ShouldStop | None,
        on_progress: OnProgress | None,
    ) -> list[SendOutcome]:
        outcomes: list[SendOutcome] = []
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one destination's messages in order, whoever sends them
            for item, delivery in queue:
                if should_stop is not None and should_stop():
                    break
                # An outbox item names its subscriber; a URL is found for them alone.
                url = urls.get((getattr(item, "subscriber_id", None), key))
                try:
                    if url is None:
                        raise AppriseFailure(
                            "the destination is not set up in this process (its variable is "
                            "not set, or it was removed)",
                            permanent=False,
                        )
                    for index in range(delivery.sent, len(delivery.messages)):
                        if should_stop is not None and delivery.sent and should_stop():
                            break
                        title, body = delivery.messages[index]
                        await self._send(key, url, delivery, title, body)
                        delivery.sent += 1
                        if delivery.sent < len(delivery.messages) and on_progress is not None:
                            on_progress(item, json.dumps({"sent": delivery.sent}))
                    else:
                        await notify(on_sent, item)
                        outcomes.append(SendOutcome(item=item, ok=True))
                except Exception as exc:  # a bug must not leave the rest of the batch unsent
                    if isinstance(exc, AppriseFailure):
                        done = f" after {delivery.sent} of its messages" if delivery.sent else ""
                        said = f" ({exc.detail})" if exc.detail else ""
                        log.warning(
                            "Apprise digest to %s failed%s: %s%s", delivery.label, done, exc, said
                        )
                        error, permanent = str(exc), exc.permanent
                    else:
                        log.error(
                            "Apprise digest to %s failed: unexpected %s",
                            delivery.label,
                            type(exc).__name__,
                        )
                        error, permanent = f"unexpected error: {type(exc).__name__}", False
                    outcomes.append(
                        failed(item, error, permanent, sent_papers=delivery.sent_papers())
                    )
        return outcomes

    async def _send(
        self, key: str, url: str, delivery: AppriseDelivery, title: str, body: str
    ) -> None:
        """One message, in a worker thread, within the deadline (its connections cut off
        when it passes); paced after the last."""
        found = destination(url)
        await self._pace(key, found)
        deadline = self.settings.deadline
        guard = key in self._guarded
        connections = Connections()
        send = (url, title, body, delivery.markdown, guard, connections)
        try:
            ok, records, refusal = await asyncio.wait_for(
                asyncio.to_thread(self._notify, *send), timeout=deadline
            )
        except TimeoutError:
            connections.cut_off()
            raise AppriseFailure(f"no answer within {deadline:g} s", permanent=False) from None
        finally:
            self._last[key] = self._monotonic()
        for record in records:  # what Apprise said, masked, for -vv
            log.debug("apprise %s: %s", found.label, reason_of([record], url, found))
        detail = reason_of(records, url, found)
        if refusal is not None:
            raise AppriseFailure(refusal, permanent=True, detail=detail)
        if ok:
            return
        status = status_of(records)
        if status is None:
            why = "the service could not be reached, or did not take the message"
            raise AppriseFailure(why, permanent=False, detail=detail)
        permanent = 400 <= status < 500 and status not in PASSING
        said = "refused the message" if 400 <= status < 500 else "failed"
        raise AppriseFailure(
            f"the service {said} (HTTP {status})", permanent=permanent, detail=detail
        )

    def _notify(
        self,
        url: str,
        title: str,
        body: str,
        markdown: bool,
        guard: bool,
        connections: Connections,
    ) -> tuple[bool, list[logging.LogRecord], str | None]:
        """Send one message with the destination's plugin (run in a worker thread), its
        connections kept in `connections`; one given on the manage page (`guard`) through
        the guard. The refusal, if the guard refused it."""
        import apprise  # here: only a process that sends to Apprise loads it

        with captured() as records:
            try:
                plugin = self._plugins.get(url)
                if plugin is None:
                    plugin = self._plugins[url] = plugin_for(url)
                    for timeout in ("socket_connect_timeout", "socket_read_timeout"):
                        own = getattr(plugin, timeout, None)
                        if isinstance(own, int | float):
                            setattr(plugin, timeout, min(own, self.settings.deadline))
                fmt = apprise.NotifyFormat.MARKDOWN if markdown else apprise.NotifyFormat.TEXT
                if not guard:
                    with watched(connections):
                        return self._plugin_notify(plugin, title, body, fmt), records, None
                reach = self.settings.reach
                if not reach.on:
                    return False, records, "destinations given on the page are off on this site"
                refusal = kind_refusal(url, plugin)
                if refusal is not None:
                    return False, records, refusal
                plugin.redirects = False  # Apprise's own switch; each hop is guarded anyway
                hosts = network_hosts(url, plugin)
                with guarded(reach, hosts=hosts, connections=connections) as refused:
                    ok = self._plugin_notify(plugin, title, body, fmt)
                if refused:
                    log.warning(
                        "Apprise: refused a connection of a destination given on the page "
                        "to %s (not public, not in [apprise] self_service_allow)",
                        ", ".join(sorted(set(refused))),
                    )
                    return False, records, "its address is not on the public internet: refused"
            except Exception as exc:  # a plugin's own bug: a failure like any other
                log.debug("apprise plugin raised %s", type(exc).__name__)
                records.append(
                    logging.makeLogRecord(
                        {"msg": f"the plugin failed: {describe(exc)}", "levelno": 30}
                    )
                )
                ok = False
        return ok, records, None

    @staticmethod
    def _plugin_notify(plugin: Any, title: str, body: str, fmt: Any) -> bool:
        import apprise

        return bool(
            plugin.notify(
                body=body, title=title, body_format=fmt, overflow=apprise.OverflowMode.UPSTREAM
            )
        )

    async def _pace(self, key: str, found: Destination) -> None:
        interval = self.settings.pace if self.settings.pace is not None else found.interval
        last = self._last.get(key)
        if last is not None and interval > 0:
            wait = interval - (self._monotonic() - last)
            if wait > 0:
                await self._sleep(wait)


def url_secrets(urls: Iterable[str]) -> list[str]:
    """The secrets of these URLs, for a log filter to hide: each URL that carries one, whole,
    and its secret parts (a URL Apprise cannot read, whole)."""
    found: list[str] = []
    for url in urls:
        try:
            read = destination(url)
        except Unreadable:
            found.append(url)
            continue
        if read.secret:
            found += [url, *read.secrets]
    return found


def known_urls(
    subscribers: Iterable[Subscriber], environ: Mapping[str, str]
) -> list[tuple[int | None, str]]:
    """Every URL the subscribers' digests may go to, with the id of the subscriber whose it
    is: their own, and their variables'."""
    urls: list[tuple[int | None, str]] = []
    for sub in subscribers:
        own = list(sub.apprise)
        value = environ.get(sub.apprise_env) if sub.apprise_env else None
        if value:
            own += split_urls(value)
        urls += [(sub.id, url) for url in own]
    return urls
