"""The bounce webhooks: `POST /bounces/ses` (Amazon SES through SNS: its signature checked,
its subscription confirmed), `POST /bounces/postmark` (basic auth) and `POST /bounces/mailgun`
(HMAC-signed), each mounted only when `[bounces]` sets it up.

Wiring only: the JSON is read by bot.bounces.webhooks, the calls checked by bot.bounces.sns
and bot.bounces.signatures, and each report acted on and recorded by
bot.pipeline.bounces.handle_report, the path a bounce read from mail takes. Every call a
stranger can make is answered with a 4xx, never a 500, and pauses no one: a call that fails
its check is recorded as forged (a few an hour per address: a flood is counted, not
stored); an event delivered again (providers retry) is known by its id and not counted
twice.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.bounces import BounceReport
from bot.bounces.signatures import SeenTokens, basic_auth_ok, mailgun_problem, mailgun_signature
from bot.bounces.sns import Fetch, SigningCertificates, SnsMessage, read_message, sns_url_ok
from bot.bounces.webhooks import (
    WebhookEvent,
    load_json,
    read_mailgun,
    read_postmark,
    read_ses,
)
from bot.config.sections import BouncesConfig
from bot.core.errors import PaperbellError
from bot.core.verp import MessageIds, Verp
from bot.pipeline.bounces import BounceOutcome, handle_report, record_forged
from bot.pipeline.wiring import Parts
from bot.sources.base import FetchLimits, FetchState
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store
from bot.web.guards import Throttle, client_of, read_body

log = logging.getLogger(__name__)

PATHS = {"ses": "/bounces/ses", "postmark": "/bounces/postmark", "mailgun": "/bounces/mailgun"}
MAX_BODY = 256 * 1024  # an SES notification quoting its headers is a few KB; Postmark's
# "Content" (the raw bounce, when included) can be larger
SNS_LIMITS = FetchLimits(max_body=64 * 1024, deadline=10.0)  # a certificate, a confirmation


async def sns_fetch(url: str) -> bytes:
    """GET an SNS URL (a signing certificate, a subscription link) through the fetcher's
    size cap and deadline, following no redirect: only the SNS host named is believed."""
    async with make_client(timeout=SNS_LIMITS.deadline, follow_redirects=False) as client:
        fetcher = PoliteFetcher(client, min_interval=0, retries=1, backoff=0.5, limits=SNS_LIMITS)
        try:
            result = await fetcher.get(url, FetchState(), source="sns")
        except PaperbellError as exc:  # its hint speaks of sources' options: not these
            raise PaperbellError(exc.message) from None
    if result.status != 200 or result.body is None:
        raise PaperbellError(f"{url} answered HTTP {result.status}")
    return result.body


class BounceHooks:
    """The webhooks of the providers `settings` names, acting on `store`."""

    def __init__(
        self,
        settings: BouncesConfig,
        store: Store,
        *,
        verp: Verp | None,
        bounce_limit: int,
        clock: Callable[[], datetime],
        fetch: Fetch = sns_fetch,
        message_ids: MessageIds | None = None,
    ) -> None:
        self.settings, self.store, self.clock, self.fetch = settings, store, clock, fetch
        self.verp, self.bounce_limit = verp, bounce_limit
        # A provider's call is authenticated: its report may name its digest by the signed
        # Message-ID (providers rewrite the envelope sender).
        self.message_ids = message_ids
        self.certificates = SigningCertificates(fetch)
        self.tokens = SeenTokens()
        # Forged calls recorded in the store; past these, only counted and logged.
        self.forged_recorded = Throttle(per_client=10, overall=100)
        self.counts: Counter[str] = Counter()  # calls by "provider outcome"
        self._lock = threading.Lock()  # one event at a time: its duplicate waits, then sees it

    def routes(self) -> list[Route]:
        """The routes of the providers set up (none with IMAP alone); a warning for each
        whose secret is not set yet."""
        endpoints = {"ses": self.ses, "postmark": self.postmark, "mailgun": self.mailgun}
        unset = {
            "postmark": self.settings.postmark_secret is None,
            "mailgun": self.settings.mailgun_signing_key is None,
        }
        routes = []
        for name in self.settings.webhooks():
            if unset.get(name):
                log.warning(
                    "bounces: the secret of POST %s is not set (its variable, [bounces] %s_env): "
                    "it answers 503 until it is",
                    PATHS[name],
                    "postmark_secret" if name == "postmark" else "mailgun_signing_key",
                )
            routes.append(Route(PATHS[name], endpoints[name], methods=["POST"]))
        return routes

    # -- the providers ---------------------------------------------------------------------

    async def ses(self, request: Request) -> Response:
        """`POST /bounces/ses`: an SNS delivery (a notification, a subscription's
        confirmation), its signature and topic checked before anything else."""
        data = await self._json(request, "ses")
        if isinstance(data, Response):
            return data
        message = read_message(data)
        if isinstance(message, str):
            return self._answer(400, "ses", f"not an SNS message: {message}")
        topic = message.get("TopicArn") or ""
        if topic not in self.settings.ses_topic_arns:
            unknown = f"a topic not in ses_topic_arns: {topic[:200]}"
            return await self._forged(request, "ses", unknown)
        problem = await self.certificates.verify(message, now=self.clock())
        if problem is not None:
            return await self._forged(request, "ses", problem)
        if message.type == "SubscriptionConfirmation":
            return await self._confirm(message)
        if message.type == "UnsubscribeConfirmation":
            log.warning("bounces: SNS unsubscribed this site from %s", topic)
            return self._answer(200, "ses", "unsubscribed")
        inner, problem = load_json((message.get("Message") or "").encode("utf-8", "replace"))
        event = read_ses(inner) if problem is None else read_ses(None)
        return await self._handle(event)

    async def postmark(self, request: Request) -> Response:
        """`POST /bounces/postmark`: a Postmark webhook call, with the basic auth of its URL."""
        found = await self._secret_and_json(request, "postmark")
        if isinstance(found, Response):
            return found
        secret, data = found
        if not basic_auth_ok(request.headers.get("authorization"), secret):
            return await self._forged(request, "postmark", "wrong or no credentials", status=401)
        return await self._handle(read_postmark(data))

    async def mailgun(self, request: Request) -> Response:
        """`POST /bounces/mailgun`: a Mailgun webhook call, signed with the signing key."""
        found = await self._secret_and_json(request, "mailgun")
        if isinstance(found, Response):
            return found
        key, data = found
        signed = mailgun_signature(data)
        now = self.clock().timestamp()
        problem = mailgun_problem(signed, key, now=now)
        if (
            problem is None
            and signed is not None
            and not self.tokens.first_time(signed.token, now=now)
        ):
            problem = "a token seen before (a replay)"
        if problem is not None:
            return await self._forged(request, "mailgun", problem, status=401)
        return await self._handle(read_mailgun(data))

    # -- shared steps ----------------------------------------------------------------------

    async def _secret_and_json(self, request: Request, provider: str) -> tuple[str, Any] | Response:
        """The provider's secret and the call's JSON, or the answer that says why not (a
        secret whose variable is not set: 503, for the operator to set it)."""
        secret, option = {
            "postmark": (self.settings.postmark_secret, "postmark_secret_env"),
            "mailgun": (self.settings.mailgun_signing_key, "mailgun_signing_key_env"),
        }[provider]
        if secret is None:
            return self._answer(503, provider, f"[bounces] {option} is not set")
        data = await self._json(request, provider)
        return data if isinstance(data, Response) else (secret, data)

    async def _json(self, request: Request, provider: str) -> Any:
        """The call's JSON, or the 4xx that says why there is none."""
        body = await read_body(request, MAX_BODY)
        if body is None:
            return self._answer(413, provider, f"the body is larger than {MAX_BODY} bytes")
        data, problem = load_json(body)
        if problem is not None:
            return self._answer(400, provider, problem)
        if not isinstance(data, dict):
            return self._answer(400, provider, "the body is not a JSON object")
        return data

    async def _confirm(self, message: SnsMessage) -> Response:
        """Confirm a subscription to a topic of ses_topic_arns, its message checked."""
        url = message.get("SubscribeURL") or ""
        if not sns_url_ok(url):
            return self._answer(400, "ses", "SubscribeURL is not an SNS link")
        try:
            await self.fetch(url)
        except Exception as exc:  # the fetch's own error: SNS sends the confirmation again
            log.warning("bounces: could not confirm the SNS subscription: %s", exc)
            return self._answer(503, "ses", "the subscription could not be confirmed; try again")
        log.info("bounces: confirmed the SNS subscription to %s", message.get("TopicArn"))
        return self._answer(200, "ses", "subscribed")

    async def _handle(self, event: WebhookEvent) -> Response:
        """Act on an event checked as the provider's; one that is not a bounce is counted."""
        if not event.reports:
            return self._answer(200, event.provider, f"ignored: {event.event}")
        try:
            outcomes = await run_in_threadpool(self._act, event)
        except PaperbellError as exc:  # the database: the provider will deliver it again
            log.error("bounces: %s event not recorded: %s", event.provider, exc)
            return self._answer(503, event.provider, "not recorded; try again later")
        actions = [outcome.action for outcome in outcomes]
        if event.problem is not None:
            return self._answer(400, event.provider, f"unreadable: {event.problem}")
        return self._answer(200, event.provider, ", ".join(actions), actions=actions)

    def _act(self, event: WebhookEvent) -> list[BounceOutcome]:
        now = self.clock()
        outcomes = []
        with self._lock:
            for source, report in event.sources():
                before = self.store.bounces.read_before(source) if source else None
                if before is not None:
                    outcomes.append(BounceOutcome("read before", before.kind, None, "read before"))
                    continue
                outcomes.append(
                    handle_report(
                        report,
                        store=self.store,
                        verp=self.verp,
                        bounce_limit=self.bounce_limit,
                        now=now,
                        source=source,
                        by_address=True,
                        message_ids=self.message_ids,
                    )
                )
        return outcomes

    async def _forged(
        self, request: Request, provider: str, problem: str, *, status: int = 403
    ) -> Response:
        """A call that failed its check: recorded as forged (a few an hour per address),
        logged and counted; it changes nothing."""
        now = self.clock()
        client = client_of(request)
        if self.forged_recorded.allow(client, now):
            report = BounceReport("unknown", provider, problem=problem)
            try:
                await run_in_threadpool(record_forged, report, store=self.store, now=now)
            except PaperbellError as exc:
                log.error("bounces: a forged %s call not recorded: %s", provider, exc)
        else:
            log.warning("bounces: a forged %s call from %s: %s", provider, client, problem)
        return self._answer(status, provider, problem)

    def _answer(self, status: int, provider: str, said: str, **more: Any) -> Response:
        self.counts[f"{provider} {status}"] += 1
        return JSONResponse({"provider": provider, "result": said, **more}, status_code=status)


def bounce_routes(
    bounces: BouncesConfig | None,
    parts: Parts,
    *,
    clock: Callable[[], datetime],
    fetch: Fetch = sns_fetch,
) -> list[Route]:
    """The webhooks `bounces` ([bounces]) sets up (none without the section, or with IMAP
    alone), over the wired `parts`: the store, the envelope and Message-ID signers,
    [delivery] bounce_limit."""
    if bounces is None:
        return []
    hooks = BounceHooks(
        bounces,
        parts.store,
        verp=parts.verp,
        message_ids=parts.message_ids,
        bounce_limit=parts.retry.bounce_limit,
        clock=clock,
        fetch=fetch,
    )
    return hooks.routes()
