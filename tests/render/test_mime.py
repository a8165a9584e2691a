"""bot.render.mime builds a digest's bytes with the `email` package: the same headers,
structure and decoded parts as a plain EmailMessage (set_content / add_alternative,
MAIL_POLICY), within 78 characters a line, CRLF line endings only; each part in the shorter
of quoted-printable and base64, so that Chinese takes at most 1.6 times its bytes."""

from __future__ import annotations

import email
from email.message import EmailMessage

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bot.core.mail import MAIL_POLICY
from bot.render.mime import message_bytes, transfer_encoding


def reference(headers: list[tuple[str, str]], text: str, html: str | None) -> bytes:
    msg = EmailMessage(policy=MAIL_POLICY)
    for name, value in headers:
        msg[name] = value
    msg.set_content(text, charset="utf-8", cte=transfer_encoding(text))
    if html is not None:
        msg.add_alternative(html, subtype="html", charset="utf-8", cte=transfer_encoding(html))
    return msg.as_bytes()


def parts(raw: bytes) -> list[tuple[str, str, object]]:
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    return [
        (
            part.get_content_type(),
            str(part.get("Content-Transfer-Encoding")),
            part.get_content() if not part.is_multipart() else None,
        )
        for part in parsed.walk()
    ]


def decoded_headers(raw: bytes) -> list[tuple[str, str]]:
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    return [(name, str(value)) for name, value in parsed.items() if name != "Content-Type"]


plain_words = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)
values = st.one_of(
    st.from_regex(r"\A<?[a-z.+_=-]{1,12}@[a-z0-9.-]{1,12}>?\Z"),
    st.lists(plain_words, min_size=1, max_size=12).map(" ".join),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(
        lambda v: v.strip() == v and "  " not in v
    ),
)
bodies = st.text(st.characters(blacklist_categories=("Cs",)), max_size=600)


@given(values, bodies, st.one_of(st.none(), bodies))
@example("x", "line one  \nline two\r\n.\n" + "y" * 200 + "\n=", '<p a="b">é</p>')
@example("x", "", "")
@example("x", "a\rb\x0bc\x0cd\u2028e\x85f", None)
def test_a_message_reads_as_the_email_package_builds_it(
    subject: str, text: str, html: str | None
) -> None:
    headers = [("From", "paperbell <digest@lab.example>"), ("To", "ada@lab.example")]
    headers.append(("Subject", subject))
    try:
        expected = reference(headers, text, html)
    except Exception:
        return
    raw = message_bytes(headers, text, html)
    assert parts(raw) == parts(expected)
    assert decoded_headers(raw) == decoded_headers(expected)
    assert all(len(line) <= 78 for line in raw.split(b"\r\n")[: raw.count(b"\r\n")])
    assert b"\n" not in raw.replace(b"\r\n", b"")


def decoded_size(raw: bytes) -> int:
    """The bytes of a message's parts as a reader's mail app decodes them."""
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    return sum(
        len(part.get_content().encode()) for part in parsed.walk() if not part.is_multipart()
    )


CHINESE = "我们提出了一种基于大语言模型的强化学习方法，在多个基准上取得了显著提升。"
ENGLISH = "We propose a reinforcement learning method for large language models. "


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        (ENGLISH * 40, "quoted-printable"),
        (CHINESE * 40, "base64"),
        ((ENGLISH + CHINESE) * 20, "base64"),  # a bilingual digest: its Chinese decides
        ("", "quoted-printable"),
    ],
    ids=["english", "chinese", "bilingual", "empty"],
)
def test_each_part_takes_the_shorter_encoding(text: str, encoding: str) -> None:
    assert transfer_encoding(text) == encoding
    html = f'<p lang="zh" style="margin:0">{text}</p>'
    raw = message_bytes([("Subject", "x")], text, html)
    # At most 1.6 times what it decodes to: quoted-printable would take about three times
    # the bytes of the Chinese text.
    assert len(raw) <= 1.6 * max(decoded_size(raw), 1000), len(raw) / decoded_size(raw)


@given(bodies)
def test_the_encoding_chosen_is_never_the_longer(text: str) -> None:
    """The estimate picks the encoding that is shorter once written (within a line)."""
    sizes = {}
    for cte in ("quoted-printable", "base64"):
        msg = EmailMessage(policy=MAIL_POLICY)
        msg.set_content(text, charset="utf-8", cte=cte)
        sizes[cte] = len(msg.get_payload().encode())
    chosen = transfer_encoding(text)
    assert sizes[chosen] <= min(sizes.values()) + 80
