"""The database's tables, as SQLModel classes (the schema), and how their values are kept.

Table and column names are the database's: changing one is a schema change (a migration),
never a refactor. Columns holding lists keep them as JSON (`dump_list`, `load_list`); a row
leaves bot.store as a frozen record (`as_record`), never as itself. No queries here: the
repositories of bot.store (papers, subscribers, outbox, ...) ask the tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import fields
from datetime import date, datetime
from typing import Any, TypeVar

from sqlalchemy import Index, LargeBinary, UniqueConstraint, Update, delete, or_, text, update
from sqlmodel import Field, Session, SQLModel, col, select

from bot.core.models import MAX_ID_LENGTH

# A target's channel key: a kind ("email") or a kind and a key ("apprise:1a2b3c4d5e6f")
# (migration 0008 widened it from 16).
CHANNEL_LENGTH = 64
MAX_DIAGNOSTIC = 500  # characters of a bounce's diagnostic text kept (a DSN's can be long)

Record = TypeVar("Record")


def dump_list(values: Iterable[str]) -> str:
    """A list column's stored text (a JSON list)."""
    return json.dumps(list(values))


def load_list(text: str) -> tuple[str, ...]:
    """A list column's values, from its stored text."""
    return tuple(json.loads(text))


def as_record(kind: type[Record], row: SQLModel) -> Record:
    """`row` as the frozen dataclass `kind` (what bot.store hands out instead of rows): its
    fields are the row's columns of the same names, values as stored."""
    values: dict[str, Any] = {f.name: getattr(row, f.name) for f in fields(kind)}  # type: ignore[arg-type]
    return kind(**values)


class PaperRow(SQLModel, table=True):
    __tablename__ = "papers"

    id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    version: int
    title: str
    abstract: str
    authors: str  # JSON list
    categories: str  # JSON list, primary first
    announce_type: str = Field(max_length=16)
    announced: date | None = Field(default=None, index=True)
    dois: str = "[]"  # JSON list
    journal_ref: str | None = None
    license: str | None = None
    source: str = Field(default="", max_length=128)
    first_seen: datetime
    first_announced: date | None = None  # the first version's announcement: never overwritten
    first_type: str = Field(default="new", max_length=16)
    updated_at: datetime
    sources: str = "[]"  # JSON list: every source name and kind that brought it
    authority: int = 3  # of the source that wrote the bibliographic fields (bot.core.merge)
    link: str | None = None
    upvotes: int | None = None
    hf_rank: int | None = None
    hf_day: date | None = None
    comments: int | None = None
    keywords: str = "[]"  # JSON list
    ai_summary: str | None = None
    github: str | None = None
    github_stars: int | None = None
    organization: str | None = None


class PaperKeyRow(SQLModel, table=True):
    """Another name of a stored paper ("doi:10.1101/..."): a journal feed's entry with the
    DOI of a paper stored under its arXiv id is that paper."""

    __tablename__ = "paper_keys"

    key: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    paper_id: str = Field(index=True, max_length=MAX_ID_LENGTH)


class SubscriberRow(SQLModel, table=True):
    __tablename__ = "subscribers"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=64)
    email: str | None = Field(default=None, max_length=320)
    origin: str = Field(default="database", max_length=16)  # "config" or "database"
    active: bool = True
    categories: str = "[]"  # JSON list
    max_papers: int = 50
    include: str = '["cross", "new"]'  # JSON list
    created_at: datetime
    paused_reason: str | None = None  # why paperbell paused it (an address that bounces)
    # The subscriber's own schedule; None: the config's [digest] default.
    schedule: str | None = Field(default=None, max_length=8)  # daily, weekly
    day: str | None = Field(default=None, max_length=9)
    time: str | None = Field(default=None, max_length=5)  # "08:00"
    timezone: str | None = Field(default=None, max_length=64)
    notify_empty: bool | None = None
    last_slot: str | None = Field(default=None, max_length=32)  # handled by the daemon
    # Why that slot sent nothing ("No arXiv announcement ...", "nothing matched ..."); None
    # when it sent a digest (migration 0003).
    last_slot_note: str | None = None
    # "#name" or an id; indexed (migration 0009): a channel's commands look it up
    slack_channel: str | None = Field(default=None, max_length=82, index=True)
    slack_user: str | None = Field(default=None, max_length=32, index=True)  # a user id
    slack_webhook: str | None = Field(default=None, max_length=128)  # the URL's variable
    # Apprise URLs, whitespace or comma separated, in this environment variable (migration
    # 0008); those given on the manage page are `destinations`.
    apprise_env: str | None = Field(default=None, max_length=128)
    email_confirmed: bool = True  # False: learnt from Slack, not confirmed by its owner
    # A new address asked for while `email` is confirmed: `email` keeps the digests until
    # the new one's own link confirms it and it replaces `email` (migration 0019).
    pending_email: str | None = Field(default=None, max_length=320)
    email_format: str = Field(default="html", max_length=8)  # html, text
    abstracts: str = Field(default="short", max_length=8)  # short, full
    # A digest too long for one email: "parts" or "one" (migration 0016).
    long_emails: str = Field(default="parts", max_length=8)
    # A summary in place of each abstract; a language the texts are translated into (a
    # BCP 47 tag), None: English only (migration 0004).
    summaries: bool = False
    language: str | None = Field(default=None, max_length=35)
    # Papers no rule matched but close to what the subscriber liked: at most similar_max
    # added to a digest, those scoring at least similar_min (None: the ranking's default)
    # (migration 0006).
    similar_max: int = 5
    similar_min: float | None = None


