"""The registry of channel kinds: a digest's `channel` ("email", "slack", "apprise:<key>")
names its kind (the part before ":"), and the kind names the class that does everything
that kind needs: `@register("kind")` on a `ChannelKind` subclass.

A kind owns, in its one module: the offline checks of its config keys (`config_problems`,
which `paperbell check-config` runs over the raw file, every problem at once), where a
subscriber's digests go on it (`targets`), rendering a digest for one target (`render`,
pure), and the sender (`sender`, whose `send_all` is the only I/O). Its settings come in
from the config (`bot.pipeline.wiring.channel_settings`), as a source's options do: a kind
never reads the config or the environment itself. Built-in kinds register the same way a
third-party one would. This module must not import any kind's module:
`bot.channels.load_builtin_channels` does that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from bot.channels.base import Channel, RenderContext, Rendered, Target
from bot.core.models import Digest, Subscriber

# What repeated refusals (permanent failures in a row, [delivery] bounce_limit) pause: the
# subscriber (an address that bounces: sending on only hurts the sender's reputation), the
# one target that refuses (an Apprise service: the others and the email go on), or nothing
# (a Slack channel the bot left: its papers go to the next digest, the error in `status`).
Pauses = Literal["subscriber", "target"] | None


class ChannelKind:
    """Base of every channel kind. Subclasses set `kind` and implement what they take."""

    kind: ClassVar[str] = ""
    pauses: ClassVar[Pauses] = None
    # The file a digest of this kind is written to by `paperbell digest --out DIR`.
    file_suffix: ClassVar[str] = ".txt"

    @classmethod
    def config_problems(cls, raw: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
        """The problems of the raw config data for this kind (its section, its keys in
        each [[subscribers]]), each at its key (`subscribers[2].apprise[1]: ...`); checked
        offline, reported with every other problem of the file. `environ`: where the
        secrets the file names are read (the kind reads, never shows, them)."""
        return []

    @classmethod
    def targets(cls, subscriber: Subscriber, settings: Any) -> list[Target]:
        """Where the subscriber's digests go on this kind (`settings`: the kind's, None
        when the config sets none up)."""
        raise NotImplementedError

    @classmethod
    def render(cls, digest: Digest, target: Target, context: RenderContext) -> Rendered:
        """The digest as queued for `target` (pure: no I/O, no clock but `context.now`).
        Raises ValueError for a digest that cannot be rendered for it."""
        raise NotImplementedError

    @classmethod
    def sender(cls, settings: Any) -> Channel | None:
        """What sends this kind's queued digests; None when `settings` set up none."""
        return None


KindT = TypeVar("KindT", bound=type[ChannelKind])

CHANNEL_KINDS: dict[str, type[ChannelKind]] = {}


def register(kind: str) -> Callable[[KindT], KindT]:
    """Class decorator: make a `ChannelKind` subclass the channel kind `kind`."""

    def decorate(cls: KindT) -> KindT:
        if kind in CHANNEL_KINDS and CHANNEL_KINDS[kind] is not cls:
            raise ValueError(f"channel kind {kind!r} is already registered")
        if not kind.isidentifier() or ":" in kind:
            raise ValueError(f"channel kind {kind!r}: use letters, digits and '_'")
        cls.kind = kind
        CHANNEL_KINDS[kind] = cls
        return cls

    return decorate


def kind_of(channel: str) -> str:
    """The kind of a digest's channel: "apprise" for "apprise:1a2b3c4d5e6f"."""
    return channel.partition(":")[0]


def channel_kind(channel: str) -> type[ChannelKind] | None:
    """The registered kind of a digest's channel, if any."""
    return CHANNEL_KINDS.get(kind_of(channel))


def subscriber_targets(subscriber: Subscriber, settings: Mapping[str, Any]) -> list[Target]:
    """Everywhere the subscriber's digests go, kind by kind in the order the kinds were
    registered (email, Slack, Apprise ...); `settings`: each kind's, by kind."""
    found: list[Target] = []
    for kind, cls in CHANNEL_KINDS.items():
        found += cls.targets(subscriber, settings.get(kind))
    return found


def where(targets: Sequence[Target]) -> str | None:
    """Where digests go, for people to read: the targets' labels (None: nowhere)."""
    return ", ".join(t.label for t in targets) or None
