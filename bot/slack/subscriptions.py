"""Whose subscription a command is about (`Target`: the user's own, or a channel's named as
its first argument), found in the store, and whether the user may change it (a channel's:
workspace admins and the channel managers the config names; one set in the config file:
nobody from Slack).

Lookups and refusals only: every refusal is a `PaperbellError` whose message the user
reads. Changing a subscription is `bot.slack.commands`'. A subscription is found by the
user's or the channel's index and read alone (never everyone's rows), in a thread: the
event loop serves the other requests meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.core.errors import PaperbellError
from bot.core.models import Subscriber
from bot.pipeline.wiring import Parts
from bot.slack.messages import CommandRequest, Directory, SlackChannelInfo
from bot.slack.syntax import CHANNEL_RE


@dataclass(frozen=True, slots=True)
class Target:
    """A command's subject: a channel, or (no channel) the user who sent it."""

    channel: SlackChannelInfo | None = None
    word: str = ""  # how the user named it

    @property
    def suffix(self) -> str:
        """The channel as the user wrote it, to repeat in a command line ('' for oneself)."""
        return f" {self.word}" if self.channel is not None else ""

    @property
    def whose(self) -> str:
        """Whose digests a reply is about, inside a sentence: "your", or "<#C0123>'s"."""
        return f"<#{self.channel.id}>'s" if self.channel else "your"


@dataclass
class Subscriptions:
    """The subscriptions commands reach, and who may change them. `command` is the slash
    command's name, for the refusals that say what to type; `managers` are user ids that may
    change any channel's subscription besides the workspace admins."""

    parts: Parts
    directory: Directory
    command: str
    managers: frozenset[str]

    async def target(
        self, request: CommandRequest, args: list[str], *, manage: bool
    ) -> tuple[Target, list[str]]:
        """Whether the command is about a channel (its first word is one), and the rest."""
        match = CHANNEL_RE.match(args[0]) if args else None
        if match is None:
            return Target(), args
        channel_id = match.group("id")
        if channel_id is None:
            name = match.group("name")
            if name != request.channel_name or not request.channel_id:
                raise PaperbellError(
                    f"I cannot tell which channel #{name} is: pick it from the list Slack "
                    "offers as you type #, or run the command in that channel"
                )
            channel_id = request.channel_id
        info = await self.directory.channel(channel_id)
        if info is None:
            raise PaperbellError(
                "I cannot see that channel: for a private channel, invite me first "
                "(/invite @paperbell)"
            )
        if manage and not await self.may_manage(request.user_id):
            raise PaperbellError(
                f"Only workspace admins and the channel managers paperbell's admin named may "
                f"change #{info.name}'s subscription; you can subscribe yourself with "
                f"`{self.command} subscribe RULE`"
            )
        return Target(info, args[0]), args[1:]

    async def may_manage(self, user_id: str) -> bool:
        if user_id in self.managers:
            return True
        user = await self.directory.user(user_id)
        return user is not None and user.is_admin

    async def find(self, request: CommandRequest, target: Target) -> Subscriber | None:
        """The target's subscription, if any: one lookup by the user's or the channel's
        index, in a thread (never on the event loop)."""
        return await asyncio.to_thread(self._find, request.user_id, target)

    async def owned(
        self, request: CommandRequest, target: Target, *, allow_config: bool = False
    ) -> Subscriber:
        """The target's subscription, which the user may change (else a refusal)."""
        sub = await self.find(request, target)
        if sub is None:
            whose = f"<#{target.channel.id}> has" if target.channel else "You have"
            raise PaperbellError(f"{whose} no subscription: `{self.command} subscribe RULE`")
        if sub.origin == "config" and not allow_config:
            raise PaperbellError(
                "this subscription is set in paperbell's config file: ask your paperbell "
                "admin to change it"
            )
        return sub

    def subscriber(self, name: str) -> Subscriber | None:
        """The stored subscriber named `name` (config or database, active or not): one
        lookup by its name (blocking: from a coroutine, in a thread)."""
        row = self.parts.store.subscribers.get(name)
        return self.parts.stored(row) if row is not None else None

    def _find(self, user_id: str, target: Target) -> Subscriber | None:
        if target.channel is not None:
            row = self.parts.store.subscribers.by_slack(channel=target.channel.keys)
        else:
            row = self.parts.store.subscribers.by_slack(user=user_id)
        return self.parts.stored(row) if row is not None else None