class RuleRow(SQLModel, table=True):
    __tablename__ = "rules"

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    text: str = Field(max_length=1000)
    created_at: datetime
    # A short name shown in place of the rule (bot.core.checks.check_label: at most
    # MAX_LABEL_LENGTH characters; the column leaves room); None: the rule is shown
    # (migration 0005).
    label: str | None = Field(default=None, max_length=100)


class DeliveryRow(SQLModel, table=True):
    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("subscriber_id", "paper_id", "paper_version", "channel"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    paper_id: str = Field(max_length=MAX_ID_LENGTH)
    paper_version: int
    channel: str = Field(max_length=CHANNEL_LENGTH)  # the target's: "email", "apprise:<key>"
    # "queued" (in a digest waiting in the outbox), "sent", or "omitted" (over the
    # subscriber's max_papers, or past what one email holds, in a digest that was queued
    # or sent)
    status: str = Field(max_length=16)
    digest_id: str = Field(max_length=128)
    outbox_id: int | None = Field(default=None, foreign_key="outbox.id", index=True)
    created_at: datetime


class OutboxRow(SQLModel, table=True):
    """A built digest waiting to be sent, being sent, sent, or failed (the outbox).

    Written with its papers' delivery rows in one transaction; unique per subscriber,
    channel and period, so two builders cannot queue the same digest twice."""

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("subscriber_id", "channel", "period"),
        # A bounce's address matched to the latest email sent to it; the emails of a day
        # (migration 0014).
        Index("ix_outbox_recipient_lower", text("lower(recipient)")),
        Index("ix_outbox_sent_at", "sent_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    channel: str = Field(max_length=CHANNEL_LENGTH)  # the target's: "email", "apprise:<key>"
    period: str = Field(max_length=128)  # the schedule slot ("daily:2026-11-23"), or the digest id
    digest_id: str = Field(max_length=128, index=True)  # a bounce names it (Message-ID)
    recipient: str = Field(max_length=320)
    papers: int = 0
    omitted: int = 0
    status: str = Field(default="pending", max_length=16, index=True)  # pending, sent, failed
    attempts: int = 0
    next_attempt: datetime
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_until: datetime | None = None
    last_error: str | None = None
    # Failed because its recipient refused it (a 5xx): what counts toward pausing them.
    # A resume clears it, so that the count starts again.
    refused: bool = False
    created_at: datetime
    sent_at: datetime | None = None
    # A digest sent as several messages (Slack: a summary and its thread) records each
    # message as it is accepted, so a retry goes on after the last one (JSON).
    progress: str | None = None


def refusals_forgotten(subscriber_id: int, channel: str | None = None) -> Update:
    """The statement a resume runs: the subscriber's refusals (on `channel`, when given)
    count no more toward pausing them again."""
    query = update(OutboxRow).where(
        col(OutboxRow.subscriber_id) == subscriber_id, col(OutboxRow.refused)
    )
    if channel is not None:
        query = query.where(col(OutboxRow.channel) == channel)
    return query.values(refused=False)


def failed_period(period: str, record_id: int) -> str:
    """The period a record given up is renamed to ("<period>#failed-<id>"): the slot is
    free again, so the papers that go back to the subscriber may be queued for it."""
    return f"{period}#failed-{record_id}"[:128]


def withdraw_queued(
    session: Session, subscriber_id: int, why: str, *, now: datetime, channel: str | None = None
) -> int:
    """Give up the subscriber's digests still queued (for `channel`, when given), as a
    failure (`why`), and hand their papers back, so that a pause or an unsubscribe stops
    them at once: a digest waiting for a retry or the relay's limits would go out after it.
    One a worker holds now, or that is half-way out (a Slack thread), is left to finish.
    Returns how many."""
    free = (
        col(OutboxRow.status) == "pending",
        col(OutboxRow.progress).is_(None),
        or_(col(OutboxRow.lease_until).is_(None), col(OutboxRow.lease_until) < now),
    )
    theirs = select(OutboxRow.id, OutboxRow.period).where(
        OutboxRow.subscriber_id == subscriber_id, *free
    )
    if channel is not None:
        theirs = theirs.where(OutboxRow.channel == channel)
    withdrawn = 0
    for record_id, period in session.exec(theirs).all():
        assert record_id is not None  # a stored record's
        given_up = (
            update(OutboxRow)
            .where(col(OutboxRow.id) == record_id, *free)
            .values(status="failed", last_error=why, period=failed_period(period, record_id))
        )
        if session.execute(given_up).rowcount:  # type: ignore[attr-defined]
            session.execute(delete(DeliveryRow).where(col(DeliveryRow.outbox_id) == record_id))
            withdrawn += 1
    return withdrawn


class OutboxMessageRow(SQLModel, table=True):
    """An outbox record's finished message, sent as it is (migration 0013 moved it out of
    `outbox`): SQLite writes a whole row again for any change, so a 60 KB message beside
    the status would be rewritten by every claim, lease renewal and "sent" (3-4 times a
    digest); kept apart, it is written once. A prune cuts it to its headers."""

    __tablename__ = "outbox_messages"

    outbox_id: int = Field(
        foreign_key="outbox.id", primary_key=True, sa_column_kwargs={"autoincrement": False}
    )
    payload: bytes = Field(sa_type=LargeBinary)  # empty until its job is rendered
    # The digest to render, for the worker that claims it (`bot.pipeline.jobs`); None once
    # rendered into `payload` (migration 0017).
    job: bytes | None = Field(default=None, sa_type=LargeBinary)


class DestinationRow(SQLModel, table=True):
    """A place a database subscriber's digests go that they gave on the manage page (or the
    command line): an Apprise URL, kept under its target's channel key. The URL may hold a
    secret (a webhook's token): it is shown masked only, never logged (migration 0008)."""

    __tablename__ = "destinations"
    __table_args__ = (UniqueConstraint("subscriber_id", "channel"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    channel: str = Field(max_length=CHANNEL_LENGTH)  # "apprise:1a2b3c4d5e6f"
    url: str
    created_at: datetime
    # Given on the manage page (sent through the guard: public addresses only), not by the
    # operator's command line; the rows from before there was a guard count as the page's
    # (migration 0015).
    self_service: bool = True


class TargetPauseRow(SQLModel, table=True):
    """One target of a subscriber that refused its digests too many times in a row (an
    Apprise service answering 404): no digest is built for it until it is resumed; the
    subscriber's other targets go on (migration 0008)."""

    __tablename__ = "target_pauses"

    subscriber_id: int = Field(primary_key=True, foreign_key="subscribers.id")
    channel: str = Field(primary_key=True, max_length=CHANNEL_LENGTH)
    reason: str
    paused_at: datetime


class SourceStateRow(SQLModel, table=True):
    __tablename__ = "source_state"

    name: str = Field(primary_key=True, max_length=128)
    url: str = ""
    etag: str | None = None
    last_modified: str | None = None
    last_poll: datetime | None = None
    last_result: str = ""  # ok, not_modified, empty, error
    last_error: str | None = None
    items: int = 0
    new: int = 0
    updated: int = 0
    announced: date | None = None
    # The batch of ids the source last gave (a digest of them), and when a poll last
    # brought a different one (a new listing), with the date that poll's feed gave.
    batch: str | None = Field(default=None, max_length=64)
    last_new: datetime | None = None
    last_new_day: date | None = None
    # The last poll that did not fail, and the first failure of the current run of them
    # (None while it works): "failing since ..." (migration 0003).
    last_success: datetime | None = None
    failing_since: datetime | None = None


class SourceLeftOutRow(SQLModel, table=True):
    """What a source's last poll left out: how many items it could not read, and the first
    of them with why (`paperbell status`, /metrics). A table of its own (migration 0002)."""

    __tablename__ = "source_left_out"

    name: str = Field(primary_key=True, max_length=128)
    count: int = 0
    first: str | None = None  # "item 7 (oai:arXiv.org:2411.00002v9…): version … out of range"
    at: datetime | None = None  # the poll


class SourceListingRow(SQLModel, table=True):
    """One announcement day's listing of a source that follows arXiv's calendar: how many
    papers it held (against the same weekday's usual count it reads as short), and what a
    repair from the arXiv API filled in (migration 0003)."""

    __tablename__ = "source_listing"

    source: str = Field(primary_key=True, max_length=128)
    day: date = Field(primary_key=True)
    items: int = 0  # papers in the listing (the most any poll of that day saw)
    seen: datetime  # the poll that first brought it
    repair_reason: str | None = Field(default=None, max_length=16)  # "short", "stale", "missed"
    repair_tried: datetime | None = None  # the last repair attempt
    repaired: int | None = None  # papers the arXiv API gave for the day (None: not repaired)
    repaired_new: int = 0  # of them, papers the listing lacked
    repair_error: str | None = None  # why the last attempt failed


class BackfillRow(SQLModel, table=True):
    """A part of a backfill that is done (a source's day): a rerun skips it."""

    __tablename__ = "backfill"

    source: str = Field(primary_key=True, max_length=128)
    chunk: str = Field(primary_key=True, max_length=64)
    papers: int = 0
    done_at: datetime


class SlackRequestRow(SQLModel, table=True):
    """A signed Slack request already accepted (its signature), kept for the five minutes
    Slack's timestamps are valid: a replay is refused even after a restart, and by every
    process sharing the database."""

    __tablename__ = "slack_request"

    signature: str = Field(primary_key=True, max_length=128)
    seen: datetime = Field(index=True)  # the later of when it came and its timestamp


class RuleCountRow(SQLModel, table=True):
    """What one rule of a subscriber matched among the papers of some recent days, counted
    when digests are built (at most once a day each), so that the manage page only reads."""

    __tablename__ = "rule_counts"

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    rule: str = Field(max_length=1000)
    matched: int = 0
    papers: int = 0  # the papers of those days
    first: date | None = None  # the days: first .. last announcement day
    last: date | None = None
    examples: str = "[]"  # JSON list of the best-ranked matched papers' ids
    counted_at: datetime


class PaperTextRow(SQLModel, table=True):
    """A text a model wrote for one version of a paper: its summary, or its title, abstract
    or summary translated; written once per paper version, kind, language and model, and
    read by every digest that shows it (migration 0004)."""

    __tablename__ = "paper_text"

    paper_id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    version: int = Field(primary_key=True)
    kind: str = Field(primary_key=True, max_length=16)  # summary, title, abstract
    language: str = Field(primary_key=True, max_length=35)  # "en" for the English summary
    model: str = Field(primary_key=True, max_length=200)
    # What was summarised or translated (a digest of it): a text written from another
    # source (a new summary, an abstract fixed in place) is not this one.
    source_hash: str = Field(max_length=16)
    text: str
    created_at: datetime
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LlmDayRow(SQLModel, table=True):
    """One day's (UTC) use of one model: requests made (the daily budget counts them),
    texts found already written, failures by reason, tokens, and texts not asked for
    because the budget had run out (migration 0004)."""

    __tablename__ = "llm_day"

    day: date = Field(primary_key=True)
    model: str = Field(primary_key=True, max_length=200)
    requests: int = 0
    written: int = 0
    cached: int = 0  # texts a run needed that were already stored
    failed: int = 0
    over_budget: int = 0  # texts not asked for: the day's budget had run out
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: str = "{}"  # JSON: reason -> count
    last_error: str | None = None
    last_error_at: datetime | None = None


class FeedbackRow(SQLModel, table=True):
    """A subscriber's verdict on one paper: liked or disliked, and where it was given (the
    config's `like` list, a library file, a command, an email or Slack button, the manage
    page). One per paper per subscriber; the text the ranking reads is kept with it, so a
    liked paper need not be among the stored papers (migration 0006). A verdict given by
    hand in place of another keeps the one it replaced (`earlier_*`, migration 0007), so
    Undo puts that back."""

    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("subscriber_id", "paper_key"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    paper_key: str = Field(max_length=MAX_ID_LENGTH)  # "2411.18179", "doi:…", "title:…"
    verdict: str = Field(max_length=8)  # like, dislike
    via: str = Field(max_length=16)  # config, file, command, slack, email, page
    title: str = ""
    text: str = ""  # title and abstract, as the ranking reads them ("" when unknown)
    created_at: datetime
    # The verdict this one replaced (a 👎 clicked before a 👍, the config file's), if any.
    earlier_verdict: str | None = Field(default=None, max_length=8)
    earlier_via: str | None = Field(default=None, max_length=16)
    earlier_at: datetime | None = None


class TextVectorRow(SQLModel, table=True):
    """A text's vector from one embedding model, keyed by a hash of the text: each paper is
    embedded once per model, whoever it is ranked for (migration 0006)."""

    __tablename__ = "text_vectors"

    model: str = Field(primary_key=True, max_length=200)
    text_hash: str = Field(primary_key=True, max_length=64)
    vector: bytes = Field(sa_type=LargeBinary)
    created_at: datetime


class RankingModelRow(SQLModel, table=True):
    """A subscriber's fitted ranking model, refitted when their feedback changes (the hash
    of the feedback it was fitted on) or the vectoriser does (`kind`) (migration 0006)."""

    __tablename__ = "ranking_models"

    subscriber_id: int = Field(primary_key=True, foreign_key="subscribers.id")
    kind: str = Field(max_length=200)
    feedback_hash: str = Field(max_length=64)
    data: bytes = Field(sa_type=LargeBinary)
    fitted_at: datetime


class BounceRow(SQLModel, table=True):
    """One message that came back to the bounce address (a DSN, a complaint, an
    auto-reply, or something unreadable), what it said and what paperbell did about it
    (migration 0010). The outbox record and subscriber are those it names, when known."""

    __tablename__ = "bounces"

    id: int | None = Field(default=None, primary_key=True)
    received_at: datetime = Field(index=True)
    outbox_id: int | None = Field(default=None, foreign_key="outbox.id")
    subscriber_id: int | None = Field(default=None, foreign_key="subscribers.id", index=True)
    # hard, soft, complaint, auto-reply, unknown
    kind: str = Field(max_length=16)
    status: str | None = Field(default=None, max_length=16)  # the enhanced status: "5.1.1"
    diagnostic: str | None = Field(default=None, max_length=MAX_DIAGNOSTIC)
    recipient: str | None = Field(default=None, max_length=320)  # the address that failed
    # What was done: paused, counted, unsubscribed, ignored, unknown, tokenless, forged,
    # unreadable
    action: str = Field(max_length=16)
    # Where it was read, when that names it for good (an IMAP message: "imap:UIDVALIDITY:UID
    # @mailbox"): read again, it is not recorded twice.
    source: str | None = Field(default=None, max_length=256, unique=True, index=True)


class RelayRow(SQLModel, table=True):
    """One SMTP relay paperbell sends through ("host:port"): the row every process sending
    through it locks while it takes a place in its limits, and how long the relay asked it
    to slow down (a 421/451/454 answer) (migration 0011), and until when every process
    skips it as failing ([[email.servers]]: it could not be reached; migration 0012)."""

    __tablename__ = "relays"

    relay: str = Field(primary_key=True, max_length=255)
    checked_at: datetime | None = None  # the last reservation (written: it takes the lock)
    slow_until: datetime | None = None  # one message every slow_seconds until then
    slow_seconds: float | None = None
    failing_until: datetime | None = None
    failure: str | None = Field(default=None, max_length=500)


class RelaySendRow(SQLModel, table=True):
    """One message handed to a relay: the sliding windows of [email] max_per_second,
    max_per_hour and max_per_day count these (kept a day, migration 0011)."""

    __tablename__ = "relay_sends"
    __table_args__ = (Index("ix_relay_sends_relay_sent_at", "relay", "sent_at"),)

    id: int | None = Field(default=None, primary_key=True)
    relay: str = Field(max_length=255)
    sent_at: datetime


# Every table above: what the migrations (bot/store/migrations/) must give, and what Alembic
# compares a database with (tests/store/test_migrations.py, a new revision's autogenerate).
SCHEMA = SQLModel.metadata
