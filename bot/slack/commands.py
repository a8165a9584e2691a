"""The `/papers` slash command: plain logic, the text and the user in, a reply out.

Owns the subcommands (subscribe, list, remove, label, pause, resume, summaries, language,
try, digest, email, manage, like, dislike, unlike, likes, help) and the words of every
reply (those of like, dislike, unlike and likes are `bot.slack.verdicts`'; those of pause,
resume, summaries and language `bot.slack.settings`'); its syntax is `bot.slack.syntax`,
whose subscription a command reaches and who may change it `bot.slack.subscriptions`. Must
not speak HTTP or WebSocket: the web app (`POST /slack/commands`) and the Socket Mode
adapter are thin shells over `SlashCommands.handle`. Slack is reached only through the
injected `Directory` (who a user is, what a channel is) and `send_now` (deliver one
subscriber's digest). The store is asked in threads (`asyncio.to_thread`), never on the
event loop the web app and the daemon share.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.config import SlackConfig, subscriber_problems, too_many_rules
from bot.core.checks import MAX_LABEL_LENGTH, check_label
from bot.core.errors import PaperbellError, RuleError
from bot.core.models import Subscriber
from bot.core.plurals import plural
from bot.core.schedule import check_timezone
from bot.manage import Manager, reading_parts, under_free_name
from bot.match.digest import try_rule
from bot.pipeline.wiring import Parts
from bot.render.mrkdwn import as_code, as_text, escape_mrkdwn, link
from bot.render.tex import letters
from bot.rules import format_rule, parse_rule
from bot.slack.limits import PerUserLimit
from bot.slack.messages import CommandRequest, Directory, Reply, SendNow, SlackUser
from bot.slack.settings import SettingsCommands
from bot.slack.subscriptions import Subscriptions, Target
from bot.slack.syntax import rule_error, rule_text, split_label, split_words, usage
from bot.slack.verdicts import VerdictCommands
from bot.store import Store, SubscriberRecord

log = logging.getLogger(__name__)

TRY_DAYS = 7  # `try` looks at the papers of the last week stored
TRY_SHOWN = 10
TRIES_PER_MINUTE = 6  # `try` matches a week of papers: at most this many a minute per user
# `email ADDRESS` mails a stranger's address: at most this many confirmations a day per user.
EMAIL_LINKS_PER_DAY = 3
FAILED = ("failed", "retry", "skipped", "unrecorded")
# Subcommands that may take longer than Slack's 3 seconds: answered at once, then at
# response_url.
SLOW = frozenset({"digest", "try", "email"})


@dataclass
class SlashCommands:
    """The command handler. `send_now(name)` delivers a subscriber's digest now."""

    slack: SlackConfig  # [slack]: the command's name, the channel managers
    parts: Parts  # the store, the config file's subscribers, the text model
    directory: Directory
    send_now: SendNow
    clock: Callable[[], datetime]
    max_rules: int  # [digest] max_rules: a subscriber's rules at most
    # The pages behind the signed links (email confirmation, manage), when [web] has them;
    # `mail_queued()` sends the mail they queue.
    manager: Manager | None = None
    mail_queued: Callable[[], Awaitable[None]] | None = None
    _tries: PerUserLimit = field(
        default_factory=lambda: PerUserLimit(TRIES_PER_MINUTE, timedelta(minutes=1)), repr=False
    )
    _email_links: PerUserLimit = field(
        default_factory=lambda: PerUserLimit(EMAIL_LINKS_PER_DAY, timedelta(days=1)), repr=False
    )
    subscriptions: Subscriptions = field(init=False, repr=False)
    verdicts: VerdictCommands = field(init=False, repr=False)
    settings: SettingsCommands = field(init=False, repr=False)

    def __post_init__(self) -> None:
        managers = frozenset(self.slack.channel_managers)
        self.subscriptions = Subscriptions(self.parts, self.directory, self.command, managers)
        self.verdicts = VerdictCommands(self.store, self.subscriptions, self.command, self.clock)
        self.settings = SettingsCommands(self.parts, self.subscriptions, self.command, self.clock)

    @property
    def command(self) -> str:
        return self.slack.command

    @property
    def store(self) -> Store:
        return self.parts.store

    def is_slow(self, request: CommandRequest) -> bool:
        """Whether the command may outlast Slack's 3 seconds (answer first, work after)."""
        words = request.text.split(None, 1)
        return bool(words) and words[0].lower() in SLOW

    async def handle(self, request: CommandRequest) -> Reply:
        """Answer one command. Every error becomes a reply that says what to do."""
        words = split_words(request.text)
        verb, rest = (words[0].lower(), words[1:]) if words else ("help", [])
        handler = {
            "subscribe": self._subscribe,
            "sub": self._subscribe,
            "list": self._list,
            "ls": self._list,
            "remove": self._remove,
            "rm": self._remove,
            "unsubscribe": self._remove,
            "label": self._label,
            "pause": self.settings.pause,
            "resume": self.settings.resume,
            "summaries": self.settings.summaries,
            "language": self.settings.language,
            "try": self._try,
            "digest": self._digest,
            "email": self._email,
            "manage": self._manage,
            "like": self.verdicts.like,
            "dislike": self.verdicts.dislike,
            "unlike": self.verdicts.unlike,
            "likes": self.verdicts.likes,
            "help": self._help,
        }.get(verb)
        if handler is None:
            return Reply(f":warning: I do not know `{escape_mrkdwn(verb)}`.\n{usage(self.command)}")
        try:
            return await handler(request, rest)
        except PaperbellError as exc:
            log.warning("%s %s: %s", self.command, verb, exc)
            return Reply(f":warning: {escape_mrkdwn(str(exc))}")

    # -- subcommands ------------------------------------------------------------------------

    async def _help(self, request: CommandRequest, args: list[str]) -> Reply:
        return Reply(usage(self.command, full=True))

    async def _subscribe(self, request: CommandRequest, args: list[str]) -> Reply:
        target, args = await self.subscriptions.target(request, args, manage=True)
        if not args:
            return Reply(f':warning: Give a rule: `{self.command} subscribe "diffusion policy"`')
        text, typed_label = split_label(rule_text(args))
        try:
            rule = parse_rule(text)
        except RuleError as exc:
            return Reply(rule_error(exc))
        label = None
        if typed_label is not None:
            try:
                label = check_label(typed_label)
            except ValueError as exc:
                return Reply(self._label_problem(exc, target))
        now = self.clock()
        if target.channel is not None:
            row = await asyncio.to_thread(
                self.store.subscribers.by_slack, channel=target.channel.keys
            )
            sub, _, rule_text_ = await self._add(
                row,
                f"channel.{target.channel.name}",
                rule.text,
                label,
                now=now,
                email=None,
                slack_channel=target.channel.id,
            )
            where = f"<#{target.channel.id}>"
            heads_up = (
                ""
                if target.channel.is_member
                else f"\n:point_right: Invite me to {where} first: `/invite @paperbell`"
            )
            return Reply(
                f"<@{request.user_id}> subscribed {where} to {_rule(rule_text_, label)}. "
                f"{self._when(sub)}{heads_up}",
                public=True,
            )
        row = await asyncio.to_thread(self.store.subscribers.by_slack, user=request.user_id)
        user = await self.directory.user(request.user_id) if row is None else None
        sub, created, rule_text_ = await self._add(
            row,
            f"slack.{_handle(request, user)}",
            rule.text,
            label,
            now=now,
            email=user.email if user else None,
            slack_user=request.user_id,
            email_confirmed=False,
        )
        if created and user is not None and user.tz and _known_zone(user.tz):
            name = sub.name
            await asyncio.to_thread(self.store.subscribers.set_schedule, name, timezone=user.tz)
            fresh = await asyncio.to_thread(self.subscriptions.subscriber, name)
            sub = fresh or sub
        first = "Welcome! " if created else ""
        return Reply(
            f"{first}Subscribed to {_rule(rule_text_, label)} "
            f"(you have {plural(len(sub.rules), 'rule')}). "
            f"{self._when(sub)}\nSee what it would have found: `{self.command} try "
            f"{escape_mrkdwn(rule.text)}`"
        )

    async def _list(self, request: CommandRequest, args: list[str]) -> Reply:
        target, _ = await self.subscriptions.target(request, args, manage=False)
        sub = await self.subscriptions.find(request, target)
        whose = f"<#{target.channel.id}>" if target.channel else "You"
        if sub is None or not sub.rules:
            return Reply(
                f"{whose} {'has' if target.channel else 'have'} no subscription yet: "
                f"`{self.command} subscribe{target.suffix} "
                '"your topic"`'
            )
        lines = [
            f"{number}. {_rule(text, sub.label_of(text), both=True)}"
            for number, text in enumerate(sub.rules, 1)
        ]
        state = "" if sub.active else " *(paused)*"
        origin = "\n_Set in the config file: ask your paperbell admin to change it._"
        reading = reading_parts(sub)
        extra = f" With {', '.join(reading)}." if reading else ""
        return Reply(
            f"{whose}{state}: {self._when(sub)}{extra}\n"
            + "\n".join(lines)
            + (origin if sub.origin == "config" else "")
        )

    async def _remove(self, request: CommandRequest, args: list[str]) -> Reply:
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target)
        if len(args) != 1 or not _is_number(args[0]):
            return Reply(
                f":warning: Say which rule: `{self.command} remove 2` "
                f"(`{self.command} list` numbers them)"
            )
        number = int(args[0])
        removed = await asyncio.to_thread(
            self.store.subscribers.remove_rule, sub.name, number, last_pauses=True
        )
        stopped = (
            f" That was the last rule: the digests stop until you `{self.command} subscribe"
            f"{target.suffix}` again."
            if removed.stopped
            else ""
        )
        return Reply(
            f"Removed rule {number}, {as_code(removed.text)}.{stopped}",
            public=target.channel is not None,
        )

    async def _label(self, request: CommandRequest, args: list[str]) -> Reply:
        """`label [#channel] N LABEL|off`: the name the digests show in place of rule N."""
        target, args = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target)
        words = args[0].split(None, 1) if args else []
        if len(words) != 2 or not _is_number(words[0]):
            return Reply(
                f":warning: Say which rule and its label: `{self.command} label{target.suffix} 2 "
                f"multi-agent RL` (`{self.command} list` numbers them; `off` takes it away)"
            )
        number, typed = int(words[0]), words[1].strip()
        if typed.lower() in ("off", "none"):
            text = await asyncio.to_thread(self.store.subscribers.set_label, sub.name, number, None)
            return Reply(
                f"Rule {number}, {as_code(text)}, is shown in words again.",
                public=target.channel is not None,
            )
        if len(typed) >= 2 and typed[0] == typed[-1] == '"':
            typed = typed[1:-1]
        try:
            label = check_label(typed)
        except ValueError as exc:
            return Reply(self._label_problem(exc, target))
        text = await asyncio.to_thread(self.store.subscribers.set_label, sub.name, number, label)
        return Reply(
            f"Rule {number}, {as_code(text)}, is now shown as *{as_text(label)}*.",
            public=target.channel is not None,
        )

    async def _try(self, request: CommandRequest, args: list[str]) -> Reply:
        if not args:
            return Reply(f':warning: Give a rule: `{self.command} try "diffusion policy"`')
        text, label = split_label(rule_text(args))  # a label changes nothing here
        try:
            rule = parse_rule(text)
        except RuleError as exc:
            return Reply(rule_error(exc))
        if not self._tries.take(request.user_id, self.clock()):
            return Reply(
                f":hourglass: You tried {TRIES_PER_MINUTE} rules in the last minute; each one "
                "reads a week of papers. Try again in a minute."
            )
        latest = await asyncio.to_thread(self.store.papers.latest_announcement)
        if latest is None:
            return Reply("No papers are stored yet: try again after the first poll.")
        first = latest - timedelta(days=TRY_DAYS - 1)
        papers = await asyncio.to_thread(self.store.papers.announced_since, first)
        trial = await asyncio.to_thread(try_rule, rule, papers)
        found = len(trial.items)
        head = (
            f"{as_code(rule.text)} matches {found} of the {plural(trial.papers, 'paper')} "
            f"announced {first:%-d %b} – {latest:%-d %b %Y}"
        )
        if not found:
            return Reply(head + ". Try fewer words, or OR between them.")
        lines = [
            f"• {link(item.paper.abs_url, letters(item.paper.title))}"
            for item in trial.items[:TRY_SHOWN]
        ]
        more = f"\n…and {found - TRY_SHOWN} more." if found > TRY_SHOWN else ""
        return Reply(
            head
            + ":\n"
            + "\n".join(lines)
            + more
            + f"\nLike it? `{self.command} subscribe {escape_mrkdwn(rule.text)}"
            + (f" as {escape_mrkdwn(label)}`" if label else "`")
        )

    async def _digest(self, request: CommandRequest, args: list[str]) -> Reply:
        target, _ = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target, allow_config=True)
        whose = f"<#{target.channel.id}>'s" if target.channel else "Your"
        if not sub.active:
            return Reply(
                f"{whose} digests are paused: `{self.command} resume{target.suffix}` first."
            )
        reports = await self.send_now(sub.name)
        slack = [r for r in reports if r.channel == "slack" and r.subscriber == sub.name]
        sent = sum(r.count for r in slack if r.status == "sent")
        problems = [r.error for r in slack if r.status in FAILED and r.error]
        if problems:
            return Reply(f":warning: The digest did not go out: {escape_mrkdwn(problems[0])}")
        if any(r.status == "queued-elsewhere" for r in slack):
            return Reply("That digest is already on its way.")
        # Not sent by this run, yet queued: a sender process has it (the scheduled run's, or
        # this one's, claimed first); its papers are no longer "new" to a digest built now.
        if not sent and (
            any(r.status == "queued" for r in slack) or await self._pending(sub, "slack")
        ):
            return Reply("That digest is already on its way.")
        if not sent:
            return Reply("Nothing new matched your rules since your last digest.")
        where = f"<#{target.channel.id}>" if target.channel else "your direct messages"
        return Reply(f"Sent {plural(sent, 'paper')} to {where}.")

    async def _email(self, request: CommandRequest, args: list[str]) -> Reply:
        """`email [ADDRESS|off]`: digests by email too, once the address is confirmed; a
        confirmed address keeps them until a new one is."""
        sub = await self.subscriptions.owned(request, Target())
        if self.manager is None:
            return Reply(
                ":warning: Email digests from Slack need paperbell's web pages (the address "
                "is confirmed there): ask your paperbell admin to set [web] public_url and "
                "secret_key_env."
            )
        if not self.manager.can_mail and not (args and args[0].lower() == "off"):
            return Reply(
                ":warning: paperbell has no [email] section, so it cannot mail the link that "
                "confirms an address: ask your paperbell admin to set one up."
            )
        if args and args[0].lower() == "off":
            await asyncio.to_thread(
                self.store.subscribers.set_email, sub.name, None, confirmed=False
            )
            return Reply("No more email digests; your Slack digests go on.")
        email = args[0].strip("<>").removeprefix("mailto:").split("|")[0] if args else None
        if email is None:
            user = await self.directory.user(request.user_id)
            email = user.email if user else None
        if not email:
            return Reply(f":warning: Give the address: `{self.command} email you@lab.example`")
        problems = subscriber_problems(name=sub.name, email=email, rules=["placeholder"])
        if problems:
            return Reply(f":warning: {escape_mrkdwn(problems[0].partition(': ')[2])}")
        if sub.email == email and sub.email_confirmed:
            if sub.pending_email:  # the address asked for since waits no more
                await asyncio.to_thread(
                    self.store.subscribers.set_email, sub.name, email, confirmed=False
                )
            return Reply(f"Your digests already come to {escape_mrkdwn(email)} too.")
        now = self.clock()
        if not self._email_links.take(request.user_id, now):
            return Reply(
                f":hourglass: You had {EMAIL_LINKS_PER_DAY} confirmation links mailed in the "
                "last day; that is the most a day. Try again in a day."
            )
        sent = await asyncio.to_thread(self.manager.ask_email, sub, email, origin="from Slack")
        if self.mail_queued is not None:
            await self.mail_queued()
        if not sent:
            self._email_links.give_back(request.user_id, now)  # nothing was mailed
            return Reply(
                f"A confirmation link went to {escape_mrkdwn(email)} today already: open it "
                "to start the email digests (look in the spam folder too)."
            )
        if sub.email and sub.email_confirmed:
            return Reply(
                f":email: I sent a link to {escape_mrkdwn(email)}. Your digests keep coming "
                f"to {escape_mrkdwn(sub.email)} until you open it and confirm the new address."
            )
        return Reply(
            f":email: I sent a link to {escape_mrkdwn(email)}. Open it to confirm the "
            "address; email digests start after that."
        )

    async def _manage(self, request: CommandRequest, args: list[str]) -> Reply:
        """`manage`: a private link to the web page for rules, schedule and format."""
        target, _ = await self.subscriptions.target(request, args, manage=True)
        sub = await self.subscriptions.owned(request, target, allow_config=True)
        if self.manager is None:
            return Reply(
                "The web pages are not set up here; use "
                f"`{self.command} list`, `subscribe`, `remove`, `pause` and `resume`."
            )
        days = int(self.manager.signer.max_age["manage"].total_seconds() // 86400)
        return Reply(
            f"Your settings page (a private link; it works for {plural(days, 'day')}, do not share "
            f"it): {self.manager.link('manage', sub)}"
        )

    # -- helpers ----------------------------------------------------------------------------

    async def _pending(self, sub: Subscriber, channel: str) -> bool:
        """Whether a digest of `sub`'s for `channel` is queued and not sent yet."""
        if sub.id is None:
            return False
        return await asyncio.to_thread(self.store.outbox.pending, sub.id, channel) > 0

    async def _add(
        self,
        row: SubscriberRecord | None,
        wanted: str,
        rule: str,
        label: str | None,
        *,
        now: datetime,
        **fields: Any,
    ) -> tuple[Subscriber, bool, str]:
        """Add `rule` to the subscription `row`, or to a new one named like `wanted`: the
        subscriber, whether it was created, and the rule's text (`_check_new`). A new one's
        name taken meanwhile (a sign-up, another subscribe) is picked again: theirs is never
        changed (`under_free_name`)."""

        def add(name: str, text: str) -> tuple[Subscriber, bool, str]:
            sub, created = self.store.subscribers.add(
                name,
                rules=[text],
                now=now,
                max_rules=self.max_rules,
                labels={text: label} if label else None,
                only_new=row is None,
                **fields,
            )
            return sub, created, text

        if row is not None:
            text = await self._check_new(row, rule, label)
            return await asyncio.to_thread(add, row.name, text)

        def add_new(name: str) -> tuple[Subscriber, bool, str]:
            self._check_rule(name, rule, label)
            return add(name, rule)

        return await asyncio.to_thread(
            under_free_name, self.parts, wanted, add_new, fallback="slack"
        )

    @staticmethod
    def _check_rule(name: str, rule: str, label: str | None) -> None:
        """Refuse (with a reply) a rule or label the subscription `name` may not have."""
        problems = subscriber_problems(
            name=name, email=None, rules=[rule], labels={rule: label} if label else None
        )
        if problems:
            raise PaperbellError("; ".join(problems))

    async def _check_new(self, row: SubscriberRecord, rule: str, label: str | None) -> str:
        """The text to store the rule under in the subscription `row`: the one it has for
        the same rule (given again with a label: relabelled), else `rule`; refused with a
        reply when the subscription is the config file's, the rule is there already (and
        no label is given), or it would be one rule too many."""
        if row.origin == "config":
            raise PaperbellError(
                "this subscription is set in paperbell's config file: ask your paperbell "
                "admin to add the rule there"
            )
        self._check_rule(row.name, rule, label)
        known = await asyncio.to_thread(self.subscriptions.subscriber, row.name)
        if known is None:
            return rule
        same = format_rule(parse_rule(rule))
        have = {format_rule(parse_rule(r)): r for r in known.rules}
        if same in have and known.active and label is None:
            raise PaperbellError("that rule is already in the subscription")
        if same in have:
            return have[same]
        count = len(known.rules) + 1
        if problem := too_many_rules(count, self.max_rules):
            raise PaperbellError(
                f"that would make {problem}. `{self.command} list` shows them, "
                f"`{self.command} remove N` removes one"
            )
        return rule

    def _label_problem(self, exc: ValueError, target: Target) -> str:
        return (
            f":warning: That label cannot be used: {escape_mrkdwn(str(exc))}. A label is a short "
            f"name (at most {MAX_LABEL_LENGTH} characters): `{self.command} subscribe"
            f"{target.suffix} RULE as multi-agent RL`"
        )

    def _when(self, sub: Subscriber) -> str:
        return f"Digests come {sub.schedule.describe()}."


def _rule(text: str, label: str | None, *, both: bool = False) -> str:
    """A rule in a reply: as code, with its label in bold (`both`: before it, as `list` shows
    both; else after it, as it was typed: `` `marl` as *multi-agent RL* ``)."""
    if label is None:
        return as_code(text)
    if both:
        return f"*{as_text(label)}*: {as_code(text)}"
    return f"{as_code(text)} as *{as_text(label)}*"


def _is_number(word: str) -> bool:
    """Whether `word` is a rule's number: ASCII digits only ("²".isdigit() is True, but
    int() refuses it)."""
    return word.isascii() and word.isdigit()


def _known_zone(name: str) -> bool:
    """Whether Slack's time zone for a user is one paperbell knows (else: the default)."""
    try:
        check_timezone(name)
    except ValueError:
        log.warning("ignoring the unknown time zone %r from Slack", name[:64])
        return False
    return True


def _handle(request: CommandRequest, user: SlackUser | None) -> str:
    if user is not None and user.name:
        return user.name
    return request.user_name or request.user_id
