"""A subscriber's personal Atom feed: `GET /feed/{token}.atom`, every paper sent to them by
any channel (the last `FEED_PAPERS`), newest first, for a feed reader.

Wiring only: who the token names is `bot.manage` (`Manager.open`: a standing link, which
never expires and ends with an unsubscribe or a change of address), what was sent is
`store.archive`, the document `bot.render.atom`. Conditional GET as feed readers use it:
the ETag is a digest of the document (so any change, a paper's text fixed too, is a new
one) and Last-Modified the latest delivery; If-None-Match, then If-Modified-Since, answer
304 as Starlette's static files do. A refused token gets the pages' refusal (403, 404,
410), which a reader shows as an error and a person who pastes the URL can read.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from email.utils import format_datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from bot.core.links import owner_tag
from bot.core.models import Subscriber
from bot.render.atom import FEED_TYPE, FeedEntry, FeedInfo, render_feed
from bot.web.site import Site

__all__ = ["FEED_PAPERS", "FeedPages"]

FEED_PAPERS = 200  # the most recent papers a feed lists (about two months of a daily digest)
# Starlette's conditional-request check (RFC 9110 13.2.2: If-None-Match first, weakly
# compared, else If-Modified-Since), from its static files; it reads no directory here.
_CONDITIONS = StaticFiles(check_dir=False)


class FeedPages:
    """The Atom feeds, over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager

    def document(self, sub: Subscriber) -> tuple[bytes, datetime]:
        """The subscriber's feed, and when it last changed (its newest delivery)."""
        assert sub.id is not None
        signer = self.manager.signer
        sent = self.manager.store.archive.delivered(sub.id, limit=FEED_PAPERS)
        since = sub.created or datetime(2024, 1, 1, tzinfo=UTC)
        info = FeedInfo(
            # The same feed for the same subscriber at the same address (as its URL is).
            id=uuid.uuid5(
                uuid.NAMESPACE_URL, f"{signer.public_url}/feed/{sub.id}/{owner_tag(sub)}"
            ).urn,
            title=f"{self.site.name}: papers for {sub.name}",
            self_url=signer.feed_url(sub),
            author=self.site.name,
            updated=since,
        )
        entries = [FeedEntry(each.paper, each.first, each.last) for each in sent]
        updated = max((each.last for each in sent), default=since)
        return render_feed(info, entries, site=signer.public_url), updated

    async def feed(self, request: Request) -> Response:
        """`GET /feed/{token}.atom` (and HEAD): the feed, or 304 when the reader has it."""
        sub = await self.site.open_link(request, "feed")
        if isinstance(sub, Response):
            return sub
        body, updated = await run_in_threadpool(self.document, sub)
        headers = {
            "ETag": f'"{hashlib.sha256(body).hexdigest()[:32]}"',
            "Last-Modified": format_datetime(updated.astimezone(UTC), usegmt=True),
            # Kept by the reader (and never by a shared cache: the URL is a capability),
            # asked again each time: a 304 costs a few bytes.
            "Cache-Control": "private, no-cache",
        }
        response = Response(body, media_type=f"{FEED_TYPE}; charset=utf-8", headers=headers)
        if _CONDITIONS.is_not_modified(response.headers, request.headers):
            return Response(status_code=304, headers=headers)
        return response
