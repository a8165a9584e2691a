"""The Slack channel: posts rendered digests with slack-sdk, a summary and then its thread.

Owns the Slack conversation and its failure modes: pacing (about one post a second per
channel), HTTP 429 `Retry-After` (slack-sdk's retry handler waits it out), transient and
permanent errors with the fix for each, and progress through a digest's messages. Must not
render or touch the database: it gets finished messages (a `SlackDelivery`, queued as JSON)
and reports each one's fate through `on_sent`, `on_progress` and its outcomes.

`SlackKind` is the kind's entry in the channel registry: a subscriber's Slack channel,
direct message or webhook is its target, the digest rendered by `bot.render.slack`, and
posting needs [slack] bot_token_env (or a webhook).

A digest is several messages. Each accepted message is reported with `on_progress` at once,
so a digest cut off half-way (a crash, a 500, a shutdown) goes on with its next message on
the next attempt, in the same thread: nothing is posted twice, nothing is lost. A post
that got no answer (a timeout, a dropped connection) may still have been posted: each
message carries metadata naming its digest and part, and the next attempt looks for it
(conversations.history or .replies) before posting it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

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
from bot.channels.registry import ChannelKind, register
from bot.core.models import Digest, Subscriber, version_key

if TYPE_CHECKING:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

WEBHOOK_PREFIX = "webhook:"

# Slack's error codes: whether a retry can help, and what the operator should do.
PERMANENT_ERRORS: dict[str, str] = {
    "channel_not_found": "the channel does not exist, or the bot cannot see it (a private "
    "channel): check slack_channel, and invite the bot: /invite @paperbell",
    "not_in_channel": "the bot is not in the channel: invite it there with /invite @paperbell",
    "is_archived": "the channel is archived: unarchive it, or point slack_channel elsewhere",
    "user_not_found": "no such Slack user: check slack_user (a member id, U0123ABCD)",
    "user_disabled": "the Slack user's account is deactivated",
    "cannot_dm_bot": "slack_user is a bot, which cannot receive direct messages",
    "restricted_action": "the workspace does not let the bot post there",
    "invalid_blocks": "Slack refused the message's layout (a paperbell bug: please report it)",
    "msg_too_long": "the message is too long for Slack (a paperbell bug: please report it)",
    "no_text": "the message was empty (a paperbell bug: please report it)",
    "channel_is_archived": "the webhook's channel is archived",
    "no_service": "the incoming webhook was removed: create a new one",
    "no_active_hooks": "the incoming webhook is disabled",
    "action_prohibited": "an admin restricted the incoming webhook",
    "posting_to_general_channel_denied": "only admins may post to #general",
}
# Operator's problems: the digest waits (and retries) until they are fixed.
TOKEN_ERRORS: dict[str, str] = {
    "invalid_auth": "Slack refused the bot token: check the variable named in "
    "[slack] bot_token_env (a bot token, xoxb-..., of this workspace)",
    "not_authed": "no bot token was sent: set [slack] bot_token_env",
    "token_revoked": "the bot token was revoked: reinstall the app and update the token",
    "token_expired": "the bot token expired: reinstall the app and update the token",
    "account_inactive": "the bot token belongs to a deleted app or user: reinstall the app",
    "missing_scope": "the bot token lacks a scope: reinstall the app from the manifest "
    "(slack-app-manifest.yml) so it has chat:write, im:write, users:read",
    "ratelimited": "Slack kept answering 'rate limited'",
}

DIGEST_EVENT = "paperbell_digest"  # the metadata event type of a digest's messages
HISTORY_SCOPES = "channels:history, groups:history, im:history"
CLOCK_SKEW = 60.0  # seconds Slack's clock and this host's may differ by


@dataclass(frozen=True)
class SlackSettings:
    """How to reach Slack: the bot token, the Web API's base URL, webhook URLs, pacing."""

    token: str | None
    api_url: str = "https://slack.com/api/"
    post_interval: float = 1.0  # seconds between two posts to one channel
    timeout: float = 30.0
    webhooks: Mapping[str, str] = field(default_factory=dict)  # variable name -> URL
    rate_limit_retries: int = 3  # 429s waited out before the digest is retried later


