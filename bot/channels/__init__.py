"""Delivery channels: each moves rendered digests to people; `send_all` is the only I/O.

A channel gets a batch of (item, message) pairs and a callback; an item is whatever the
caller tracks a message by (a `Digest`, an outbox record). It calls `on_sent(item)` right
after the far end accepted a message, so the caller records the delivery then and only
then; a failure for one recipient is reported in its outcome and the batch goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
