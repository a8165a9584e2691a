"""Acting on a bounce (bot.pipeline.bounces): a hard one pauses that subscriber's email, soft
ones pause it after `bounce_limit` in a row, a complaint stops it at once; an auto-reply,
a forged token, a bounce about no message paperbell sent change nothing for anyone. Real
parts: the database, DSNs in the format Postfix wrote on loopback (support.bounces)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.bounces import T0, digest, fixture, postfix_dsn, sent

from bot.core.verp import Verp
from bot.pipeline.bounces import BounceOutcome, handle_bounce
from bot.store import Store

pytestmark = pytest.mark.database

VERP = Verp("k" * 40, "bounces@papers.lab.example")


def bounce(
    store: Store,
    raw: bytes,
    *,
    limit: int = 3,
    verp: Verp | None = VERP,
    now: datetime = T0,
) -> BounceOutcome:
    return handle_bounce(raw, store=store, verp=verp, bounce_limit=limit, now=now)


def dsn_for(record: int, payload: bytes, address: str, **options: str) -> bytes:
    return postfix_dsn(payload, envelope_from=VERP.address(record), recipient=address, **options)


def email_pause(store: Store, name: str) -> str | None:
    found = store.subscribers.get(name)
    assert found is not None
    pause = store.targets.paused(found.id).get((found.id, "email"))
    return pause.reason if pause else None


def test_a_hard_bounce_pauses_that_subscribers_email_alone(store: Store) -> None:
    record, payload = sent(store, "ada")
    sent(store, "bob")
    done = bounce(store, dsn_for(record, payload, "ada@lab.example"))
    assert (done.action, done.kind, done.subscriber) == ("paused", "hard", "ada")
    assert email_pause(store, "ada") == "mailbox unknown (5.1.1)"
    assert email_pause(store, "bob") is None
    ada = store.subscribers.get("ada")
    assert ada is not None and ada.active and ada.email_confirmed  # only email stops
    [kept] = store.bounces.of(ada.id)
    assert (kept.kind, kept.status, kept.outbox_id, kept.action) == (
        "hard",
        "5.1.1",
        record,
        "paused",
    )


def test_a_bounce_after_the_pause_keeps_its_date(store: Store) -> None:
    """Digests sent before the pause bounce too, later: the pause says since when it is."""
    first, second = (sent(store, "ada", n) for n in (1, 2))
    assert bounce(store, dsn_for(*first, "ada@lab.example")).action == "paused"
    later = handle_bounce(
        dsn_for(*second, "ada@lab.example"),
        store=store,
        verp=VERP,
        bounce_limit=3,
        now=T0 + timedelta(days=2),
    )
    assert later.action == "counted" and "email paused since 3 Dec" in later.line
    ada = store.subscribers.get("ada")
    assert ada is not None
    assert store.targets.paused(ada.id)[(ada.id, "email")].paused_at == T0


def test_soft_bounces_pause_after_the_limit_in_a_row(store: Store) -> None:
    records = [sent(store, "ada", n) for n in range(1, 4)]
    template = {"template": "postfix-mailbox-full.eml"}
    actions = [
        bounce(store, dsn_for(r, p, "ada@lab.example", **template)).action for r, p in records
    ]
    assert actions == ["counted", "counted", "paused"]
    assert email_pause(store, "ada") == "3 digests in a row came back: mailbox full (4.2.2)"


def test_a_digest_that_went_through_breaks_the_run(store: Store) -> None:
    first, _second, third = (sent(store, "ada", n) for n in range(1, 4))
    template = {"template": "postfix-mailbox-full.eml"}
    for record, payload in (first, third):
        assert bounce(store, dsn_for(record, payload, "ada@lab.example", **template)).action == (
            "counted"
        )
    assert email_pause(store, "ada") is None


def test_a_complaint_stops_email_at_once(store: Store) -> None:
    record, _ = sent(store, "ada")
    raw = fixture("arf-02.eml").replace(
        b"Original-Mail-From: <shironeko@example.com>",
        f"Original-Mail-From: <{VERP.address(record)}>".encode(),
    )
    done = bounce(store, raw)
    assert (done.action, done.kind) == ("unsubscribed", "complaint")
    assert "spam" in (email_pause(store, "ada") or "")
    ada = store.subscribers.get("ada")
    assert ada is not None and not ada.email_confirmed and ada.active


def test_a_forged_token_changes_nothing(store: Store) -> None:
    record, payload = sent(store, "ada")
    genuine = VERP.address(record)
    forged = genuine.replace(VERP.signature(record), "a" * 16)
    raw = dsn_for(record, payload, "ada@lab.example").replace(genuine.encode(), forged.encode())
    done = bounce(store, raw)
    assert done.action == "forged" and done.subscriber is None
    assert email_pause(store, "ada") is None


def test_a_bounce_about_no_message_paperbell_sent_changes_nothing(store: Store) -> None:
    sent(store, "ada")
    for raw in (fixture(name) for name in ("exim-03.eml", "gmail-02.eml", "exchange-04.eml")):
        assert bounce(store, raw).action == "tokenless"
    # Signed with this site's key, but for a record that does not exist.
    assert bounce(store, dsn_for(999, digest("ada@lab.example", 9), "ada@lab.example")).action == (
        "unknown"
    )
    assert bounce(store, b"\x00garbage").action in ("tokenless", "unreadable")
    assert email_pause(store, "ada") is None
    day = store.bounces.day(T0.date())
    assert day.unmatched + day.tokenless == 5 and day.tokenless >= 3 and day.hard == 0


def test_an_auto_reply_is_ignored(store: Store) -> None:
    record, _ = sent(store, "ada")
    raw = fixture("rfc3834-01.eml").replace(
        b"X-Original-To: joe@example.com", f"X-Original-To: {VERP.address(record)}".encode()
    )
    done = bounce(store, raw)
    assert (done.action, done.kind, done.subscriber) == ("ignored", "auto-reply", "ada")
    assert email_pause(store, "ada") is None


def test_without_a_token_the_message_id_alone_acts_on_no_one(store: Store) -> None:
    """A bounce that lost its VERP address (forwarded, or bounce_address not set) is not
    tied by the Message-ID it quotes: anyone can compute a digest's id (issue 41;
    tests/test_bounce_tokens.py has the signed Message-IDs an operator may let act)."""
    _record, payload = sent(store, "ada")
    raw = postfix_dsn(
        payload, envelope_from="digest@papers.lab.example", recipient="ada@lab.example"
    )
    assert bounce(store, raw, verp=None).action == "tokenless"
    sent(store, "bob")
    other = postfix_dsn(
        digest("bob@lab.example", 1), envelope_from="x@y.example", recipient="eve@lab.example"
    )
    assert bounce(store, other, verp=None).action == "tokenless"
    assert email_pause(store, "bob") is None


def test_a_bounce_for_an_old_address_or_a_notice_pauses_nothing(store: Store) -> None:
    record, payload = sent(store, "ada")
    store.subscribers.set_email("ada", "ada@new.example", confirmed=True)
    assert bounce(store, dsn_for(record, payload, "ada@lab.example")).action == "ignored"
    notice, payload = sent(store, "bob", channel="notice")
    assert bounce(store, dsn_for(notice, payload, "bob@lab.example")).action == "counted"
    assert email_pause(store, "ada") is None and email_pause(store, "bob") is None


def test_soft_bounces_at_an_old_address_do_not_count_toward_the_new_one(store: Store) -> None:
    template = {"template": "postfix-mailbox-full.eml"}
    for record, payload in (sent(store, "ada", n) for n in (1, 2)):
        assert bounce(store, dsn_for(record, payload, "ada@lab.example", **template)).action == (
            "counted"
        )
    store.subscribers.set_email("ada", "ada@new.example", confirmed=True)
    record, payload = sent(store, "ada", 3)
    done = bounce(store, dsn_for(record, payload, "ada@new.example", **template))
    assert done.action == "counted" and "1 of 3 in a row" in done.line
    assert email_pause(store, "ada") is None


def test_a_resume_starts_the_count_again(store: Store) -> None:
    template = {"template": "postfix-mailbox-full.eml"}
    actions = [
        bounce(store, dsn_for(r, p, "ada@lab.example", **template)).action
        for r, p in (sent(store, "ada", n) for n in range(1, 4))
    ]
    assert actions == ["counted", "counted", "paused"]
    ada = store.subscribers.get("ada")
    assert ada is not None and store.targets.resume(ada.id, "email") == 1
    day_after = T0 + timedelta(days=1)
    record, payload = sent(store, "ada", 4, now=day_after)
    done = bounce(store, dsn_for(record, payload, "ada@lab.example", **template), now=day_after)
    assert done.action == "counted" and "1 of 3 in a row" in done.line
    assert email_pause(store, "ada") is None


def test_a_bounce_of_a_digest_sent_before_a_resume_pauses_nothing(store: Store) -> None:
    """A late (or repeated) bounce of a digest sent before the pause is old news once the
    email is resumed."""
    first, second = (sent(store, "ada", n) for n in (1, 2))
    assert bounce(store, dsn_for(*first, "ada@lab.example")).action == "paused"
    ada = store.subscribers.get("ada")
    assert ada is not None and store.targets.resume(ada.id, "email") == 1
    for late in (second, first):
        done = bounce(store, dsn_for(*late, "ada@lab.example"))
        assert done.action == "ignored" and "before their email was resumed" in done.line
    assert email_pause(store, "ada") is None
    day_after = T0 + timedelta(days=1)
    record, payload = sent(store, "ada", 3, now=day_after)
    done = bounce(store, dsn_for(record, payload, "ada@lab.example"), now=day_after)
    assert done.action == "paused"
