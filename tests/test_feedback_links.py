"""The 👍 / 👎 links' tokens (`LinkSigner.feedback_token`, `read_feedback`): what they name,
that they are short, and that nothing else passes: altered, cut, another subscriber's,
another address's, another key's, expired; and no string makes the reader raise."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.links import MAX_FEEDBACK_KEY, LinkSigner, TokenProblem, Visitor, max_ages
from bot.core.models import Subscriber

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SIGNER = LinkSigner(
    "s" * 40,
    "https://papers.lab.example",
    max_age=max_ages(manage_days=60, unsubscribe_days=365, confirm_days=7),
)
ADA = Subscriber(
    name="ada", email="ada@lab.example", rules=["x"], id=7, created=datetime(2025, 1, 1, tzinfo=UTC)
)
BEN = replace(ADA, name="ben", email="ben@lab.example", id=8)
PEOPLE = {7: ADA, 8: BEN}


def read(token: str, *, now: datetime = NOW, people: dict[int, Subscriber] = PEOPLE) -> object:
    return SIGNER.read_feedback(token, now=now, owner=people.get)


@pytest.mark.parametrize("key", ["2411.18179", "quant-ph/0201082", "doi:10.1101/2024.01.01.5"])
@pytest.mark.parametrize("verdict", ["like", "dislike"])
def test_a_token_names_its_subscriber_paper_and_verdict(key: str, verdict: str) -> None:
    token = SIGNER.feedback_token(ADA, key, verdict, now=NOW)  # type: ignore[arg-type]
    assert token is not None and "/" not in token
    found = read(token)
    assert isinstance(found, Visitor) and found.belongs_to(ADA)
    assert (found.subscriber_id, found.paper, found.verdict, found.made) == (7, key, verdict, NOW)


def test_a_link_is_short() -> None:
    url = SIGNER.feedback_url(replace(ADA, id=123_456), "2411.18179", "dislike", now=NOW)
    assert url is not None and len(url) <= len("https://papers.lab.example/feedback/") + 50


def test_altered_cut_and_foreign_tokens_fail() -> None:
    token = SIGNER.feedback_token(ADA, "2411.18179", "like", now=NOW)
    assert token is not None
    body, stamp, signature = token.split(".")
    dislike = SIGNER.feedback_token(ADA, "2411.18179", "dislike", now=NOW)
    ben = SIGNER.feedback_token(BEN, "2411.18179", "like", now=NOW)
    assert dislike and ben
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        token[: len(token) // 2],
        f"{ben.split('.')[0]}.{stamp}.{signature}",  # ben's body, ada's signature
        f"{dislike.split('.')[0]}.{stamp}.{signature}",  # the other verdict
        f"{body}.{stamp}.{signature}.x",
        "",
        "feedback",
    ]
    for bad in forged:
        found = read(bad)
        assert isinstance(found, TokenProblem) and found.reason == "forged", bad
    # Another address (or a new subscriber given ada's id): no longer hers.
    moved = {7: replace(ADA, email="ada@elsewhere.example")}
    assert isinstance(read(token, people=moved), TokenProblem)
    assert read(token, people={}) is None  # a subscriber not stored (gone): cannot check
    other = LinkSigner("t" * 40, SIGNER.public_url, max_age=SIGNER.max_age)
    foreign = other.feedback_token(ADA, "2411.18179", "like", now=NOW)
    assert foreign and isinstance(read(foreign), TokenProblem)
    # A manage token is no feedback token, and a feedback token opens no page but its own.
    assert isinstance(read(SIGNER.token("manage", ADA, now=NOW)), TokenProblem)
    assert isinstance(SIGNER.read("manage", token, now=NOW), TokenProblem)


def test_tokens_expire_after_two_years_and_say_whose_they_were() -> None:
    token = SIGNER.feedback_token(ADA, "2411.18179", "like", now=NOW)
    assert token is not None
    assert isinstance(read(token, now=NOW + timedelta(days=729)), Visitor)
    found = read(token, now=NOW + timedelta(days=731))
    assert isinstance(found, TokenProblem) and found.reason == "expired"
    assert found.visitor is not None and found.visitor.belongs_to(ADA)


def test_a_key_too_long_gets_no_link() -> None:
    assert SIGNER.feedback_token(ADA, "u" * (MAX_FEEDBACK_KEY + 1), "like", now=NOW) is None
    with pytest.raises(ValueError, match="verdict"):
        SIGNER.feedback_token(ADA, "2411.18179", "meh", now=NOW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names a paper"):
        SIGNER.token("feedback", ADA, now=NOW)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=600) | st.binary(max_size=400).map(lambda b: b.hex()))
def test_no_string_makes_the_reader_raise(token: str) -> None:
    found = read(token)
    assert found is None or isinstance(found, (TokenProblem, Visitor))
    if isinstance(found, Visitor):  # only a token this signer made passes
        assert (
            SIGNER.feedback_token(
                PEOPLE[found.subscriber_id],
                found.paper or "",
                found.verdict or "like",
                now=found.made,
            )
            == token
        )  # type: ignore[arg-type]
