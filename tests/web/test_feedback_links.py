"""The 👍 / 👎 links' tokens, both kinds (`LinkSigner.feedback_token`, signed alone, as a
Slack button's; `LinkSigner.digest_votes`, an email's, sharing one signature), and
`read_feedback`: what they name, that they are short, and that nothing else passes:
altered, cut, another subscriber's, another address's, the other kind's, expired; a shared
token's paper and verdict may change (by design), its subscriber and time may not; tokens
made before the shared kind existed still pass; and no string makes the reader raise."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.core.links import (
    MAX_FEEDBACK_KEY,
    MAX_FEEDBACK_TOKEN,
    LinkSigner,
    TokenProblem,
    Visitor,
    max_ages,
)
from bot.core.models import Subscriber, Verdict

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


# Made by the code before the shared kind existed (main at 80c6acd, this SIGNER, ADA, NOW),
# pinned as they went out: links in sent emails must keep working until they expire.
SENT_BEFORE = {
    "NwpsCjI0MTEuMTgxNzk.aVt9kA.myQ19evgiONV04yE": ("2411.18179", "like"),
    "NwpkCmRvaToxMC4xMTAxLzIwMjQuMDEuMDEuNQ.aVt9kA.42cNw3J0s0s3lyz-": (
        "doi:10.1101/2024.01.01.5",
        "dislike",
    ),
}

Maker = Callable[[Subscriber, str, Verdict, datetime], "str | None"]


def alone(sub: Subscriber, key: str, verdict: Verdict, now: datetime) -> str | None:
    return SIGNER.feedback_token(sub, key, verdict, now=now)


def shared(sub: Subscriber, key: str, verdict: Verdict, now: datetime) -> str | None:
    return SIGNER.digest_votes(sub, now=now).token(key, verdict)


KINDS = pytest.mark.parametrize("make", [alone, shared], ids=["alone", "shared"])


def read(token: str, *, now: datetime = NOW, people: dict[int, Subscriber] = PEOPLE) -> object:
    return SIGNER.read_feedback(token, now=now, owner=people.get)


def text_of(token: str) -> str:
    body = token.partition(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def with_text(token: str, text: str | bytes) -> str:
    """The token with another body (its time and signature kept)."""
    raw = text.encode() if isinstance(text, str) else text
    body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return f"{body}.{token.partition('.')[2]}"


@KINDS
@pytest.mark.parametrize("key", ["2411.18179", "quant-ph/0201082", "doi:10.1101/2024.01.01.5"])
@pytest.mark.parametrize("verdict", ["like", "dislike"])
def test_a_token_names_its_subscriber_paper_and_verdict(
    make: Maker, key: str, verdict: Verdict
) -> None:
    token = make(ADA, key, verdict, NOW)
    assert token is not None and "/" not in token and len(token) <= MAX_FEEDBACK_TOKEN
    found = read(token)
    assert isinstance(found, Visitor) and found.belongs_to(ADA)
    assert (found.subscriber_id, found.paper, found.verdict, found.made) == (7, key, verdict, NOW)


@pytest.mark.parametrize("token", SENT_BEFORE)
def test_tokens_sent_before_the_shared_kind_still_pass(token: str) -> None:
    found = read(token, now=NOW + timedelta(days=700))
    assert isinstance(found, Visitor) and found.belongs_to(ADA) and not found.shared
    assert (found.paper, found.verdict, found.made) == (*SENT_BEFORE[token], NOW)
    # What is signed alone is still made the same way (a Slack button's value).
    assert SIGNER.feedback_token(ADA, *SENT_BEFORE[token], now=NOW) == token  # type: ignore[arg-type]


def test_a_link_is_short() -> None:
    votes = SIGNER.digest_votes(replace(ADA, id=123_456), now=NOW)
    url = votes.url("2411.18179", "dislike")
    assert url is not None and len(url) <= len("https://papers.lab.example/feedback/") + 50
    assert url.startswith("https://papers.lab.example/feedback/")


def test_a_digest_signs_once() -> None:
    """Every token of a digest ends with the same time and signature; only bodies differ."""
    votes = SIGNER.digest_votes(ADA, now=NOW)
    tokens = [votes.token(k, v) for k in ("2411.18179", "2411.00001") for v in ("like", "dislike")]
    assert all(tokens) and len(set(tokens)) == 4
    assert len({t.partition(".")[2] for t in tokens if t}) == 1


@KINDS
def test_altered_cut_and_foreign_tokens_fail(make: Maker) -> None:
    token = make(ADA, "2411.18179", "like", NOW)
    assert token is not None
    body, stamp, signature = token.split(".")
    ben = make(BEN, "2411.18179", "like", NOW)
    later = make(ADA, "2411.18179", "like", NOW + timedelta(seconds=1))
    assert ben and later
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        token[: len(token) // 2],
        f"{ben.split('.')[0]}.{stamp}.{signature}",  # ben's body, ada's signature
        f"{body}.{later.split('.')[1]}.{signature}",  # another time
        f"{body}.{stamp}.{signature}.x",
        f"{body}.{stamp}{signature}",
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
    foreign = other.digest_votes(ADA, now=NOW).token("2411.18179", "like")
    alien = other.feedback_token(ADA, "2411.18179", "like", now=NOW)
    assert foreign and alien
    assert isinstance(read(foreign), TokenProblem) and isinstance(read(alien), TokenProblem)
    # A manage token is no feedback token, and a feedback token opens no page but its own.
    assert isinstance(read(SIGNER.token("manage", ADA, now=NOW)), TokenProblem)
    assert isinstance(SIGNER.read("manage", token, now=NOW), TokenProblem)


def test_a_token_signed_alone_names_only_its_paper_and_verdict() -> None:
    token = alone(ADA, "2411.18179", "like", NOW)
    assert token is not None
    for text in ("7\nd\n2411.18179", "7\nl\n2411.18178", "7\nl\n2411.18179 "):
        found = read(with_text(token, text))
        assert isinstance(found, TokenProblem) and found.reason == "forged", text


def test_a_shared_token_names_any_paper_and_verdict_of_its_subscriber() -> None:
    """By design (bot.core.links): its paper and verdict are its word, which the reader
    says (`shared`: the pages take it only for a paper sent to its subscriber)."""
    token = shared(ADA, "2411.18179", "like", NOW)
    assert token is not None and text_of(token) == "7\n+\n2411.18179"
    for text, paper, verdict in [
        ("7\n-\n2411.18179", "2411.18179", "dislike"),
        ("7\n+\ndoi:10.1/other", "doi:10.1/other", "like"),
    ]:
        found = read(with_text(token, text))
        assert isinstance(found, Visitor) and found.belongs_to(ADA) and found.shared
        assert (found.paper, found.verdict, found.made) == (paper, verdict, NOW)
    refused = [
        "8\n+\n2411.18179",  # ben, under ada's signature
        "07\n+\n2411.18179",  # ada's id written otherwise
        "7\nx\n2411.18179",
        "7\nl\n2411.18179",  # its paper and verdict, as a token signed alone says them
        "7\n+\n",
        "7\n+\n" + "u" * (MAX_FEEDBACK_KEY + 1),
        "7\n+\n2411.18179\x00",
        "7\n+\n2411\n18179",
        "7\n+\n2411.\u202e18179",
        "+7\n+\n2411.18179",
    ]
    for text in refused:
        found = read(with_text(token, text))
        assert isinstance(found, TokenProblem) and found.reason == "forged", text
    assert isinstance(read(with_text(token, b"7\n+\n\xff\xfe")), TokenProblem)
    body, _, rest = token.partition(".")
    assert isinstance(read(f"{body[:3]}!{body[3:]}.{rest}"), TokenProblem)  # base64 skips "!"


def test_neither_kind_passes_for_the_other() -> None:
    signed_alone, signed_shared = (
        alone(ADA, "2411.18179", "like", NOW),
        shared(ADA, "2411.18179", "like", NOW),
    )
    assert signed_alone and signed_shared
    as_shared = with_text(signed_alone, text_of(signed_alone).replace("\nl\n", "\n+\n", 1))
    as_alone = with_text(signed_shared, text_of(signed_shared).replace("\n+\n", "\nl\n", 1))
    for token in (as_shared, as_alone):
        found = read(token)
        assert isinstance(found, TokenProblem) and found.reason == "forged", token
    # A shared signature, over the subscriber's id, is no standing link's (`ID.SIGNATURE`).
    assert isinstance(SIGNER.read_standing("feed", signed_shared, owner=PEOPLE.get), TokenProblem)


def test_a_key_a_token_cannot_carry_gets_no_link() -> None:
    votes = SIGNER.digest_votes(ADA, now=NOW)
    wide = "論" * MAX_FEEDBACK_KEY  # few enough characters, but 600 bytes
    for key in ("", "u" * (MAX_FEEDBACK_KEY + 1), wide, "2411.18179\n", "a\x00b"):
        assert votes.token(key, "like") is None and votes.url(key, "dislike") is None, key
    assert SIGNER.feedback_token(ADA, wide, "like", now=NOW) is None
    with pytest.raises(ValueError, match="verdict"):
        votes.token("2411.18179", "meh")  # type: ignore[arg-type]


@KINDS
def test_tokens_expire_after_two_years_and_say_whose_they_were(make: Maker) -> None:
    token = make(ADA, "2411.18179", "like", NOW)
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


def made_again(found: Visitor) -> set[str | None]:
    """The tokens this signer makes for what `found` names, at its time: each kind's."""
    sub, paper, verdict = PEOPLE[found.subscriber_id], found.paper or "", found.verdict or "like"
    return {make(sub, paper, verdict, found.made) for make in (alone, shared)}


