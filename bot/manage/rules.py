"""A subscriber's rules on the manage page: a rule and its label checked as typed, added,
changed and removed, and what each rule matched lately. A part of `Manager` (its mixin),
apart as one concern: the store keeps the rules and counts their matches; this decides
what a typed rule may become.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Literal

from bot.config import subscriber_problems, too_many_rules
from bot.core.checks import check_label
from bot.core.errors import RuleError, StoreError
from bot.core.models import Paper, Subscriber
from bot.manage.choices import SiteChoices
from bot.rules import parse_rule
from bot.store import Store

__all__ = ["RuleActivity", "RuleProblem", "Rules"]

# What an edit of a rule changed or removed since its page was shown says.
STALE_RULE = (
    "That rule was changed or removed since the page was shown, so nothing was saved: "
    "here are your rules as they are now."
)


@dataclass(frozen=True)
class RuleProblem:
    """A rule that does not parse, with where (0-based) and the rule with a caret; or
    (`field` "label") a label that cannot be one. `text` and `label` are what was typed,
    to give back in the form."""

    message: str
    text: str
    position: int | None = None
    field: Literal["rule", "label"] = "rule"
    label: str = ""

    @property
    def column(self) -> int | None:
        return None if self.position is None else self.position + 1


@dataclass(frozen=True)
class RuleActivity:
    """What one rule matched among the papers of the last days (`first`..`last`)."""

    number: int
    text: str
    matched: int
    papers: int
    examples: tuple[Paper, ...] = field(default=())
    first: date | None = None
    last: date | None = None
    counted: datetime | None = None  # None: not counted yet
    label: str | None = None  # the name the digests show in place of the rule


class Rules:
    """The rules part of `Manager`."""

    choices: SiteChoices
    store: Store
    clock: Callable[[], datetime]

    def _editable(self, sub: Subscriber) -> None:  # pragma: no cover - Manager's
        raise NotImplementedError

    @staticmethod
    def check_rule(text: str) -> RuleProblem | None:
        """Whether a rule parses (and fits), with the problem at its position."""
        text = text.strip()
        if not text:
            return RuleProblem("the rule is empty", text)
        try:
            parse_rule(text)
        except RuleError as exc:
            return RuleProblem(exc.reason, exc.text, exc.position)
        problems = subscriber_problems(name="check", email=None, rules=[text])
        if problems:
            return RuleProblem(problems[0].partition(": ")[2] or problems[0], text)
        return None

    @staticmethod
    def check_label(
        sub: Subscriber, text: str, label: str, *, number: int = 0
    ) -> tuple[str | None, RuleProblem | None]:
        """A label typed beside a rule (of number `number`; 0: a new one), as kept (None:
        left blank), or its problem: not a label, or another rule's."""
        if not label.strip():
            return None, None
        try:
            kept = check_label(label)
        except ValueError as exc:
            return None, RuleProblem(str(exc), text.strip(), field="label", label=label)
        others = (r for n, r in enumerate(sub.rules, 1) if n != number)
        if any((sub.label_of(r) or "").casefold() == kept.casefold() for r in others):
            taken = f"another of your rules is labelled {kept!r}: give each its own label"
            return None, RuleProblem(taken, text.strip(), field="label", label=label)
        return kept, None

    def add_rule(self, sub: Subscriber, text: str, label: str = "") -> RuleProblem | None:
        """Add a rule with its label (blank: none); the problem, if any (then nothing
        changes)."""
        problem = self.check_rule(text)
        if problem is not None:
            return replace(problem, label=label)
        kept, problem = self.check_label(sub, text, label)
        if problem is not None:
            return problem
        self._editable(sub)
        text = text.strip()
        limit = self.choices.max_rules
        if text not in sub.rules and (too_many := too_many_rules(len(sub.rules) + 1, limit)):
            return RuleProblem(f"that would make {too_many}", text, label=label)
        if not self.store.subscribers.add_rule(
            sub.name, text, now=self.clock(), max_rules=limit, label=kept
        ):
            return RuleProblem("you have this rule already", text, label=label)
        return None

    @staticmethod
    def rule_now(sub: Subscriber, number: int, was: str | None) -> int | None:
        """The number the rule a page showed as `was` has now (None: it is gone); `number`
        when the form did not say. A page's numbers go stale: a double click, another tab
        or Slack removes a rule and the ones after it move up."""
        if was is None:
            return number
        return sub.rules.index(was) + 1 if was in sub.rules else None

    def edit_rule(
        self, sub: Subscriber, number: int, text: str, label: str = "", *, was: str | None = None
    ) -> RuleProblem | None:
        """Change rule `number` (the one the page showed as `was`) and its label (blank:
        none); the problem, if any (a StoreError when the rule is gone: the page is stale)."""
        problem = self.check_rule(text)
        if problem is not None:
            return replace(problem, label=label)
        self._editable(sub)
        found = self.rule_now(sub, number, was)
        if found is None:
            if text.strip() in sub.rules:  # the same change sent twice
                return None
            raise StoreError(STALE_RULE)
        number = found
        kept, problem = self.check_label(sub, text, label, number=number)
        if problem is not None:
            return problem
        try:
            if was is None:
                self.store.subscribers.replace_rule(sub.name, number, text.strip(), label=kept)
                return None
            # By its text: another removal since `sub` was read moved the numbers.
            if self.store.subscribers.replace_rule_text(sub.name, was, text.strip(), label=kept):
                return None
        except StoreError as exc:
            return RuleProblem(exc.message, text.strip(), label=label)
        if text.strip() in self.store.subscribers.rule_texts(sub.name):  # sent twice
            return None
        raise StoreError(STALE_RULE)

    def remove_rule(self, sub: Subscriber, number: int, *, was: str | None = None) -> str | None:
        """Remove rule `number` (the one the page showed as `was`: gone already, nothing
        more goes); the problem when it cannot go (the last one)."""
        self._editable(sub)
        found = self.rule_now(sub, number, was)
        if found is None:
            return None
        if len(sub.rules) <= 1:
            return "This is your last rule: to stop the digests, unsubscribe instead."
        try:
            if was is None:
                self.store.subscribers.remove_rule(sub.name, found)
            else:  # by its text: another removal since `sub` was read moved the numbers
                self.store.subscribers.remove_rule_text(sub.name, was)
        except StoreError as exc:
            return exc.message
        return None

    def activity(self, sub: Subscriber) -> list[RuleActivity]:
        """What each rule matched lately, as counted when the subscriber's digests were last
        built (`bot.pipeline.refresh_rule_counts`, at most once a day): read, never matched
        here, so a page costs a few small queries however many rules and papers there are.
        A rule not counted yet (added since) says so."""
        stored = self.store.rule_counts.get(sub.id) if sub.id is not None else {}
        counts = [stored.get(text) for text in sub.rules]
        wanted = [paper_id for count in counts if count for paper_id in count.examples]
        papers = self.store.papers.by_id(wanted) if wanted else {}
        found = []
        for number, (text, count) in enumerate(zip(sub.rules, counts, strict=True), 1):
            label = sub.label_of(text)
            if count is None:
                found.append(RuleActivity(number, text, 0, 0, label=label))
                continue
            examples = tuple(papers[i] for i in count.examples if i in papers)
            found.append(
                RuleActivity(
                    number,
                    text,
                    count.matched,
                    count.papers,
                    examples,
                    count.first,
                    count.last,
                    count.counted_at,
                    label,
                )
            )
        return found