@dataclass
class Progress:
    """How far a digest got: messages posted, and the channel and thread they went to; the
    key its messages' metadata names it by; and, when the post of the next message got no
    answer, when that attempt began and ended (Unix seconds): Slack may have posted it."""

    posted: int = 0
    channel: str | None = None
    thread_ts: str | None = None
    key: str | None = None
    unsure: tuple[float, float] | None = None

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, text: str | None) -> Progress:
        if not text:
            return cls()
        data = json.loads(text)
        unsure = data.get("unsure")
        return cls(
            data.get("posted", 0),
            data.get("channel"),
            data.get("thread_ts"),
            data.get("key"),
            (float(unsure[0]), float(unsure[1])) if unsure else None,
        )


@dataclass(frozen=True)
class SlackDelivery:
    """A queued digest: where it goes, its messages (summary first), how far it got."""

    target: str  # "#name", a channel id, a user id (direct message), or "webhook:VAR"
    messages: tuple[dict[str, Any], ...]
    progress: Progress = field(default_factory=Progress)
    papers: tuple[tuple[str, ...], ...] = ()  # per message, the papers ("id@version") in it

    def posted_papers(self) -> tuple[str, ...]:
        """The papers of the messages already posted."""
        return tuple(p for message in self.papers[: self.progress.posted] for p in message)


def slack_delivery(
    target: str, posts: Sequence[Any], papers: Sequence[Sequence[str]] = ()
) -> bytes:
    """The bytes queued for a Slack digest: its target, messages (`SlackMessage`s) and, per
    message, the papers in it (so a digest cut off half-way knows which reached Slack)."""
    data = {
        "target": target,
        "messages": [post.to_dict() for post in posts],
        "papers": [list(p) for p in papers],
    }
    return json.dumps(data, ensure_ascii=False).encode()