HOSTILE = (
    st.text(max_size=600)
    | st.binary(max_size=400).map(lambda b: b.hex())
    | st.text(alphabet=".\x00\u202e\ud800 -_=*", max_size=50)
    | st.text(min_size=5000, max_size=20000)
)


@settings(max_examples=500, deadline=None)
@given(HOSTILE)
@example("." * 2)
@example("\x00.\x00.\x00")
@example("\ud800.aVt9kA.myQ19evgiONV04yE")
@example("x" * 100_000)
@example("NwpsCjI0MTEuMTgxNzk..aVt9kA.myQ19evgiONV04yE")
def test_no_string_makes_the_reader_raise(token: str) -> None:
    found = read(token)
    assert found is None or isinstance(found, (TokenProblem, Visitor))
    if isinstance(found, Visitor):  # only a token this signer made passes
        assert token in made_again(found)


SHARED_SIGNATURE = (shared(ADA, "2411.18179", "like", NOW) or "").partition(".")[2]


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=250).map(lambda t: f"7\n+\n{t}".encode("utf-8", "surrogatepass"))
)
@example(b"7\n+\n\xed\xa0\x80")  # a lone surrogate, as UTF-8 would spell it
@example(b"7\n-\n\x00")
def test_no_body_under_a_genuine_shared_signature_makes_the_reader_raise(raw: bytes) -> None:
    """Whatever body rides with ada's shared signature: refused, or a paper a link could
    name (printable, not too long), and the very token her digest would carry for it."""
    body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    token = f"{body}.{SHARED_SIGNATURE}"
    found = read(token)
    assert found is None or isinstance(found, (TokenProblem, Visitor))
    if isinstance(found, Visitor):
        assert found.belongs_to(ADA) and found.paper is not None and found.paper.isprintable()
        assert 0 < len(found.paper) <= MAX_FEEDBACK_KEY
        assert token == shared(ADA, found.paper, found.verdict or "like", NOW)
