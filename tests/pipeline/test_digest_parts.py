"""A long digest with full abstracts and their Chinese translations, on the whole path as a
user runs it: the real listing of 28 Nov 2024 polled from disk, `paperbell digest` through
the CLI, translations by the stand-in of the OpenAI API on loopback (a third of each
English text, in Chinese, as a real model's), the emails received by an SMTP server on
loopback and read back, a real database (PostgreSQL too, when PAPERBELL_TEST_DATABASE_URL
is set).

The issue's "done when": every one of the 67 papers arrives with its Chinese abstract
whole, in numbered parts each within what Gmail shows whole (or in one email, for the
subscriber who chose so), each message on the wire at most 1.6 times its decoded text."""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from email.message import EmailMessage
from email.policy import default
from html import unescape
from pathlib import Path

import pytest
from sqlmodel import select
from support.cli import invoke
from support.config import local_feed_config, sink_email, toml_table
from support.llm import DEFAULT_MODEL, llm_standin
from support.servers import SinkHandler, smtp_sink

from bot.render.email import HTML_BUDGET, html_size
from bot.store import Store
from bot.store.tables import OutboxRow, PaperTextRow

pytestmark = pytest.mark.database

RULE = '"large language model"'  # 67 papers of the day
PAPERS = 67
SUBSCRIBERS = {"mei": "parts", "lan": "one"}


def write_config(path: Path, database_url: str, port: int, base_url: str) -> None:
    subscribers = "".join(
        f"""[[subscribers]]
name = "{name}"
email = "{name}@lab.example"
rules = [{RULE!r}]
max_papers = 100
abstracts = "full"
language = "zh"
long_emails = "{choice}"

"""
        for name, choice in SUBSCRIBERS.items()
    )
    path.write_text(
        local_feed_config(database_url)
        + toml_table("digest", {"window_days": 1})
        + toml_table("email", sink_email(port, timeout=10))
        + toml_table(
            "llm",
            {"base_url": base_url, "model": DEFAULT_MODEL, "timeout": 10, "deadline_seconds": 60},
        )
        + subscribers
    )


@pytest.fixture
def sent(tmp_path: Path, database_url: str) -> Iterator[tuple[SinkHandler, Path]]:
    """The day polled and its digests sent: what the SMTP server received, and the config."""
    with smtp_sink() as (sink, port), llm_standin() as llm:
        config = tmp_path / "config.toml"
        write_config(config, database_url, port, llm.base_url)
        assert invoke("poll", config=config).exit_code == 0
        result = invoke("digest", "--since", "2024-11-28", config=config)
        assert result.exit_code == 0, result.output
        yield sink, config


def body(message: EmailMessage, kind: str) -> str:
    part = message.get_body((kind,))
    assert part is not None
    return str(part.get_content())


def decoded_size(raw: bytes) -> int:
    """The bytes of a message's text and HTML parts as a mail app decodes them."""
    parsed = email.message_from_bytes(raw, policy=default)
    return sum(
        len(str(part.get_content()).encode())
        for part in parsed.walk()
        if part.get_content_maintype() == "text"
    )


def chinese_abstracts(database_url: str) -> dict[str, str]:
    """The Chinese abstracts the model wrote, by paper id."""
    with Store.open(database_url) as store, store.database.session() as session:
        rows = session.exec(
            select(PaperTextRow).where(
                PaperTextRow.kind == "abstract", PaperTextRow.language == "zh"
            )
        ).all()
    return {row.paper_id: row.text for row in rows}


