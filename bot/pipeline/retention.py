"""Pruning the database by [database] keep_sent_days, keep_bounces_days and
keep_unconfirmed_days: once a day by the daemon (while it leads), and by `paperbell db
prune`. What is kept and what is cut is the store's (bot.store.retention, and
`Subscribers.never_confirmed`); this module turns the config into dates and words the
outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from bot.config import DatabaseConfig
from bot.core.plurals import plural
from bot.pipeline.wiring import NOTICE_CHANNEL
from bot.store import Pruned, Store


def prune_old(
    keep: DatabaseConfig,
    store: Store,
    *,
    now: datetime,
    dry_run: bool = False,
    batches: int | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Pruned:
    """Cut the messages sent more than keep_sent_days ago to their headers, delete the
    bounces older than keep_bounces_days and the sign-ups never confirmed in
    keep_unconfirmed_days (0: none of these), as [database] `keep` says."""
    pruned = store.retention.prune(
        sent_before=now - timedelta(days=keep.keep_sent_days) if keep.keep_sent_days else None,
        bounces_before=(
            now - timedelta(days=keep.keep_bounces_days) if keep.keep_bounces_days else None
        ),
        dry_run=dry_run,
        batches=batches,
        should_stop=should_stop,
    )
    if not keep.keep_unconfirmed_days:
        return pruned
    # A stranger may sign up anyone, up to the page's limits, each hour: what they leave
    # behind goes once its confirmation link is long dead.
    before = now - timedelta(days=keep.keep_unconfirmed_days)
    names = store.subscribers.never_confirmed(before, notices=(NOTICE_CHANNEL,))
    deleted = 0
    for name in names:
        if should_stop():
            break
        if not dry_run:
            store.subscribers.delete(name)
        deleted += 1
    return replace(pruned, signups=deleted)


def pruned_line(keep: DatabaseConfig, pruned: Pruned, *, dry_run: bool = False) -> str:
    """What a prune did, in one line: "cut 1,204 messages sent over 90 days ago to their
    headers (35.1 MB); deleted 3 bounces over 365 days old"."""
    cut, deleted = ("would cut", "would delete") if dry_run else ("cut", "deleted")
    parts = []
    if keep.keep_sent_days:
        parts.append(
            f"{cut} {plural(pruned.messages, 'message')} sent over "
            f"{plural(keep.keep_sent_days, 'day')} ago to their headers "
            f"({pruned.freed / 1_000_000:.1f} MB)"
        )
    else:
        parts.append("sent messages kept for ever (keep_sent_days = 0)")
    if keep.keep_bounces_days:
        parts.append(
            f"{deleted} {plural(pruned.bounces, 'bounce')} over "
            f"{plural(keep.keep_bounces_days, 'day')} old"
        )
    else:
        parts.append("bounces kept for ever (keep_bounces_days = 0)")
    if keep.keep_unconfirmed_days:
        parts.append(
            f"{deleted} {plural(pruned.signups, 'sign-up')} never confirmed in "
            f"{plural(keep.keep_unconfirmed_days, 'day')}"
        )
    else:
        parts.append("unconfirmed sign-ups kept for ever (keep_unconfirmed_days = 0)")
    return "; ".join(parts)