@register("slack")
class SlackKind(ChannelKind):
    """Digests in Slack: a channel or a direct message (the bot token), or a channel's
    incoming webhook (named by its variable); a summary, then the papers in its thread."""

    file_suffix = ".json"

    @classmethod
    def config_problems(cls, raw: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
        """Posting to a channel or a user needs [slack] bot_token_env, unless a webhook
        posts (read from the raw data, so it is reported even when [slack] fails the
        schema)."""
        problems: list[str] = []
        subscribers = raw.get("subscribers")
        if not isinstance(subscribers, list):
            return problems
        slack = raw.get("slack")
        bot_token = isinstance(slack, Mapping) and bool(slack.get("bot_token_env"))
        for index, sub in enumerate(subscribers):
            if not isinstance(sub, Mapping):
                continue
            posts = sub.get("slack_channel") or sub.get("slack_user")
            # (with a webhook, the webhook posts: slack_channel only names it)
            if posts and not sub.get("webhook_url_env") and not bot_token:
                key = "slack_channel" if sub.get("slack_channel") else "slack_user"
                problems.append(
                    f"subscribers[{index}].{key}: posting to Slack needs [slack] bot_token_env "
                    "(or, for a channel, the subscriber's webhook_url_env)"
                )
        return problems

    @classmethod
    def targets(cls, subscriber: Subscriber, settings: Any) -> list[Target]:
        """The subscriber's webhook (by its variable), else its channel or user."""
        if subscriber.slack_webhook:
            where = WEBHOOK_PREFIX + subscriber.slack_webhook
        else:
            where = subscriber.slack_channel or subscriber.slack_user or ""
        return [Target("slack", where, f"slack {where}")] if where else []

    @classmethod
    def render(cls, digest: Digest, target: Target, context: RenderContext) -> Rendered:
        """The digest as the Slack messages it is posted as (a summary, then its thread)."""
        # Here, not above: slack-sdk's blocks weigh on every process that never posts to Slack.
        from bot.render.slack import build_posts

        threaded = not target.recipient.startswith(WEBHOOK_PREFIX)
        # 👍 / 👎 buttons need the app's interactivity: not in a webhook's posts (the webhook
        # may be another app's), and only with the key that signs their values.
        votes = context.votes(digest) if threaded else {}
        posts = build_posts(digest, threaded=threaded, votes=votes)
        items = [item.paper for item in digest.items]
        papers = [
            [version_key(items[n - 1].id, items[n - 1].version) for n in p.numbers] for p in posts
        ]
        return Rendered(digest, slack_delivery(target.recipient, posts, papers))

    @classmethod
    def sender(cls, settings: Any) -> SlackChannel | None:
        return SlackChannel(settings) if isinstance(settings, SlackSettings) else None


class _Poster(Protocol):
    async def __call__(self, message: dict[str, Any], progress: Progress) -> None: ...


class SlackFailure(Exception):
    """A message Slack did not accept, with whether a retry can help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class SlackChannel:
    """Delivers digests to Slack channels and direct messages (bot token) or webhooks."""

    name = "slack"

    def __init__(
        self,
        settings: SlackSettings,
        *,
        client: AsyncWebClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.client = client or make_client(settings)
        self._sleep, self._monotonic, self._clock = sleep, monotonic, clock
        self._last_post: dict[str, float] = {}  # channel -> when paperbell last posted there
        self._cannot_look = False  # the token lacks a scope to read back (said once)

    def load(self, payload: bytes, progress: str | None = None) -> SlackDelivery:
        data = json.loads(payload)
        return SlackDelivery(
            target=data["target"],
            messages=tuple(data["messages"]),
            progress=Progress.loads(progress),
            papers=tuple(tuple(p) for p in data.get("papers", ())),
        )

    async def send_all(
        self,
        batch: Sequence[tuple[Any, SlackDelivery]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Post each digest's messages in order, pacing each channel; stop between messages
        if `should_stop()` (a digest cut off there has no outcome and goes on later)."""
        outcomes: list[SendOutcome] = []
        for item, delivery in batch:
            if should_stop is not None and should_stop():
                break
            progress = delivery.progress
            try:
                post = self._poster(delivery.target)
                for message in delivery.messages[progress.posted :]:
                    if should_stop is not None and should_stop() and progress.posted:
                        break
                    await post(message, progress)
                    progress.posted += 1
                    if progress.posted < len(delivery.messages) and on_progress is not None:
                        on_progress(item, progress.dumps())
                else:
                    await notify(on_sent, item)
                    outcomes.append(SendOutcome(item=item, ok=True))
            except Exception as exc:  # a bug must not leave the rest of the batch unsent
                if isinstance(exc, SlackFailure):
                    done = f" after {progress.posted} of its messages" if progress.posted else ""
                    log.warning("Slack digest to %s failed%s: %s", delivery.target, done, exc)
                    error, permanent = str(exc), exc.permanent
                else:
                    log.exception("Slack digest to %s failed", delivery.target)
                    error, permanent = f"unexpected error: {exc!r}", False
                if progress.unsure is not None and on_progress is not None:
                    on_progress(item, progress.dumps())  # the retry looks before posting
                sent = delivery.posted_papers()
                outcomes.append(failed(item, error, permanent, sent_papers=sent))
        return outcomes

    def _poster(self, target: str) -> _Poster:
        # slack-sdk is imported where a digest goes to Slack: an email-only run never needs it.
        from aiohttp import ClientError
        from slack_sdk.errors import SlackApiError, SlackClientError

        if target.startswith(WEBHOOK_PREFIX):
            variable = target.removeprefix(WEBHOOK_PREFIX)
            url = self.settings.webhooks.get(variable)
            if url is None:
                raise SlackFailure(
                    f"the webhook URL variable {variable} is not set in this process",
                    permanent=False,
                )
            return self._webhook_poster(variable, url)
        if not self.settings.token:
            raise SlackFailure(
                "no Slack bot token: set [slack] bot_token_env and its variable", permanent=False
            )

        async def post(message: dict[str, Any], progress: Progress) -> None:
            if progress.unsure is not None:
                found = await self._find_posted(target, progress)
                progress.unsure = None
                if found is not None:
                    self._took(progress, *found)
                    return
            progress.key = progress.key or secrets.token_hex(8)
            part = {"digest": progress.key, "part": progress.posted}
            channel = progress.channel or target
            await self._pace(channel)
            began = self._clock()
            try:
                response = await self.client.chat_postMessage(
                    channel=channel,
                    text=message.get("text") or "",
                    blocks=message.get("blocks") or None,
                    thread_ts=progress.thread_ts,
                    unfurl_links=False,
                    unfurl_media=False,
                    metadata={"event_type": DIGEST_EVENT, "event_payload": part},
                )
            except SlackApiError as exc:
                raise _api_failure(target, exc) from None
            except (TimeoutError, SlackClientError, ClientError, OSError) as exc:
                progress.unsure = (began, self._clock())  # no answer: it may be posted
                raise self._unreachable(exc) from None
            finally:
                self._last_post[channel] = self._monotonic()
            self._took(progress, str(response.get("channel") or channel), str(response["ts"]))

        return post

    def _took(self, progress: Progress, channel: str, ts: str) -> None:
        if progress.thread_ts is None:  # the summary: the rest goes in its thread
            progress.channel, progress.thread_ts = channel, ts
            self._last_post[channel] = self._monotonic()

    def _unreachable(self, exc: BaseException) -> SlackFailure:
        return SlackFailure(
            f"cannot reach Slack at {self.settings.api_url}: {describe(exc)}", permanent=False
        )

    async def _find_posted(self, target: str, progress: Progress) -> tuple[str, str] | None:
        """The channel and ts of the message an unanswered attempt posted after all (found by
        its metadata in the attempt's time window), or None: not posted, or not readable."""
        from aiohttp import ClientError
        from slack_sdk.errors import SlackApiError, SlackClientError

        if progress.unsure is None or progress.key is None or self._cannot_look:
            return None
        began, ended = progress.unsure
        window: dict[str, Any] = {
            "oldest": f"{began - CLOCK_SKEW:.6f}",
            "latest": f"{ended + CLOCK_SKEW:.6f}",
            "inclusive": True,
            "include_all_metadata": True,
            "limit": 200,
        }
        try:
            if progress.channel is None or progress.thread_ts is None:
                channel = await self._conversation_id(target)
                if channel is None:
                    return None
                response = await self.client.conversations_history(channel=channel, **window)
            else:
                channel = progress.channel
                response = await self.client.conversations_replies(
                    channel=channel, ts=progress.thread_ts, **window
                )
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error == "missing_scope":
                self._cannot_look = True
                log.warning(
                    "Slack: the bot token lacks the scope %s, so a message whose post got no "
                    "answer is posted again, perhaps twice: add %s (slack-app-manifest.yml) "
                    "and reinstall the app",
                    exc.response.get("needed") or "to read messages",
                    HISTORY_SCOPES,
                )
                return None
            if error in PERMANENT_ERRORS:
                return None  # posting says what is wrong, with the fix
            raise _api_failure(target, exc) from None
        except (TimeoutError, SlackClientError, ClientError, OSError) as exc:
            raise self._unreachable(exc) from None
        wanted = {"digest": progress.key, "part": progress.posted}
        for found in response.get("messages") or ():
            metadata = found.get("metadata") or {}
            if (
                metadata.get("event_type") == DIGEST_EVENT
                and metadata.get("event_payload") == wanted
            ):
                return channel, str(found["ts"])
        return None

    async def _conversation_id(self, target: str) -> str | None:
        """The conversation chat.postMessage posts to for `target`: a user's direct message
        (conversations.open), a "#name" (conversations.list), or the id itself."""
        if target[:1] in ("U", "W"):
            response = await self.client.conversations_open(users=target)
            return str(response["channel"]["id"])
        if not target.startswith("#"):
            return target
        pages = await self.client.conversations_list(
            types="public_channel,private_channel", exclude_archived=True, limit=1000
        )
        async for page in pages:
            for channel in page.get("channels") or ():
                if channel.get("name") == target[1:]:
                    return str(channel["id"])
        return None

    def _webhook_poster(self, variable: str, url: str) -> _Poster:
        from slack_sdk.errors import SlackClientError
        from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
        from slack_sdk.webhook.async_client import AsyncWebhookClient

        client = AsyncWebhookClient(url, timeout=whole_seconds(self.settings.timeout))
        client.retry_handlers.append(
            AsyncRateLimitErrorRetryHandler(max_retry_count=self.settings.rate_limit_retries)
        )

        async def post(message: dict[str, Any], progress: Progress) -> None:
            # A webhook cannot start a thread: the messages follow each other in the channel.
            key = WEBHOOK_PREFIX + variable
            await self._pace(key)
            try:
                response = await client.send(
                    text=message.get("text") or "",
                    blocks=message.get("blocks") or None,
                    unfurl_links=False,
                    unfurl_media=False,
                )
            except (TimeoutError, SlackClientError, OSError) as exc:
                raise SlackFailure(
                    f"cannot reach the webhook in {variable}: {describe(exc)}", permanent=False
                ) from None
            finally:
                self._last_post[key] = self._monotonic()
            if response.status_code != 200:
                code = (response.body or "").strip() or f"HTTP {response.status_code}"
                raise _failure(f"webhook {variable}", code, status=response.status_code)

        return post

    async def _pace(self, channel: str) -> None:
        last = self._last_post.get(channel)
        if last is not None:
            wait = self.settings.post_interval - (self._monotonic() - last)
            if wait > 0:
                await self._sleep(wait)


def make_client(settings: SlackSettings) -> AsyncWebClient:
    """slack-sdk's client for `settings`: the configured API URL, 429s waited out, and a
    connection that could not be made tried once more.
    Its async clients are imported here, when a digest goes to Slack: they bring aiohttp
    (a fifth of a second and some 10 MB), which an email-only run and the render workers
    never need."""
    from aiohttp import ClientConnectorError
    from slack_sdk.http_retry.builtin_async_handlers import (
        AsyncConnectionErrorRetryHandler,
        AsyncRateLimitErrorRetryHandler,
    )
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(
        token=settings.token, base_url=settings.api_url, timeout=whole_seconds(settings.timeout)
    )
    client.retry_handlers = [
        # Only before the request went out: after a dropped connection Slack may have
        # posted the message, and the outbox's retry looks for it before posting again.
        AsyncConnectionErrorRetryHandler(error_types=[ClientConnectorError]),
        AsyncRateLimitErrorRetryHandler(max_retry_count=settings.rate_limit_retries),
    ]
    return client


def whole_seconds(timeout: float) -> int:
    """`[slack] timeout` as slack-sdk takes it: whole seconds, rounded up, at least one
    (it reads 0 as no timeout at all)."""
    return max(1, math.ceil(timeout))


def _api_failure(target: str, exc: SlackApiError) -> SlackFailure:
    response = exc.response
    data = response.data if isinstance(response.data, dict) else {}
    code = str(data.get("error") or f"HTTP {response.status_code}")
    return _failure(target, code, status=response.status_code)


def _failure(target: str, code: str, *, status: int) -> SlackFailure:
    if code in PERMANENT_ERRORS:
        return SlackFailure(f"{target}: {code}: {PERMANENT_ERRORS[code]}", permanent=True)
    if code in TOKEN_ERRORS:
        return SlackFailure(f"{target}: {code}: {TOKEN_ERRORS[code]}", permanent=False)
    # 5xx, or an error paperbell does not know: worth another attempt later.
    return SlackFailure(f"{target}: Slack answered {code} (HTTP {status})", permanent=False)