def visible(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_sixty_seven_chinese_abstracts_arrive_whole(
    sent: tuple[SinkHandler, Path], database_url: str
) -> None:
    sink, _ = sent
    abstracts = chinese_abstracts(database_url)
    assert len(abstracts) == PAPERS
    assert min(len(text) for text in abstracts.values()) > 100  # whole abstracts, translated

    received = list(zip(sink.messages, sink.raw, strict=True))
    parts = [(m, raw) for m, raw in received if m["To"] == "mei@lab.example"]
    (one,) = [(m, raw) for m, raw in received if m["To"] == "lan@lab.example"]
    total = len(parts)
    assert total >= 2
    # In order, numbered, one subject stem, threaded under the first part.
    subjects = [str(m["Subject"]) for m, _ in parts]
    stem = subjects[0].removesuffix(f" (1/{total})")
    assert subjects == [f"{stem} ({n}/{total})" for n in range(1, total + 1)]
    first_id = str(parts[0][0]["Message-ID"])
    assert len({str(m["Message-ID"]) for m, _ in parts}) == total
    for message, _ in parts[1:]:
        assert str(message["In-Reply-To"]) == str(message["References"]) == first_id

    for message, raw in [*parts, one]:
        html = body(message, "html")
        print(f"{message['Subject']}: {len(raw) / decoded_size(raw):.2f}x, {html_size(html)} B")
        assert len(raw) <= 1.6 * decoded_size(raw), len(raw) / decoded_size(raw)
        assert "Abstracts are shortened" not in html and "would not fit" not in html
    for message, _ in parts:
        assert html_size(body(message, "html")) <= HTML_BUDGET

    # Every Chinese abstract whole, in the HTML and in the plain text (its lines joined).
    shown = "".join(visible(body(m, "html")) for m, _ in parts)
    text = "".join(re.sub(r"\s+", "", body(m, "plain")) for m, _ in parts)
    for paper_id, abstract in abstracts.items():
        assert abstract in shown, paper_id
        assert re.sub(r"\s+", "", abstract) in text, paper_id
    # Each paper once, numbered on from one part to the next.
    numbers = re.findall(r'<div id="paper-(\d+)"', "".join(body(m, "html") for m, _ in parts))
    assert numbers == [str(n) for n in range(1, PAPERS + 1)]
    # The one email holds them all.
    whole = visible(body(one[0], "html"))
    assert all(abstract in whole for abstract in abstracts.values())
    assert html_size(body(one[0], "html")) > HTML_BUDGET


def test_each_part_is_its_own_outbox_record_and_none_goes_twice(
    sent: tuple[SinkHandler, Path], database_url: str
) -> None:
    sink, config = sent
    count = len(sink.messages)
    with Store.open(database_url) as store, store.database.session() as session:
        records = session.exec(select(OutboxRow).order_by(OutboxRow.id)).all()
    assert len(records) == count
    assert all(record.status == "sent" for record in records)
    assert len({record.digest_id for record in records}) == count
    mei = [record for record in records if record.recipient == "mei@lab.example"]
    assert sum(record.papers for record in mei) == PAPERS
    again = invoke("digest", "--since", "2024-11-28", config=config)
    assert again.exit_code == 0, again.output
    assert len(sink.messages) == count


def test_a_part_that_fails_goes_again_alone(tmp_path: Path, database_url: str) -> None:
    """The server drops the connection at the second part (twice: the retry on a new
    connection too): the other parts are sent and recorded, the second is left queued; the
    next run sends it, and it alone."""
    with smtp_sink() as (sink, port), llm_standin() as llm:
        config = tmp_path / "config.toml"
        write_config(config, database_url, port, llm.base_url)
        assert invoke("poll", config=config).exit_code == 0

        def drop_the_next(_message: EmailMessage) -> None:
            if len(sink.messages) == 1:
                sink.drop_data = 2

        sink.on_accept = drop_the_next
        args = ("digest", "--since", "2024-11-28", "--subscriber", "mei")
        first = invoke(*args, config=config)
        sent = [str(m["Subject"]) for m in sink.messages]
        total = len(sent) + 1
        others = [f"({n}/{total})" for n in range(3, total + 1)]
        assert [s[-5:] for s in sent] == [f"(1/{total})", *others], first.output
        again = invoke(*args, config=config)
        assert again.exit_code == 0, again.output
        later = [str(m["Subject"])[-5:] for m in sink.messages[len(sent) :]]
        assert later == [f"(2/{total})"]
        assert invoke(*args, config=config).exit_code == 0
        assert len(sink.messages) == total  # nothing goes twice
