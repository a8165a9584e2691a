"""The reader's email on the bundled real day, as a user runs it: the real arXiv listing and
the real Hugging Face day polled from disk, `paperbell digest` through the CLI, summaries
from the stand-in of the OpenAI API on loopback answering like a real model (longer than
asked), the digests received by an SMTP server on loopback and read back.

The issue's "done when", for summaries and words: every summary shown is at most 330
characters and their median at least 250, and the plain text carries at most 1.5 URLs a
paper with the site's links signed; a reader of `hf:top10` or of
`"reinforcement learning"` sees no rule syntax in the subject or the visible text, and who
wrote the summaries is said once, not on every paper."""

from __future__ import annotations

import html as htmlib
import re
import statistics
import zlib
from email.message import EmailMessage
from pathlib import Path

import pytest
from support.cli import invoke
from support.config import local_feed_config, sink_email, toml_table
from support.llm import DEFAULT_MODEL, StandInRequest, default_answer, llm_standin
from support.paths import FIXTURES
from support.servers import smtp_sink

pytestmark = pytest.mark.database

HF_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-08-21.json"
SUBSCRIBERS = {
    "sam": {"rules": ['"reinforcement learning"', "hf:top10"], "summaries": True},
    "hana": {"rules": ["hf:top10"]},
    "rhea": {"rules": ['"reinforcement learning"']},
}
PUBLIC_URL = "https://papers.lab.example"
SECRET = {"PAPERBELL_SECRET_KEY": "a-test-key-of-32-characters-long!!"}
# What a reader must never see of a rule: its operators and quotes.
SYNTAX = ("hf:top", '"reinforcement learning"', "“reinforcement learning”", "cat:", " OR ")


def long_summary(request: StandInRequest) -> str:
    """A summary as real models write it when asked for 300 characters: 400 to 460, the
    abstract's own sentences, cut at a word and closed with a full stop."""
    if "summar" not in request.system_text.lower():
        return default_answer(request)
    abstract = request.user_text.rpartition("Abstract:")[2]
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(abstract.split()))]
    text = " ".join(s for s in sentences if s)
    while len(text) < 460:
        text += " It reports results on several benchmarks and discusses its limits."
    length = 415 + zlib.crc32(request.user_text.encode()) % 46  # cut below: 400 to 460
    return text[:length].rsplit(" ", 1)[0].rstrip(" ,;:.") + "."


def write_config(path: Path, database_url: str, port: int, base_url: str) -> None:
    subscribers = ""
    for name, settings in SUBSCRIBERS.items():
        lines = ["[[subscribers]]", f'name = "{name}"', f'email = "{name}@lab.example"']
        lines.append("rules = [" + ", ".join(repr(r) for r in settings["rules"]) + "]")
        if settings.get("summaries"):
            lines += ["summaries = true", "max_papers = 30"]
        subscribers += "\n".join(lines) + "\n\n"
    path.write_text(
        local_feed_config(database_url)
        + f'[[sources]]\nkind = "huggingface"\nname = "hf-daily"\nurl = "{HF_DAY.as_uri()}"\n'
        + toml_table("email", sink_email(port, timeout=5))
        + toml_table("web", {"public_url": PUBLIC_URL, "secret_key_env": "PAPERBELL_SECRET_KEY"})
        + toml_table(
            "llm",
            {"base_url": base_url, "model": DEFAULT_MODEL, "timeout": 10, "max_retries": 1},
        )
        + subscribers
    )


def part(message: EmailMessage, kind: str) -> str:
    body = message.get_body((kind,))
    assert body is not None
    return str(body.get_content())


def visible(page: str) -> str:
    """What a reader sees of an HTML part: no head, styles or tags; entities as letters."""
    page = re.sub(r"<head>.*?</head>", " ", page, flags=re.DOTALL)
    return " ".join(htmlib.unescape(re.sub(r"<[^>]*>", " ", page)).split())


def summaries_shown(page: str) -> list[str]:
    """Each paper's summary as shown: the paragraph right under its title."""
    shown = re.findall(r"</h3>\s*<div>(.*?)</div>", page, flags=re.DOTALL)
    return [htmlib.unescape(re.sub(r"<[^>]*>", "", text)).strip() for text in shown]


def test_summaries_are_near_300_characters_and_rules_are_words(
    tmp_path: Path, database_url: str
) -> None:
    with smtp_sink() as (sink, port), llm_standin() as llm:
        llm.answer = long_summary
        config = tmp_path / "config.toml"
        write_config(config, database_url, port, llm.base_url)
        assert invoke("poll", config=config).exit_code == 0
        result = invoke("digest", "--since", "2024-11-28", config=config, env=SECRET)
        assert result.exit_code == 0, result.output
        mail = {m["To"].partition("@")[0]: m for m in sink.messages}
    assert sorted(mail) == sorted(SUBSCRIBERS)
    assert llm.errors == []

    # Summaries: the model wrote 400 to 460 characters; the reader sees about 300.
    written = [r.response["choices"][0]["message"]["content"] for r in llm.chat_requests]
    assert written and all(400 <= len(text) <= 460 for text in written), sorted(
        len(t) for t in written
    )
    sam = part(mail["sam"], "html")
    shown = summaries_shown(sam)
    assert len(shown) == sam.count('<div id="paper-') >= 20
    lengths = [len(text) for text in shown]
    print(
        f"\n{len(lengths)} summaries shown: max {max(lengths)}, median {statistics.median(lengths)}"
    )
    assert max(lengths) <= 330, lengths
    assert statistics.median(lengths) >= 250, lengths
    # Who wrote them: once, at the top, in both parts; never beside a paper.
    for body in (visible(sam), " ".join(part(mail["sam"], "plain").split())):
        assert body.count(f"AI summaries by {DEFAULT_MODEL}") == 1
        assert "AI summary" not in body

    # The plain text, with signed links: the paper's page, and one rating page an email.
    text = part(mail["sam"], "plain")
    urls = re.findall(r"https?://\S+", text)
    assert text.count(f"{PUBLIC_URL}/rate/") == 1
    print(f"\nplain text of a {len(shown)}-paper digest: {len(urls)} URLs")
    assert len(urls) / len(shown) <= 1.5, (len(urls), len(shown))

    # Words, not syntax: in the subject, the HTML as seen and the plain text.
    subjects = {name: " ".join(str(m["Subject"]).split()) for name, m in mail.items()}
    assert "Top 10 on Hugging Face" in subjects["hana"]
    assert "reinforcement learning" in subjects["rhea"]
    for name, message in mail.items():
        for seen in (subjects[name], visible(part(message, "html")), part(message, "plain")):
            found = [syntax for syntax in SYNTAX if syntax in seen]
            assert found == [], f"{name}: {found}"
    # The Hugging Face day: upvotes as a number beside each title, linked there.
    hana = part(mail["hana"], "html")
    assert (
        len(re.findall(r'href="https://huggingface\.co/papers/[^"]+">▲&nbsp;\d+</a>', hana)) == 10
    )
    assert "upvotes" not in visible(hana)
