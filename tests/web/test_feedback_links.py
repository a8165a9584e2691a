"""The 👍 / 👎 links' tokens (`LinkSigner.feedback_token`, an email's link or a Slack
button's value, each signed over its subscriber, paper and verdict) and `read_feedback`:
what they name, that they are short, that no two of an email share a signature, and that
nothing else passes: altered, cut, edited to another paper or verdict, another subscriber's,
another address's, expired, or an email's link of the kind that shared one signature; tokens
already sent still pass; and no string makes the reader raise."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from support.old_links import shared_vote_token

from bot.channels.linking import Linker
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
SECRET = "s" * 40
SIGNER = LinkSigner(
    SECRET,
    "https://papers.lab.example",
    max_age=max_ages(manage_days=60, unsubscribe_days=365, confirm_days=7),
)
ADA = Subscriber(
    name="ada", email="ada@lab.example", rules=["x"], id=7, created=datetime(2025, 1, 1, tzinfo=UTC)
)
BEN = replace(ADA, name="ben", email="ben@lab.example", id=8)
PEOPLE = {7: ADA, 8: BEN}


# Made by the code before an email's links shared one signature (main at 80c6acd, this
# SIGNER, ADA, NOW), as Slack buttons' values were made since, pinned as they went out:
# links in sent emails must keep working until they expire.
SENT_BEFORE = {
    "NwpsCjI0MTEuMTgxNzk.aVt9kA.myQ19evgiONV04yE": ("2411.18179", "like"),
    "NwpkCmRvaToxMC4xMTAxLzIwMjQuMDEuMDEuNQ.aVt9kA.42cNw3J0s0s3lyz-": (
        "doi:10.1101/2024.01.01.5",
        "dislike",
    ),
}
# An email's links while they shared one signature over the subscriber and the time (main
# at c606612, this SIGNER, ADA, NOW): refused, since their paper and verdict were unsigned.
SHARED_BEFORE = {
    "NworCjI0MTEuMTgxNzk.aVt9kA.ivD3rtNDTSCWeqwC": ("2411.18179", "like"),
    "NwotCmRvaToxMC4xMTAxLzIwMjQuMDEuMDEuNQ.aVt9kA.ivD3rtNDTSCWeqwC": (
        "doi:10.1101/2024.01.01.5",
        "dislike",
    ),
}

# Paper keys as the sources make them: arXiv ids, new and old, and DOIs.
KEYS = (
    st.from_regex(r"[0-9]{4}\.[0-9]{4,5}", fullmatch=True)
    | st.from_regex(r"[a-z]{2,8}(-[a-z]{2})?/[0-9]{7}", fullmatch=True)
    | st.from_regex(r"doi:10\.[0-9]{4,5}/[!-~]{1,60}", fullmatch=True)
)
VERDICT = st.sampled_from(["like", "dislike"])


def alone(sub: Subscriber, key: str, verdict: Verdict, now: datetime) -> str | None:
    return SIGNER.feedback_token(sub, key, verdict, now=now)


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


@pytest.mark.parametrize("key", ["2411.18179", "quant-ph/0201082", "doi:10.1101/2024.01.01.5"])
@pytest.mark.parametrize("verdict", ["like", "dislike"])
def test_a_token_names_its_subscriber_paper_and_verdict(key: str, verdict: Verdict) -> None:
    token = alone(ADA, key, verdict, NOW)
    assert token is not None and "/" not in token and len(token) <= MAX_FEEDBACK_TOKEN
    found = read(token)
    assert isinstance(found, Visitor) and found.belongs_to(ADA)
    assert (found.subscriber_id, found.paper, found.verdict, found.made) == (7, key, verdict, NOW)


@pytest.mark.parametrize("token", SENT_BEFORE)
def test_tokens_already_sent_still_pass(token: str) -> None:
    found = read(token, now=NOW + timedelta(days=700))
    assert isinstance(found, Visitor) and found.belongs_to(ADA)
    assert (found.paper, found.verdict, found.made) == (*SENT_BEFORE[token], NOW)
    # Still made the same way, for an email's link and a Slack button's value alike.
    assert SIGNER.feedback_token(ADA, *SENT_BEFORE[token], now=NOW) == token  # type: ignore[arg-type]


@pytest.mark.parametrize("token", SHARED_BEFORE)
def test_links_that_shared_an_emails_signature_are_refused(token: str) -> None:
    """In date and never altered, still refused as forged; remade as that code made them
    (support.old_links, which the web tests use), and edited into what a link signed
    alone says, too."""
    paper, verdict = SHARED_BEFORE[token]
    assert shared_vote_token(SECRET, ADA, paper, verdict, now=NOW) == token  # type: ignore[arg-type]
    code = "l" if verdict == "like" else "d"
    as_signed_alone = with_text(token, f"7\n{code}\n{paper}")
    for old in (token, as_signed_alone):
        found = read(old)
        assert isinstance(found, TokenProblem) and found.reason == "forged", old
        assert found.visitor is None


def test_a_link_is_short() -> None:
    url = SIGNER.feedback_url(replace(ADA, id=123_456), "2411.18179", "dislike", now=NOW)
    assert url is not None and len(url) <= len("https://papers.lab.example/feedback/") + 50
    assert url.startswith("https://papers.lab.example/feedback/")


@settings(max_examples=100)
@given(st.lists(KEYS, min_size=1, max_size=50, unique=True))
@example(["2411.18179"])  # one paper: its 👍 and its 👎 differ in the verdict alone
@example(["2411.18179", "2411.18178"])  # two papers a character apart
def test_no_two_links_of_an_email_share_a_signature(keys: list[str]) -> None:
    """An email's 👍 / 👎 links as the renderers are handed them (`Linker.links`): two a
    paper, each with a signature of its own, each naming its paper and verdict."""
    links = Linker(NOW, SIGNER).links(ADA, keys)
    assert links is not None and list(links.feedback) == keys
    made = [(key, "like", v.like) for key, v in links.feedback.items()] + [
        (key, "dislike", v.dislike) for key, v in links.feedback.items()
    ]
    signatures = {url.rpartition(".")[2] for _, _, url in made}
    assert len(signatures) == len(made) == 2 * len(keys)
    for key, verdict, url in made:
        assert url.startswith(f"{SIGNER.public_url}/feedback/")
        found = read(url.rpartition("/")[2])
        assert isinstance(found, Visitor) and found.belongs_to(ADA)
        assert (found.paper, found.verdict) == (key, verdict)


def test_altered_cut_and_foreign_tokens_fail() -> None:
    token = alone(ADA, "2411.18179", "like", NOW)
    assert token is not None
    body, stamp, signature = token.split(".")
    ben = alone(BEN, "2411.18179", "like", NOW)
    later = alone(ADA, "2411.18179", "like", NOW + timedelta(seconds=1))
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
    alien = other.feedback_token(ADA, "2411.18179", "like", now=NOW)
    assert alien and isinstance(read(alien), TokenProblem)
    # A manage token is no feedback token, and a feedback token opens no page but its own.
    assert isinstance(read(SIGNER.token("manage", ADA, now=NOW)), TokenProblem)
    assert isinstance(SIGNER.read("manage", token, now=NOW), TokenProblem)
    assert isinstance(SIGNER.read_standing("feed", token, owner=PEOPLE.get), TokenProblem)


@settings(max_examples=300)
@given(KEYS, VERDICT, KEYS | st.text(min_size=1, max_size=80), VERDICT)
# What a link that shared its email's signature let anyone do: the other verdict, another
# paper; and what is one space or one digit away.
@example("2411.18179", "like", "2411.18179", "dislike")
@example("2411.18179", "like", "doi:10.1/other", "like")
@example("2411.18179", "like", "2411.18179 ", "like")
@example("2411.18179", "dislike", "2411.18178", "dislike")
@example("quant-ph/0201082", "like", "quant-ph/0201082\n", "like")
def test_a_token_edited_to_another_paper_or_verdict_is_refused(
    key: str, verdict: Verdict, other_key: str, other_verdict: Verdict
) -> None:
    token = alone(ADA, key, verdict, NOW)
    assume(token is not None and (other_key, other_verdict) != (key, verdict))
    assert token is not None
    code = "l" if other_verdict == "like" else "d"
    found = read(with_text(token, f"7\n{code}\n{other_key}"))
    assert isinstance(found, TokenProblem) and found.reason == "forged"
    assert found.visitor is None


def test_a_key_a_token_cannot_carry_gets_no_link() -> None:
    wide = "論" * MAX_FEEDBACK_KEY  # few enough characters, but 600 bytes
    for key in ("", "u" * (MAX_FEEDBACK_KEY + 1), wide, "2411.18179\n", "a\x00b"):
        assert SIGNER.feedback_token(ADA, key, "like", now=NOW) is None, key
        assert SIGNER.feedback_url(ADA, key, "dislike", now=NOW) is None, key
    links = Linker(NOW, SIGNER).links(ADA, ["a\x00b", "2411.18179"])
    assert links is not None and list(links.feedback) == ["2411.18179"]
    with pytest.raises(ValueError, match="verdict"):
        SIGNER.feedback_url(ADA, "2411.18179", "meh", now=NOW)  # type: ignore[arg-type]


def test_tokens_expire_after_two_years_and_say_whose_they_were() -> None:
    token = alone(ADA, "2411.18179", "like", NOW)
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


def made_again(found: Visitor) -> str | None:
    """The token this signer makes for what `found` names, at its time."""
    sub, paper, verdict = PEOPLE[found.subscriber_id], found.paper or "", found.verdict or "like"
    return alone(sub, paper, verdict, found.made)


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
        assert token == made_again(found)


ADA_SIGNED = (alone(ADA, "2411.18179", "like", NOW) or "").partition(".")
SHARED_SIGNED = next(iter(SHARED_BEFORE)).partition(".")


@pytest.mark.parametrize("signed", [ADA_SIGNED, SHARED_SIGNED], ids=["alone", "shared"])
@settings(max_examples=300)
@given(
    st.binary(max_size=300)
    | st.text(max_size=250).map(lambda t: f"7\nl\n{t}".encode("utf-8", "surrogatepass"))
    | st.text(max_size=250).map(lambda t: f"7\n+\n{t}".encode("utf-8", "surrogatepass"))
)
@example(b"7\nl\n2411.18179")  # the body signed (a token of ada's, under "alone")
@example(b"7\n+\n2411.18179")  # the body that went with the shared signature
@example(b"7\nd\n2411.18179")
@example(b"7\n\xed\xa0\x80")  # a lone surrogate, as UTF-8 would spell it
@example(b"7\n-\n\x00")
def test_no_body_under_a_genuine_signature_passes_but_the_one_signed(
    signed: tuple[str, str, str], raw: bytes
) -> None:
    """Whatever body rides with a genuine time and signature of ada's (a token's, or one
    her email's links all shared): refused, unless it is the very body signed."""
    body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    token = f"{body}.{signed[2]}"
    found = read(token)
    if signed is ADA_SIGNED and body == ADA_SIGNED[0]:
        assert isinstance(found, Visitor) and found.belongs_to(ADA)
        assert (found.paper, found.verdict, found.made) == ("2411.18179", "like", NOW)
    else:  # None: it names a subscriber not stored, which the pages answer as forged
        assert found is None or (isinstance(found, TokenProblem) and found.reason == "forged")
