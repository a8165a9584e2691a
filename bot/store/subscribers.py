"""Subscribers: the config file's (mirrored, so deliveries can refer to them) and the
database's, with their rules, schedule settings, addresses and Slack places.

Read as `bot.core.models.Subscriber`; what callers need beyond it (whether a name is taken,
why a subscriber was paused) as a `SubscriberRecord`, never as a table row (the reads:
bot.store.subscriber_queries). The config file's subscribers are changed in the file: the
database's only here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.core.errors import AddressTaken, NameTaken, StoreError
from bot.core.models import Subscriber
from bot.store.bulk import (
    Added,
    NewSubscriber,
    check_labels,
    mirror_config,
    too_many_rules,
)
from bot.store.bulk import add_many as insert_people
from bot.store.database import failing_as
from bot.store.subscriber_queries import SubscriberQueries
from bot.store.tables import (
    BounceRow,
    DeliveryRow,
    DestinationRow,
    FeedbackRow,
    OutboxMessageRow,
    OutboxRow,
    RankingModelRow,
    RuleCountRow,
    RuleRow,
    SubscriberRow,
    TargetPauseRow,
    dump_list,
    refusals_forgotten,
    withdraw_queued,
)

SCHEDULE_SETTINGS = ("schedule", "day", "time", "timezone", "notify_empty")
# What a database subscriber may change about their digests (the manage page, the CLI).
SETTINGS = (
    *SCHEDULE_SETTINGS,
    "email_format",
    "abstracts",
    "long_emails",
    "max_papers",
    "summaries",
    "language",
    "similar_max",
    "similar_min",
)


class Keep(enum.Enum):
    """A value left as it is (`replace_rule`'s label)."""

    KEEP = "keep"


KEEP = Keep.KEEP


class RemovedRule(NamedTuple):
    """A rule removed (`remove_rule`): its text, and whether the subscriber stopped with
    it (it was their last)."""

    text: str
    stopped: bool


class Subscribers(SubscriberQueries):
    """The subscribers and their rules (`store.subscribers`): changed here, read as
    `SubscriberQueries` reads them."""

    def sync_config(self, subscribers: Sequence[Subscriber], *, now: datetime) -> None:
        """Mirror the config file's subscribers into the database so deliveries can refer to
        them. The file stays the truth for their settings; an unsubscribe stays in force.
        One transaction, a few queries however many there are (bot.store.bulk). One taken
        out of the file gets nothing more: the digests still queued for it are withdrawn
        (`withdraw_queued`), as a pause's are."""
        with self.database.session() as session:
            mirror_config(session, subscribers, now=now)
            _withdraw_undeclared(session, {sub.name for sub in subscribers}, now=now)
            session.commit()

    def add_many(
        self, people: Sequence[NewSubscriber], *, now: datetime, max_rules: int | None = None
    ) -> Added:
        """Add many database subscribers at once, in one transaction: those not stored yet,
        with their rules; a name stored already (from the config file or the database) is
        left as it is, and returned among `existing`. A name given twice, more than
        `max_rules` rules or two rules under one label is refused (a StoreError), and
        nothing is added."""
        with self.database.session() as session:
            try:
                added = insert_people(
                    session, people, now=now, settings=SETTINGS, max_rules=max_rules
                )
                session.commit()
            except IntegrityError:  # another process added one of them meanwhile
                raise StoreError(
                    "another process added some of these subscribers meanwhile: nothing was added",
                    hint="run it again: those stored by then are left as they are",
                ) from None
        return added

    def set_schedule(self, name: str, **settings: str | bool | int | float | None) -> None:
        """Change a database subscriber's settings (schedule, day, time, timezone,
        notify_empty, email_format, abstracts, long_emails, max_papers, summaries, language,
        similar_max, similar_min); None sets a schedule setting back to the config's
        default."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            for key, value in settings.items():
                if key not in SETTINGS:
                    raise ValueError(f"not a subscriber setting: {key}")
                setattr(row, key, value)
            session.add(row)
            session.commit()

    def mark_slots(self, slots: Mapping[int, str], notes: Mapping[int, str] | None = None) -> None:
        """Remember, per subscriber id, the last schedule slot the daemon handled, and why
        it sent nothing (`notes`; a subscriber absent from them was sent a digest)."""
        if not slots:
            return
        with self.database.session() as session:
            for subscriber_id, key in slots.items():
                row = session.get(SubscriberRow, subscriber_id)
                if row is not None:
                    row.last_slot = key
                    row.last_slot_note = (notes or {}).get(subscriber_id)
                    session.add(row)
            session.commit()

    def add(
        self,
        name: str,
        *,
        email: str | None,
        rules: Sequence[str],
        now: datetime,
        categories: Sequence[str] = (),
        max_papers: int | None = None,
        include: Iterable[str] | None = None,
        slack_channel: str | None = None,
        slack_user: str | None = None,
        apprise_env: str | None = None,
        email_confirmed: bool = True,
        max_rules: int | None = None,
        labels: Mapping[str, str] | None = None,
        only_new: bool = False,
        mailbox: Callable[[str], str] | None = None,
    ) -> tuple[Subscriber, bool]:
        """Create a subscriber, or add rules to an existing one (and reactivate it; given
        no rules, its settings change and an unsubscribe stays in force). Returns the
        subscriber and whether it was created. `only_new`: create it or change nothing
        (a NameTaken when the name is stored), as a sign-up must: another may have taken
        the name since it was picked, and theirs is not to be changed. Of two creating one
        name at once, the second gets a NameTaken too. An address learnt from Slack
        (`email_confirmed=False`) receives nothing until its owner confirms it. More than
        `max_rules` rules in all is refused (a StoreError), and nothing changes.
        `apprise_env` names the variable holding its Apprise URLs ("": none). `labels`
        (checked: `bot.core.checks.check_label`) label rules by their text, those it adds
        and those it has; two rules with one label are refused (a StoreError). `mailbox`
        (a sign-up's: what makes two addresses one mailbox): an address a database
        subscriber has already is refused (an AddressTaken); two sign-ups of one address
        at once take turns, and the second gets it."""
        labels = labels or {}

        with self.database.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            created = row is None
            if row is not None and only_new:
                raise NameTaken(f"the name {name!r} is taken")
            if row is None:
                row = SubscriberRow(
                    name=name,
                    email=email,
                    email_confirmed=email_confirmed,
                    origin="database",
                    created_at=now,
                )
            elif row.origin == "config":
                raise StoreError(
                    f"subscriber {name!r} is declared in the config file",
                    hint="change its rules in the config file",
                )
            if email is not None:
                # An address given again by someone who may (an admin's --email) confirms it;
                # a new one learnt from Slack waits for its owner. Either way it withdraws the
                # address that waited (`set_email`): that one's link confirms nothing now.
                same = email == row.email
                row.email, row.pending_email = email, None
                row.email_confirmed = email_confirmed or (same and row.email_confirmed)
            if slack_channel is not None:
                row.slack_channel = slack_channel
            if slack_user is not None:
                row.slack_user = slack_user
            if apprise_env is not None:  # "" clears it
                row.apprise_env = apprise_env or None
            if categories:
                row.categories = dump_list(categories)
            if max_papers is not None:
                row.max_papers = max_papers
            if include is not None:
                row.include = dump_list(sorted(set(include)))
            resumed = not created and bool(rules) and not row.active
            if created or rules:
                # Subscribed again: only with rules. A change of settings alone leaves an
                # unsubscribe in force (its owner's, maybe: one click on an email).
                row.active, row.paused_reason = True, None
            session.add(row)
            try:
                session.flush()
            except IntegrityError:
                if not created:
                    raise
                raise NameTaken(f"the name {name!r} was taken meanwhile") from None
            assert row.id is not None
            if created and mailbox is not None and email is not None:
                _address_free(session, row.id, email, mailbox)
            if resumed:  # as a resume: the count of refusals starts again
                session.execute(refusals_forgotten(row.id))
            have = {rule.text: rule for rule in self._rules_in_turn(session, row)}
            count = len(set(have) | set(rules))
            if max_rules is not None and count > max(max_rules, len(have)):
                raise too_many_rules(name, count, max_rules)
            for text in rules:
                label = labels.get(text)
                if text in have:
                    if label:
                        have[text].label = label
                        session.add(have[text])
                    continue
                have[text] = RuleRow(subscriber_id=row.id, text=text, label=label, created_at=now)
                session.add(have[text])
            _check_labels(name, have.values())
            session.commit()
            subscriber_id = row.id
        (subscriber,) = self.all(include_inactive=True, only=subscriber_id)
        return subscriber, created

    def remove_rule(self, name: str, number: int, *, last_pauses: bool = False) -> RemovedRule:
        """Delete the subscriber's rule number `number` (1-based, as `list` shows it). The
        last rule is refused, unless `last_pauses`: then the subscriber stops too (as
        found here: another change may have come since the caller read the rules)."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            if len(rules) == 1 and last_pauses:
                row.active = False
                session.add(row)
            elif len(rules) == 1:
                raise StoreError(
                    f"rule {number} is the last rule of {name!r}",
                    hint=f"to stop the digests, `paperbell unsubscribe {name}`",
                )
            text = rules[number - 1].text
            session.delete(rules[number - 1])
            session.commit()
            return RemovedRule(text, stopped=len(rules) == 1)

    def remove_rule_text(self, name: str, text: str) -> bool:
        """Delete the database subscriber's rule `text`, wherever it is in their list now: a
        page that showed it removes that rule, however the numbers moved since (a double
        click: the first removal moves the next rule into its place). False when it is gone
        already. The last rule is refused (a StoreError)."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            found = next((rule for rule in rules if rule.text == text), None)
            if found is None:
                return False
            if len(rules) == 1:
                raise StoreError(f"{text!r} is the last rule of {name!r}")
            # By its id, not as an object: a removal at the same moment may have taken it.
            session.execute(delete(RuleRow).where(col(RuleRow.id) == found.id))
            session.commit()
            return True

    def rule_texts(self, name: str) -> list[str]:
        """The rules of the subscriber `name` (none if there is no such subscriber)."""
        with self.database.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            return [] if row is None else [r.text for r in self._rules(session, row)]

    def add_rule(
        self,
        name: str,
        text: str,
        *,
        now: datetime,
        max_rules: int | None = None,
        label: str | None = None,
    ) -> bool:
        """Add a rule (with its `label`, checked) to a database subscriber; False when it
        has that rule already. A rule past `max_rules`, or a label another rule has, is
        refused (a StoreError)."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            if any(rule.text == text for rule in rules):
                return False
            count = len(rules) + 1
            if max_rules is not None and count > max_rules:
                raise too_many_rules(name, count, max_rules)
            assert row.id is not None
            new = RuleRow(subscriber_id=row.id, text=text, label=label or None, created_at=now)
            _check_labels(name, [*rules, new])
            session.add(new)
            session.commit()
            return True

    def replace_rule(
        self, name: str, number: int, text: str, *, label: str | Keep | None = KEEP
    ) -> str:
        """Change the text of rule `number` (1-based), and its label when `label` is given
        (None: no label); returns the text it had."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            if any(r.text == text for i, r in enumerate(rules) if i != number - 1):
                raise StoreError(f"{name!r} has that rule already")
            rule = rules[number - 1]
            old, rule.text = rule.text, text
            if not isinstance(label, Keep):
                rule.label = label or None
            _check_labels(name, rules)
            session.add(rule)
            session.commit()
            return old

    def replace_rule_text(
        self, name: str, was: str, text: str, *, label: str | Keep | None = KEEP
    ) -> bool:
        """Change the database subscriber's rule `was` into `text`, wherever it is in their
        list now (a page that showed it changes that rule, however the numbers moved
        since), and its label when `label` is given (None: no label). False when `was` is
        gone."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            rule = next((r for r in rules if r.text == was), None)
            if rule is None:
                return False
            if any(r.text == text for r in rules if r is not rule):
                raise StoreError(f"{name!r} has that rule already")
            rule.text = text
            if not isinstance(label, Keep):
                rule.label = label or None
            _check_labels(name, rules)
            session.add(rule)
            session.commit()
            return True

    def set_label(self, name: str, number: int, label: str | None) -> str:
        """Give rule `number` (1-based) of a database subscriber the label `label` (checked;
        None: none); returns the rule's text."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules_in_turn(session, row)
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            rule = rules[number - 1]
            rule.label = label or None
            _check_labels(name, rules)
            session.add(rule)
            session.commit()
            return rule.text

    def set_email(self, name: str, email: str | None, *, confirmed: bool) -> None:
        """Set a database subscriber's address; an unconfirmed one gets no mail until its
        owner opens the confirmation link (`confirm_email`). An unconfirmed one given while
        the address is confirmed waits beside it (`pending_email`): the confirmed address
        keeps the digests, so a typo stops nothing."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            if email == row.email and row.email_confirmed:
                row.pending_email = None  # back to the address that gets the digests
            elif email is not None and not confirmed and row.email and row.email_confirmed:
                row.pending_email = email
            elif email != row.email or confirmed:
                row.email, row.email_confirmed, row.pending_email = email, confirmed, None
            session.add(row)
            session.commit()

    def stop_email(self, name: str) -> None:
        """Stop a database subscriber's email digests, keeping the address (unconfirmed:
        only a new confirmation by its owner starts them again)."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name)
            row.email_confirmed = False
            session.add(row)
            session.commit()

    def confirm_email(self, subscriber_id: int, email: str) -> bool:
        """Mark the subscriber's address confirmed, if it is still `email`, or make the
        address waiting for confirmation (if it is `email`) theirs; False if neither."""
        with self.database.session() as session:
            row = session.get(SubscriberRow, subscriber_id)
            if row is None:
                return False
            if row.pending_email is not None and row.pending_email.lower() == email.lower():
                row.email, row.pending_email = row.pending_email, None
            elif row.email is None or row.email.lower() != email.lower():
                return False
            row.email_confirmed = True
            session.add(row)
            session.commit()
            return True

    def set_active(self, name: str, active: bool, *, now: datetime) -> bool:
        """Pause or resume a subscriber (config or database). False if unknown. A pause
        withdraws the digests still queued for them (`withdraw_queued`)."""
        with self.database.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            if row is None:
                return False
            row.active = active
            if active:
                row.paused_reason = None
                if row.id is not None:  # the count of refusals starts again
                    session.execute(refusals_forgotten(row.id))
            elif row.id is not None:
                withdraw_queued(session, row.id, f"not sent: {name} unsubscribed", now=now)
            session.add(row)
            session.commit()
            return True

    def pause(self, subscriber_id: int, reason: str, *, now: datetime) -> None:
        """Stop building digests for a subscriber, saying why (`status` shows it), and
        withdraw those still queued (`withdraw_queued`)."""
        with self.database.session() as session:
            row = session.get(SubscriberRow, subscriber_id)
            if row is not None:
                row.active, row.paused_reason = False, reason
                session.add(row)
                withdraw_queued(session, subscriber_id, f"not sent: {reason}", now=now)
                session.commit()

    def delete(self, name: str, *, config_gone: bool = False) -> None:
        """Remove a database subscriber with its rules, delivery history, outbox (digests
        sent and still queued: they go nowhere once the subscriber is gone), the bounces of
        its mail, verdicts on papers and fitted ranking model. `config_gone`: the config
        file declares `name` no more, so its stored subscriber may go too."""
        with self.database.session() as session:
            row = self._database_subscriber(session, name, config_gone=config_gone)
            # Messages and deliveries point at the outbox, and everything at the subscriber:
            # in that order, one flush each, so that a database that enforces foreign keys
            # accepts it.
            theirs = select(OutboxRow.id).where(OutboxRow.subscriber_id == row.id)
            session.execute(
                delete(OutboxMessageRow).where(col(OutboxMessageRow.outbox_id).in_(theirs))
            )
            for model in (
                RuleRow,
                DestinationRow,
                TargetPauseRow,
                DeliveryRow,
                RuleCountRow,
                BounceRow,
                OutboxRow,
                FeedbackRow,
                RankingModelRow,
            ):
                for item in session.exec(select(model).where(model.subscriber_id == row.id)):
                    session.delete(item)
                session.flush()
            session.delete(row)
            session.commit()

    def never_confirmed(self, before: datetime, *, notices: Collection[str]) -> list[str]:
        """The names of the database subscribers made before `before` whose address was
        never confirmed and who have no other way to a digest: no Slack, no destination,
        and nothing ever queued for them but `notices` (the confirmation mails). What a
        stranger's sign-ups on the page leave behind; one whose email stopped after
        digests (a complaint) is not among them."""
        queued = select(OutboxRow.id).where(
            OutboxRow.subscriber_id == SubscriberRow.id, col(OutboxRow.channel).not_in(notices)
        )
        given = select(DestinationRow.id).where(DestinationRow.subscriber_id == SubscriberRow.id)
        query = (
            select(SubscriberRow.name)
            .where(
                SubscriberRow.origin == "database",
                col(SubscriberRow.email_confirmed).is_(False),
                col(SubscriberRow.created_at) < before,
                col(SubscriberRow.slack_user).is_(None),
                col(SubscriberRow.slack_channel).is_(None),
                col(SubscriberRow.slack_webhook).is_(None),
                col(SubscriberRow.apprise_env).is_(None),
                ~queued.exists(),
                ~given.exists(),
            )
            .order_by(col(SubscriberRow.id))
        )
        with failing_as("read the unconfirmed sign-ups"), self.database.session() as session:
            return list(session.exec(query).all())

    @staticmethod
    def _rules(session: Session, row: SubscriberRow) -> list[RuleRow]:
        """A subscriber's rules, in the order `list` numbers them."""
        query = select(RuleRow).where(RuleRow.subscriber_id == row.id).order_by(col(RuleRow.id))
        return list(session.exec(query).all())

    @classmethod
    def _rules_in_turn(cls, session: Session, row: SubscriberRow) -> list[RuleRow]:
        """A subscriber's rules, read after taking their turn to change them, held until
        the transaction ends: a change at the same moment waits, then reads what this one
        left, so that two removals at once never both see a rule to spare, nor two
        additions or edits a place under the limit or a rule or label not there yet.
        PostgreSQL locks the subscriber's row; SQLite's first write takes its one write
        lock (a write that changes nothing)."""
        if session.get_bind().dialect.name == "postgresql":
            lock = select(SubscriberRow.id).where(SubscriberRow.id == row.id).with_for_update()
            session.exec(lock).one()
        else:
            session.execute(
                update(SubscriberRow)
                .where(col(SubscriberRow.id) == row.id)
                .values(active=SubscriberRow.active)
                .execution_options(synchronize_session=False)
            )
        return cls._rules(session, row)

    @staticmethod
    def _database_subscriber(
        session: Session, name: str, *, config_gone: bool = False
    ) -> SubscriberRow:
        row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
        if row is None:
            raise StoreError(f"no subscriber named {name!r}", hint="see `paperbell list`")
        if row.origin == "config" and not config_gone:
            raise StoreError(
                f"subscriber {name!r} is declared in the config file",
                hint="change it in the config file",
            )
        return row


# The PostgreSQL advisory lock sign-ups take turns on ("signup" as a number); the leader's
# (bot.store.leader) is another.
SIGNUP_KEY = 0x7369676E7570


def _address_free(
    session: Session, subscriber_id: int, email: str, mailbox: Callable[[str], str]
) -> None:
    """Refuse `email` for the subscriber just inserted when another database subscriber has
    its mailbox (an AddressTaken: the caller's transaction is rolled back). Checked under
    the sign-ups' turn, held until the transaction ends, so that of two sign-ups at once
    the second sees the first's subscriber: PostgreSQL takes an advisory lock; SQLite's
    one write lock is this transaction's already (its INSERT took it)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SIGNUP_KEY})
    wanted = mailbox(email)
    others = select(SubscriberRow.email).where(
        SubscriberRow.origin == "database",
        SubscriberRow.id != subscriber_id,
        col(SubscriberRow.email).is_not(None),
    )
    if any(mailbox(address) == wanted for address in session.exec(others) if address):
        raise AddressTaken("a subscriber has this address already")


def _withdraw_undeclared(session: Session, declared: Collection[str], *, now: datetime) -> None:
    """Withdraw the digests still queued for the config file's subscribers not `declared`
    (taken out of the file): one query when there are none."""
    queued = (
        select(SubscriberRow.id, SubscriberRow.name)
        .join(OutboxRow, col(OutboxRow.subscriber_id) == col(SubscriberRow.id))
        .where(SubscriberRow.origin == "config", OutboxRow.status == "pending")
        .distinct()
    )
    for subscriber_id, name in session.exec(queued).all():
        if name not in declared and subscriber_id is not None:
            why = f"not sent: {name} is in the config file no more"
            withdraw_queued(session, subscriber_id, why, now=now)


def _check_labels(name: str, rules: Iterable[RuleRow]) -> None:
    """Refuse two rules of one subscriber with one label (case aside)."""
    check_labels(name, [(rule.text, rule.label) for rule in rules])
