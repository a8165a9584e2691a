"""An email's rating link (`LinkSigner.rating_url`, the plain-text part's one link to the
page where each of its papers gets its 👍 / 👎) and `read_rating`: what it names, that it
is short, and that nothing else passes: altered, cut, edited to another digest or
subscriber, another address's, another key's, another kind of token, expired; and no
string makes the reader raise (fuzzed)."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.channels.linking import Linker
from bot.core.links import MAX_DIGEST_ID, LinkSigner, TokenProblem, Visitor, max_ages
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
DIGEST = "paperbell.3da918ea5655cd656f7c9c5a6146db69"  # as bot.match.digest names one
PREFIX = "https://papers.lab.example/rate/"

# Digest ids as the outbox may hold them: ours (hex), and any other printable ASCII.
DIGESTS = st.from_regex(r"paperbell\.[0-9a-f]{32}", fullmatch=True) | st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=128
)


def token_of(sub: Subscriber, digest_id: str, now: datetime = NOW) -> str:
    url = SIGNER.rating_url(sub, digest_id, now=now)
    assert url is not None and url.startswith(PREFIX)
    return url.removeprefix(PREFIX)


def read(token: str, *, now: datetime = NOW, people: dict[int, Subscriber] = PEOPLE) -> object:
    return SIGNER.read_rating(token, now=now, owner=people.get)


@settings(max_examples=200)
@given(DIGESTS)
@example(DIGEST)
@example("paperbell.00")
@example("paperbell.3DA918EA")  # upper-case hex: carried as it is, not packed
@example("paperbell.abc")  # odd length
@example("x" * MAX_DIGEST_ID)
def test_a_link_names_its_subscriber_and_digest(digest_id: str) -> None:
    token = token_of(ADA, digest_id)
    assert "/" not in token and token.count(".") == 2
    found = read(token)
    assert isinstance(found, Visitor) and found.belongs_to(ADA)
    assert (found.subscriber_id, found.digest, found.made) == (7, digest_id, NOW)
    assert found.paper is None and found.verdict is None


def test_a_link_is_short() -> None:
    url = SIGNER.rating_url(replace(ADA, id=123_456), DIGEST, now=NOW)
    assert url is not None and len(url) <= len(PREFIX) + 55


def test_an_id_no_digest_has_gets_no_link() -> None:
    for digest_id in ("", "x" * (MAX_DIGEST_ID + 1), "a\x00b", "naïve", "a\nb"):
        assert SIGNER.rating_url(ADA, digest_id, now=NOW) is None, digest_id
    with pytest.raises(ValueError, match="names a digest"):
        SIGNER.token("rate", ADA, now=NOW)
    assert SIGNER.read("rate", token_of(ADA, DIGEST), now=NOW) == TokenProblem("forged")


def test_an_email_gets_one_when_it_has_papers() -> None:
    links = Linker(NOW, SIGNER).links(ADA, ["2411.18179"], DIGEST)
    assert links is not None and links.rating is not None
    found = read(links.rating.removeprefix(PREFIX))
    assert isinstance(found, Visitor) and found.digest == DIGEST
    assert Linker(NOW, SIGNER).links(ADA, [], DIGEST).rating is None  # type: ignore[union-attr]
    assert Linker(NOW, SIGNER).links(ADA, ["2411.18179"]).rating is None  # type: ignore[union-attr]
    preview = Linker(NOW, None, "https://papers.lab.example").links(ADA, ["x"], DIGEST)
    assert preview is not None and preview.rating == f"{PREFIX}UNSIGNED-PREVIEW-no-secret-key"


def _with_body(token: str, body: str) -> str:
    return f"{body}.{token.partition('.')[2]}"


def _packed(digest_hex: str) -> str:
    return base64.urlsafe_b64encode(bytes.fromhex(digest_hex)).decode().rstrip("=")


def test_altered_cut_edited_and_foreign_tokens_fail() -> None:
    token = token_of(ADA, DIGEST)
    body, stamp, signature = token.split(".")
    later = token_of(ADA, DIGEST, NOW + timedelta(seconds=1))
    other_digest = "paperbell." + "0" * 32
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        token[: len(token) // 2],
        _with_body(token, "8" + body[1:]),  # ben's id
        _with_body(token, "7h" + _packed("0" * 32)),  # another digest
        _with_body(token, "7r" + base64.urlsafe_b64encode(DIGEST.encode()).decode()),
        _with_body(token, body + "A"),
        _with_body(token, "07" + body[1:]),  # the same id, written otherwise
        f"{body}.{later.split('.')[1]}.{signature}",  # another time
        f"{token_of(BEN, DIGEST).partition('.')[0]}.{stamp}.{signature}",
        f"{token_of(ADA, other_digest).partition('.')[0]}.{stamp}.{signature}",
        f"{token}.x",
        "",
        "rate",
    ]
    for bad in forged:
        found = read(bad)
        assert isinstance(found, TokenProblem) and found.reason == "forged", bad
        assert found.visitor is None
    moved = {7: replace(ADA, email="ada@elsewhere.example")}
    assert isinstance(read(token, people=moved), TokenProblem)
    assert read(token, people={}) is None  # a subscriber not stored: cannot be checked
    other = LinkSigner("t" * 40, SIGNER.public_url, max_age=SIGNER.max_age)
    alien = (other.rating_url(ADA, DIGEST, now=NOW) or "").removeprefix(PREFIX)
    assert isinstance(read(alien), TokenProblem)
    # No other kind of token is a rating token, and a rating token opens nothing else.
    feedback = SIGNER.feedback_token(ADA, "2411.18179", "like", now=NOW) or ""
    for other_kind in (feedback, SIGNER.token("manage", ADA, now=NOW)):
        assert isinstance(read(other_kind), TokenProblem)
    assert isinstance(SIGNER.read_feedback(token, now=NOW, owner=PEOPLE.get), TokenProblem)
    assert isinstance(SIGNER.read("manage", token, now=NOW), TokenProblem)
    assert isinstance(SIGNER.read_standing("archive", token, owner=PEOPLE.get), TokenProblem)


def test_a_link_expires_with_the_feedback_links_and_says_whose_it_was() -> None:
    token = token_of(ADA, DIGEST)
    assert isinstance(read(token, now=NOW + timedelta(days=729)), Visitor)
    found = read(token, now=NOW + timedelta(days=731))
    assert isinstance(found, TokenProblem) and found.reason == "expired"
    assert found.visitor is not None and found.visitor.belongs_to(ADA)
    assert found.visitor.digest == DIGEST


HOSTILE = (
    st.text(max_size=600)
    | st.binary(max_size=400).map(lambda b: b.hex())
    | st.text(alphabet="0123456789hr.\x00\u202e\ud800-_=*~", max_size=60)
    | st.binary(max_size=200).map(
        lambda b: f"7h{base64.urlsafe_b64encode(b).decode().rstrip('=')}.aVt9kA.x"
    )
    | st.binary(max_size=200).map(
        lambda b: f"7r{base64.urlsafe_b64encode(b).decode().rstrip('=')}.aVt9kA.x"
    )
    | st.text(min_size=5000, max_size=20000)
)


@settings(max_examples=500, deadline=None)
@given(HOSTILE)
@example("..")
@example("\x00.\x00.\x00")
@example("7h.aVt9kA.x")
@example("7r.aVt9kA.x")
@example("7h" + "A" * 60 + ".aVt9kA.x")  # more bytes than a digest id holds
@example("7r7Q.aVt9kA.x")  # not UTF-8
@example("7rAA.aVt9kA.x")  # a NUL
@example("9999999999999h" + _packed("00") + ".aVt9kA.x")
@example("\ud800.aVt9kA.x")
@example("x" * 100_000)
def test_no_string_makes_the_reader_raise(token: str) -> None:
    found = read(token)
    assert found is None or isinstance(found, (TokenProblem, Visitor))
    if isinstance(found, Visitor):  # only a token this signer made passes
        assert found.digest is not None
        assert token == token_of(PEOPLE[found.subscriber_id], found.digest, found.made)


@settings(max_examples=300)
@given(st.binary(max_size=120), st.sampled_from(["h", "r", "x", ""]))
@example(bytes.fromhex(DIGEST.removeprefix("paperbell.")), "h")
@example(DIGEST.encode(), "r")
@example(b"\xe2\x10\x00", "")  # "74hAA": subscriber 74's digest "paperbell.00", in our form
def test_no_body_under_a_genuine_signature_passes_but_the_one_signed(raw: bytes, code: str) -> None:
    """Whatever body rides with the time and signature of ada's link: refused, unless it is
    the very body signed. A body in the form a token has that names a subscriber the site
    does not know reads as no one (None), as any such token does."""
    token = token_of(ADA, DIGEST)
    signed_body, _, rest = token.partition(".")
    body = f"7{code}{base64.urlsafe_b64encode(raw).decode().rstrip('=')}"
    found = read(f"{body}.{rest}")
    if body == signed_body:
        assert isinstance(found, Visitor) and found.digest == DIGEST
    elif found is None:
        number = body[: len(body) - len(body.lstrip("0123456789"))]
        assert int(number) not in PEOPLE
    else:
        assert isinstance(found, TokenProblem) and found.reason == "forged"
