"""The `/papers` subcommands that change how a subscription's digests come, not what they
hold: pause, resume, summaries and language. Apart from `bot.slack.commands` (which sends
them their words) because they touch no rule. Plain logic: text in, a reply out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.config import subscriber_settings
from bot.manage import language_called
from bot.pipeline.wiring import Parts
from bot.render.mrkdwn import escape_mrkdwn
from bot.slack.messages import CommandRequest, Reply
from bot.slack.subscriptions import Subscriptions
from bot.store import Store


@dataclass
class SettingsCommands:
    """pause, resume, summaries, language: `parts` gives the store and whether a text model
    is set up; `command` is the slash command's name (for the replies that say what to type)."""

    parts: Parts
    subscriptions: Subscriptions
    command: str
    clock: Callable[[], datetime]

    @property
    def store(self) -> Store:
        return self.parts.store

    async def pause(self, request: CommandRequest, args: list[str]) -> Reply:
        return await self._set_active(request, args, active=False)

    async def resume(self, request: CommandRequest, args: list[str]) -> Reply:
        return await self._set_active(request, args, active=True)

    async def _set_active(self, request: CommandRequest, args: list[str], *, active: bool) -> Reply:
        target, _ = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target, allow_config=True)
        await asyncio.to_thread(
            self.store.subscribers.set_active, sub.name, active, now=self.clock()
        )
        whose = f"<#{target.channel.id}>'s" if target.channel else "Your"
        if active:
            return Reply(
                f"{whose} digests are back on. Digests come {sub.schedule.describe()}.",
                public=bool(target.channel),
            )
        return Reply(
            f"{whose} digests are paused. `{self.command} resume{target.suffix}` brings them back.",
            public=bool(target.channel),
        )

    async def summaries(self, request: CommandRequest, args: list[str]) -> Reply:
        """`summaries [#channel] on|off`: a short summary in place of each abstract."""
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target)
        wanted = args[0].strip().lower() if len(args) == 1 else ""
        if wanted not in ("on", "off"):
            return Reply(
                f"Summaries are {'on' if sub.summaries else 'off'}. `{self.command} summaries"
                f"{target.suffix} on` puts a short summary in place of each abstract; `off` "
                "shows the abstracts."
            )
        await asyncio.to_thread(
            self.store.subscribers.set_schedule, sub.name, summaries=wanted == "on"
        )
        whose = target.whose
        if wanted == "off":
            text = f"Summaries off: {whose} digests show each paper's abstract."
        else:
            text = (
                f"Summaries on: {whose} digests give a short summary in place of each abstract "
                "(the abstract is a click away)."
            )
            if self.parts.text_model is None:
                text += (
                    "\n_No model is set up here yet: the summaries are Hugging Face's where a "
                    "paper has one, else the abstract._"
                )
        return Reply(text, public=target.channel is not None)

    async def language(self, request: CommandRequest, args: list[str]) -> Reply:
        """`language [#channel] TAG|off`: each title and abstract also in that language."""
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target)
        whose = target.whose
        if not args or not args[0].strip():
            now = f"in {language_called(sub.language)} beside" if sub.language else "only in"
            return Reply(
                f"Digests come {now} English. `{self.command} language{target.suffix} zh` "
                "adds a translation (a language tag: zh, ja, de, pt-BR ...); `off`: English "
                "only."
            )
        settings, problems = subscriber_settings(sub.name, {"language": args[0]})
        if problems:
            problem = problems[0].partition(": ")[2] or problems[0]
            return Reply(
                f":warning: {escape_mrkdwn(problem)}. Give a language tag such as zh, ja, de "
                f"or pt-BR, or `{self.command} language{target.suffix} off` for English only."
            )
        language = settings["language"]
        await asyncio.to_thread(self.store.subscribers.set_schedule, sub.name, language=language)
        public = target.channel is not None
        if language is None:
            return Reply(f"From now on {whose} digests are in English only.", public=public)
        text = (
            f"From now on {whose} digests show each title and abstract in "
            f"{language_called(language)} beside the English."
        )
        if self.parts.text_model is None:
            text += (
                "\n_No model is set up here yet: until your paperbell admin adds one, the "
                "digests stay in English._"
            )
        return Reply(text, public=public)
