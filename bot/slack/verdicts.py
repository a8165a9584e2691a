"""The `/papers` subcommands that give and take verdicts on papers: like, dislike, unlike
and likes (papers like these, `bot.similar`), for oneself or a channel one manages. Plain
logic as `bot.slack.commands` is (which hands them their words): text in, a reply out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.core.errors import PaperbellError
from bot.core.models import Subscriber, Verdict
from bot.core.plurals import plural
from bot.pipeline.likes import give_verdicts, paper_keys, verdict_lines
from bot.render.mrkdwn import escape_mrkdwn
from bot.slack.messages import CommandRequest, Reply
from bot.slack.subscriptions import Subscriptions, Target
from bot.store import Store

MAX_IDS = 20  # papers liked or disliked in one command
LIKES_SHOWN = 30  # verdicts `likes` lists (the latest)


@dataclass
class VerdictCommands:
    """like, dislike, unlike, likes: `command` is the slash command's name (for the replies
    that say what to type)."""

    store: Store
    subscriptions: Subscriptions
    command: str
    clock: Callable[[], datetime]

    async def like(self, request: CommandRequest, args: list[str]) -> Reply:
        """`like [#channel] ID…`: papers liked; digests add papers like them."""
        return await self._give(request, args, "like")

    async def dislike(self, request: CommandRequest, args: list[str]) -> Reply:
        """`dislike [#channel] ID…`: papers disliked; papers like them rank lower."""
        return await self._give(request, args, "dislike")

    async def _give(self, request: CommandRequest, args: list[str], verdict: Verdict) -> Reply:
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self._verdicts_of(request, target)
        ids = " ".join(args).split()
        if not ids:
            return Reply(
                f":warning: Give the papers: `{self.command} {verdict}{target.suffix} "
                "2411.18179` (arXiv ids, arXiv links or DOIs)"
            )
        keys, problems = paper_keys(ids[:MAX_IDS])
        if problems or len(ids) > MAX_IDS:
            lines = [escape_mrkdwn(p) for p in problems[:5]]
            if len(ids) > MAX_IDS:
                lines.append(f"at most {MAX_IDS} papers at once")
            return Reply(":warning: " + "\n".join(lines))
        assert sub.id is not None
        given = await give_verdicts(self.store, sub.id, keys, verdict, "slack", now=self.clock())
        shown = [f"• `{f.key}` {escape_mrkdwn(f.title)}".rstrip() for f in given.found]
        word = "Liked" if verdict == "like" else "Disliked"
        more = (
            "digests add papers like these"
            if verdict == "like"
            else "papers like these rank lower in digests"
        )
        return Reply(
            f"{word} {plural(len(given.found), 'paper')}: {more}.\n" + "\n".join(shown),
            public=target.channel is not None,
        )

    async def unlike(self, request: CommandRequest, args: list[str]) -> Reply:
        """`unlike [#channel] ID…`: the verdicts on these papers removed."""
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self._verdicts_of(request, target)
        keys, problems = paper_keys(" ".join(args).split()[:MAX_IDS])
        if problems or not keys:
            shown = [escape_mrkdwn(p) for p in problems[:5]]
            return Reply(
                ":warning: "
                + ("\n".join(shown) or f"Give the papers: `{self.command} unlike 2411.18179`")
            )
        assert sub.id is not None
        removed = await asyncio.to_thread(self._remove, sub.id, keys)
        missing = [key for key in keys if key not in removed]
        lines = []
        if removed:
            lines.append(f"Forgot {target.whose} verdict on {', '.join(removed)}.")
        if missing:
            lines.append(
                f"No verdict on {', '.join(missing)}: `{self.command} likes{target.suffix}` "
                "lists them."
            )
        return Reply("\n".join(lines), public=target.channel is not None and bool(removed))

    async def likes(self, request: CommandRequest, args: list[str]) -> Reply:
        """`likes [#channel]`: the papers liked and disliked, and where each came from."""
        target, args = await self.subscriptions.target(request, args, manage=False)
        sub = await self.subscriptions.owned(request, target, allow_config=True)
        assert sub.id is not None
        feedback = await asyncio.to_thread(self.store.feedback.of, sub.id)
        if not feedback:
            how = f"`{self.command} like{target.suffix} 2411.18179` adds one"
            if sub.origin == "config":  # `like` is refused for it: the file says
                how = "ask your paperbell admin to add them to its `like` list in the config file"
            return Reply(f"No papers liked or disliked yet: {how}.")
        liked = sum(1 for f in feedback if f.liked)
        lines = [f"{liked:,} liked, {len(feedback) - liked:,} disliked:"]
        lines += [f"• {escape_mrkdwn(line)}" for line in verdict_lines(feedback[-LIKES_SHOWN:])]
        if len(feedback) > LIKES_SHOWN:
            lines.append(f"_the latest {LIKES_SHOWN} shown_")
        return Reply("\n".join(lines))

    def _remove(self, subscriber_id: int, keys: list[str]) -> list[str]:
        """The keys of the verdicts removed (of those given)."""
        return [key for key in keys if self.store.feedback.remove(subscriber_id, key)]

    async def _verdicts_of(self, request: CommandRequest, target: Target) -> Subscriber:
        """The subscription whose verdicts a command changes: not one of the config file's."""
        sub = await self.subscriptions.owned(request, target, allow_config=True)
        if sub.origin == "config":
            raise PaperbellError(
                "this subscription is set in paperbell's config file: ask your paperbell "
                "admin to add the papers to its `like` or `dislike` list there"
            )
        return sub
