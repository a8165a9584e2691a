"""A subject reaches the reader exactly as written, whatever its script: the headers paperbell
sends are folded within 78 characters, never with a space doubled at a fold and never with two
encoded words glued together (Python 3.11's folder does both to non-ASCII subjects; CPython
gh-144156: Yahoo refuses such a message). Checked on the bytes a real SMTP server receives.
List-Unsubscribe is folded between its URLs only, never written as encoded words."""

from __future__ import annotations

import asyncio
import re
from email import message_from_bytes, policy
from email.message import EmailMessage

from hypothesis import example, given
from hypothesis import strategies as st
from support.servers import smtp_sink

from bot.channels import SendOutcome
from bot.channels.email import EmailChannel, SmtpSettings
from bot.core.mail import MAIL_POLICY

SUBJECTS = [
    # What the demo sent before: "quant-ph  — Thu" with two spaces, once unfolded.
    '10 new papers: "quantum error correction", qubit cat:quant-ph — Thu 28 Nov',
    # CPython gh-144156's subject: "=?utf-8?q?_?==?utf-8?q?Gen=C3=A8ve?=" from policy.SMTP.
    "Re: [SOS-1495488] Commande et livraison - Demande de retour - bibijolie - 251210-AABBCC"
    " - Abo actualités digitales 20 semaines d’abonnement à 24 heures, Bilan, Tribune de"
    " Genève et tous les titres Tamedia",
    "3 new papers: 机器学习, 扩散模型, 强化学习与多智能体系统 — Thu 28 Nov",
    "12 new papers: diffusion policy, multi-agent RL — Tue 24 Nov",  # ASCII but the dash
    "26 new papers: a plain ASCII subject long enough to be folded across the line limit",
]


def _message(subject: str) -> EmailMessage:
    msg = EmailMessage(policy=MAIL_POLICY)
    msg["From"] = "paperbell <papers@paperbell.example>"
    msg["To"] = "ada@lab.example"
    msg["Subject"] = subject
    msg.set_content("a digest", cte="quoted-printable")
    return msg


def _check(raw: bytes, subject: str) -> None:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    assert all(len(line) <= 78 for line in head.split("\r\n")), head
    assert "?==?" not in head, head
    received = message_from_bytes(raw, policy=policy.default)
    assert received["Subject"] == " ".join(subject.split())


def test_subjects_arrive_exactly_over_smtp() -> None:
    async def send(port: int) -> list[SendOutcome]:
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        batch = [(n, channel.load(bytes(_message(s)))) for n, s in enumerate(SUBJECTS)]

        async def on_sent(item: object) -> None:
            return None

        return await channel.send_all(batch, on_sent)

    with smtp_sink() as (sink, port):
        outcomes = asyncio.run(send(port))
        assert all(o.ok for o in outcomes), outcomes
        assert len(sink.raw) == len(SUBJECTS)
        for raw, subject in zip(sink.raw, SUBJECTS, strict=True):
            _check(raw, subject)
        assert sink.envelopes[0] == ("papers@paperbell.example", ["ada@lab.example"])


_WORD = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Zl", "Zp", "Zs"]),
    min_size=1,
    max_size=12,
)


@given(st.lists(_WORD, min_size=1, max_size=25))
@example(SUBJECTS[0].split())
@example(SUBJECTS[1].split())
@example(["x" * 100, "é"])  # one word longer than a line, then an encoded one
def test_any_subject_survives_building_storing_and_sending(words: list[str]) -> None:
    subject = " ".join(words)
    stored = bytes(_message(subject))  # as the outbox keeps it
    loaded = message_from_bytes(stored, policy=MAIL_POLICY)  # as the channel loads it
    sent = loaded.as_bytes(policy=MAIL_POLICY)  # as the channel writes it to the server
    for raw in (stored, sent):
        if re.search(rb"[^\r\n]{79}", raw.split(b"\r\n\r\n", 1)[0]) and subject.isascii():
            continue  # an ASCII word longer than a line cannot be folded; RFC 5322 allows it
        _check(raw, subject)


NAMES = [
    "Groupe d'IA, Université Laval",  # a comma and non-ASCII: was split into two From addresses
    "Équipe Müller (ML group)",  # parentheses and non-ASCII: were read as a comment
    'Lab "bell", Inc.',
    "机器学习组",
]


def test_a_from_name_of_any_kind_reaches_the_reader_whole_over_smtp() -> None:
    """The From name arrives as written, one address, and the envelope sender is the
    address: a name with a comma and an accent once made From two addresses, and the
    send refused with no digest going out for anyone."""
    from datetime import UTC, datetime

    from support.digests import sample_digest

    from bot.render.email import EmailSettings
    from bot.render.message import build_message
    from bot.render.notice import build_notice

    now = datetime(2024, 11, 28, 6, 30, tzinfo=UTC)
    messages = []
    for name in NAMES:
        settings = EmailSettings(from_addr="papers@lab.example", from_name=name)
        messages.append(build_message(sample_digest(), settings, now=now))
        messages.append(
            build_notice(
                "link",
                settings,
                to="ada@lab.example",
                url="https://bell.example/manage/x",
                days=7,
                subscriber_name="ada",
                notice_id="n1",
                now=now,
            )
        )

    async def send(port: int) -> list[SendOutcome]:
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        batch = [(n, channel.load(bytes(m))) for n, m in enumerate(messages)]

        async def on_sent(item: object) -> None:
            return None

        return await channel.send_all(batch, on_sent)

    with smtp_sink() as (sink, port):
        outcomes = asyncio.run(send(port))
        assert all(o.ok for o in outcomes), outcomes
        for index, received in enumerate(sink.messages):
            addresses = received["From"].addresses
            assert len(addresses) == 1, received["From"]
            assert addresses[0].display_name == NAMES[index // 2]
            assert addresses[0].addr_spec == "papers@lab.example"
            assert sink.envelopes[index][0] == "papers@lab.example"


def list_header(name: str, entries: list[str]) -> bytes:
    """The header line(s) MAIL_POLICY writes for a header of `entries`."""
    message = EmailMessage(policy=MAIL_POLICY)
    message[name] = ", ".join(entries)
    return message.as_bytes().split(b"\r\n\r\n", 1)[0] + b"\r\n"


urls = st.from_regex(r"\A<https://[a-z.]{1,20}/[A-Za-z0-9._%-]{0,120}>\Z")


@given(st.lists(urls, min_size=1, max_size=3))
def test_a_list_header_is_folded_between_its_entries_and_never_encoded(
    entries: list[str],
) -> None:
    line = list_header("List-Unsubscribe", entries)
    assert b"=?" not in line
    parsed = message_from_bytes(line + b"\r\nbody", policy=policy.default)
    assert str(parsed["List-Unsubscribe"]) == ", ".join(entries)
    assert all(len(part) <= 998 for part in line.split(b"\r\n"))


def test_a_list_header_refuses_a_line_break_or_non_ascii() -> None:
    for entry in ("<https://a.example/x>\r\nBcc: b@c.example", "<https://ä.example/>"):
        try:
            list_header("List-Unsubscribe", [entry])
        except ValueError:
            continue
        raise AssertionError(f"accepted {entry!r}")
