"""What every channel kind shares: the sender's interface (`Channel`, `SendOutcome`), where a
subscriber's digests go (`Target`), a digest rendered for one target (`Rendered`) and what a
renderer is handed besides the digest (`RenderContext`).

A channel gets a batch of (item, message) pairs and a callback; an item is whatever the
caller tracks a message by (a `Digest`, an outbox record). It calls `on_sent(item)` right
after the far end accepted a message, so the caller records the delivery then and only
then; a failure for one recipient is reported in its outcome and the batch goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bot.core.models import Digest, Subscriber

OnSent = Callable[[Any], Awaitable[None] | None]
# A digest sent as several messages reports how far it got (JSON the channel reads back).
OnProgress = Callable[[Any, str], None]
ShouldStop = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What happened to one item of a batch."""

    item: Any  # as the caller passed it
    ok: bool
    error: str | None = None
    permanent: bool = False  # a retry will not help (unknown mailbox ...)
    where: str | None = None  # e.g. the file written
    # A failed digest sent in part (Slack: the summary and some thread messages): the
    # papers ("id@version") that did reach the far end, recorded as delivered.
    sent_papers: tuple[str, ...] = ()
    # Not sent, and not a failure: left queued until then (a relay's limits leave no room
    # yet, or it answered "slow down"); no attempt is counted.
    retry_at: datetime | None = None
    # A failure after the message went: the far end may have taken it (the connection
    # broke, or no answer came); so it is sent nowhere else at once, only at its retry.
    maybe_sent: bool = False


class Channel(Protocol):
    name: str

    def load(self, payload: bytes, progress: str | None = None) -> Any:
        """The message as it was queued (`payload`), resumed where `progress` says."""
        ...

    async def send_all(
        self,
        batch: Sequence[tuple[Any, Any]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Send each message; before each, stop if `should_stop()` (the items not tried
        get no outcome)."""
        ...


async def notify(on_sent: OnSent, item: Any) -> None:
    """Call a sync or async on_sent callback."""
    result = on_sent(item)
    if result is not None:
        await result


def failed(
    item: Any, error: str, permanent: bool = False, *, sent_papers: tuple[str, ...] = ()
) -> SendOutcome:
    """The outcome of a message that did not get through (or only in part: `sent_papers`)."""
    return SendOutcome(
        item=item, ok=False, error=error, permanent=permanent, sent_papers=sent_papers
    )


def describe(exc: BaseException) -> str:
    """An exception as a short text: its message, or its type when it has none."""
    text = str(exc).strip()
    return text or type(exc).__name__


@dataclass(frozen=True, slots=True)
class Target:
    """One place a subscriber's digests go: what its outbox records and delivery history are
    kept under (`channel`: "email", "slack", or a kind and a key, "apprise:1a2b3c4d5e6f"),
    the address its queued digests carry (`recipient`: never a secret; a secret is named,
    as a Slack webhook's variable is, and looked up when sending), and how people see it
    (`label`). `problem`: why no digest can go there now (a URL Apprise cannot read), said
    in the run's report. `shape` is the kind's own, for its renderer (an Apprise service's
    message limits and format)."""

    channel: str
    recipient: str
    label: str
    problem: str | None = None
    shape: Any = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        """The channel kind ("apprise" for "apprise:1a2b3c4d5e6f")."""
        return self.channel.partition(":")[0]


@dataclass(frozen=True, slots=True)
class Rendered:
    """A digest rendered for one target: the digest it shows (an email may hold fewer
    papers than its digest) and the bytes queued for it; a digest sent as numbered
    emails: this is the first, and `more` the others, each queued as its own message."""

    digest: Digest
    payload: bytes
    more: tuple[Rendered, ...] = ()


@dataclass(frozen=True)
class RenderContext:
    """What a renderer is handed besides the digest, made by the pipeline from the config:
    the time, each kind's render settings (the email's sender and list id, by kind), the
    subscriber's signed links (manage, unsubscribe, a paper's 👍 / 👎, for these paper
    ids, the archive's page of the digest of this id, the feed; None: none), and the
    👍 / 👎 buttons' signed values of a digest's papers."""

    now: datetime
    settings: Mapping[str, Any] = field(default_factory=dict)
    links: Callable[[Subscriber, Sequence[str], str | None], Any] = lambda _s, _p, _d: None
    votes: Callable[[Digest], Mapping[str, Any]] = lambda _digest: {}
