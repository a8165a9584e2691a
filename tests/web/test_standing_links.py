"""The feed's and the archive's tokens (`LinkSigner.standing_token`, `read_standing`): the
same every time and short, never expiring, each good for its own purpose only; altered,
cut, another subscriber's, another address's and another key's fail; and no string makes
the reader raise."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.core.links import LinkSigner, TokenProblem, Visitor, max_ages, placeholder_url
from bot.core.models import Subscriber

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


def read(purpose: str, token: str, people: dict[int, Subscriber] = PEOPLE) -> object:
    return SIGNER.read_standing(purpose, token, owner=people.get)  # type: ignore[arg-type]


@pytest.mark.parametrize("purpose", ["feed", "archive"])
def test_a_token_names_its_subscriber_and_is_the_same_every_time(purpose: str) -> None:
    token = SIGNER.standing_token(purpose, ADA)  # type: ignore[arg-type]
    assert token == SIGNER.standing_token(purpose, ADA)  # type: ignore[arg-type]
    assert token.startswith("7.") and "/" not in token and len(token) < 60
    found = read(purpose, token)
    assert isinstance(found, Visitor) and found.belongs_to(ADA)


def test_the_urls() -> None:
    feed = SIGNER.feed_url(ADA)
    assert feed.startswith("https://papers.lab.example/feed/7.") and feed.endswith(".atom")
    archive = SIGNER.archive_url(ADA)
    assert archive.startswith("https://papers.lab.example/archive/7.")
    assert SIGNER.archive_url(ADA, "paperbell.abc") == archive + "/paperbell.abc"
    preview = placeholder_url(SIGNER.public_url, "feed")
    assert preview == "https://papers.lab.example/feed/UNSIGNED-PREVIEW-no-secret-key.atom"


def test_altered_cut_foreign_and_cross_purpose_tokens_fail() -> None:
    token = SIGNER.standing_token("feed", ADA)
    number, signature = token.split(".")
    ben = SIGNER.standing_token("feed", BEN)
    other_key = LinkSigner("t" * 40, SIGNER.public_url, max_age=SIGNER.max_age)
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        token[: len(token) // 2],
        f"8.{signature}",  # ada's signature, ben's id
        f"{number}.{ben.split('.')[1]}",  # ben's signature, ada's id
        SIGNER.standing_token("archive", ADA),  # the archive's token opens no feed
        other_key.standing_token("feed", ADA),
        f"{number}.",
        f"{number}",
        f"0{token}",  # the same number, written otherwise
    ]
    for candidate in forged:
        assert read("feed", candidate) in (TokenProblem("forged"), None), candidate
    # A new address, or a subscriber made again under the same id: the link is not theirs.
    assert read("feed", token, {7: replace(ADA, email="ada@elsewhere.example")}) == TokenProblem(
        "forged"
    )
    reborn = replace(ADA, created=datetime(2026, 1, 1, tzinfo=UTC))
    assert read("feed", token, {7: reborn}) == TokenProblem("forged")
    assert read("feed", token, {}) is None  # the subscriber is gone


def test_a_token_never_expires() -> None:
    token = SIGNER.standing_token("feed", ADA)
    # Nothing in the token says when it was made: no clock is asked.
    assert isinstance(read("feed", token), Visitor)


@settings(max_examples=400)
@given(
    st.one_of(
        st.text(),
        st.binary().map(lambda b: b.decode("latin-1")),
        st.from_regex(r"\d{1,14}\..*"),
    )
)
@example("7." + "A" * 10_000)
@example("\x00")
@example("7.\x00\ud800")
@example("99999999999999999999.abc")
@example("٣.abc")  # an Arabic-Indic digit: a digit to str.isdigit, not to us
def test_no_string_makes_the_reader_raise(token: str) -> None:
    for purpose in ("feed", "archive", "manage"):
        found = read(purpose, token)
        assert found is None or found == TokenProblem("forged") or isinstance(found, Visitor)
