"""Summaries and translations on the whole path, as a user runs it: the real listing polled
from disk, `paperbell digest` through the CLI, the [llm] endpoint the stand-in of the OpenAI
API on loopback, the digests received by an SMTP server on loopback and read back, a real
database (PostgreSQL too, when PAPERBELL_TEST_DATABASE_URL is set).

The issue's "done when": a subscriber with summaries gets one for every paper, one with
Chinese gets the Chinese beside the English, each text is asked once (a preview afterwards
asks nothing), and with the endpoint down a digest still goes out, in time, with abstracts,
saying the summaries failed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import Result
from support.cli import invoke
from support.config import local_feed_config, sink_email, toml_table
from support.llm import DEFAULT_MODEL, LlmStandIn, llm_standin, unused_base_url
from support.servers import SinkHandler, smtp_sink

pytestmark = pytest.mark.database

# Three papers of the bundled day (28 Nov 2024): robot diffusion planners and robot
# language models.
RULES = ["ti:diffusion cat:cs.RO", 'ti:"language model" cat:cs.RO']
PAPERS = 3
SUBSCRIBERS = {
    "ada": {"summaries": True},
    "bea": {"summaries": True},
    "chen": {"language": "zh"},
    "dana": {"summaries": True, "language": "zh"},
    "eli": {},
}


@dataclass
class Site:
    config: Path
    sink: SinkHandler
    llm: LlmStandIn | None

    def run(self, *args: str) -> Result:
        return invoke(*args, config=self.config)

    def mail(self, name: str) -> EmailMessage:
        (message,) = [m for m in self.sink.messages if m["To"].startswith(f"{name}@")]
        return message


def write_config(path: Path, database_url: str, port: int, base_url: str) -> None:
    subscribers = ""
    for name, settings in SUBSCRIBERS.items():
        lines = [
            "[[subscribers]]",
            f'name = "{name}"',
            f'email = "{name}@lab.example"',
            "rules = [" + ", ".join(repr(r) for r in RULES) + "]",
        ]
        lines += [
            f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}"
            for k, v in settings.items()
        ]
        subscribers += "\n".join(lines) + "\n\n"
    path.write_text(
        local_feed_config(database_url)
        + toml_table("digest", {"window_days": 1})
        + toml_table("email", sink_email(port, timeout=5))
        + toml_table(
            "llm",
            {
                "base_url": base_url,
                "model": DEFAULT_MODEL,
                "timeout": 10,
                "max_retries": 1,
                "deadline_seconds": 60,
            },
        )
        + subscribers
    )


@pytest.fixture
def site(tmp_path: Path, database_url: str) -> Iterator[Site]:
    with smtp_sink() as (sink, port), llm_standin() as llm:
        config = tmp_path / "config.toml"
        write_config(config, database_url, port, llm.base_url)
        site = Site(config, sink, llm)
        assert site.run("poll").exit_code == 0
        yield site


def html(message: EmailMessage) -> str:
    part = message.get_body(("html",))
    assert part is not None
    return str(part.get_content())


def text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


def test_summaries_and_chinese_are_written_once_and_go_out(site: Site) -> None:
    assert site.llm is not None
    result = site.run("digest", "--since", "2024-11-28")
    assert result.exit_code == 0, result.output
    assert len(site.sink.messages) == len(SUBSCRIBERS)
    # Per paper: its summary, its title in Chinese, its abstract in Chinese (chen), its
    # summary in Chinese (dana): each once.
    asked = site.llm.chat_requests
    assert len(asked) == 4 * PAPERS
    assert len({(r.system_text, r.user_text) for r in asked}) == 4 * PAPERS
    assert (
        f"summaries and translations ({DEFAULT_MODEL}): {4 * PAPERS} written, 0 already stored"
        in result.output
    )

    ada = site.mail("ada")
    for body in (html(ada), text(ada)):
        assert body.count(f"AI summaries by {DEFAULT_MODEL}.") == 1  # once, at the top
    chen = site.mail("chen")
    assert html(chen).count('lang="zh"') >= 2 * PAPERS
    assert text(chen).count("译：") >= 2 * PAPERS
    dana = site.mail("dana")
    assert text(dana).count("译：") >= 2 * PAPERS
    eli = site.mail("eli")
    assert "译：" not in text(eli) and DEFAULT_MODEL not in text(eli)

    # A preview afterwards asks nothing: a new subscriber's digest reads the store.
    added = site.run(
        "subscribe", "fay", "--email", "fay@lab.example", "--summaries", "--language", "zh", *RULES
    )
    assert added.exit_code == 0, added.output
    preview = site.run("digest", "--since", "2024-11-28", "--dry-run")
    assert preview.exit_code == 0, preview.output
    assert f"fay <fay@lab.example>: would get {PAPERS} papers" in preview.output
    assert f"0 written, {3 * PAPERS} already stored" in preview.output
    assert len(site.llm.chat_requests) == 4 * PAPERS

    status = site.run("status")
    assert status.exit_code == 0, status.output
    assert f"{DEFAULT_MODEL}: {4 * PAPERS} requests, {4 * PAPERS} written" in status.output


def test_with_the_endpoint_down_the_digest_goes_out_in_time_with_abstracts(
    tmp_path: Path, database_url: str
) -> None:
    with smtp_sink() as (sink, port):
        config = tmp_path / "config.toml"
        write_config(config, database_url, port, unused_base_url())
        site = Site(config, sink, None)
        assert site.run("poll").exit_code == 0
        started = time.monotonic()
        result = site.run("digest", "--since", "2024-11-28", "--subscriber", "dana")
        took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    assert took < 120
    assert f"dana <dana@lab.example>: sent {PAPERS} papers" in result.output
    # its summaries, then its titles and abstracts in Chinese: none written
    assert f"failed (unreachable: {3 * PAPERS})" in result.output
    body = text(site.mail("dana"))
    # In the reader's language, as the rest of the email's own words (docs/languages.md).
    assert f"有 {PAPERS} 篇总结这次未能生成" in " ".join(body.split())
    assert "译：" not in body
    status = site.run("status")
    assert f"{3 * PAPERS} failed (unreachable: {3 * PAPERS})" in status.output
    assert "last error" in status.output


def test_summarize_shows_a_papers_texts_as_digests_will(site: Site) -> None:
    assert site.llm is not None
    first = site.run("summarize", "2411.18562", "--language", "zh")
    assert first.exit_code == 0, first.output
    out = first.output
    assert out.startswith("arXiv:2411.18562v1  cs.RO\nDexDiffuser: Interaction-aware Diffusion")
    assert f"summary ({DEFAULT_MODEL}):\n  Dexterous manipulation" in out
    assert "\n译：" in out and "in Chinese:\n  译：" in out
    assert f"({DEFAULT_MODEL}): 3 written, 0 already stored" in out
    assert len(site.llm.chat_requests) == 3

    again = site.run("summarize", "arXiv:2411.18562v1", "--language", "zh-cn")
    assert again.exit_code == 0, again.output
    assert "in Chinese (China):" in again.output  # another tag: its own translations
    other = site.run("summarize", "2411.18562", "--model", "llama3.1:8b")
    assert other.exit_code == 0, other.output
    assert "summary (llama3.1:8b):" in other.output
    assert site.llm.chat_requests[-1].body["model"] == "llama3.1:8b"

    missing = site.run("summarize", "2411.99999")
    assert missing.exit_code == 1
    assert "2411.99999: not in the store" in missing.output
    bad = site.run("summarize", "2411.18562", "--language", "klingon!")
    assert bad.exit_code != 0 and "not a BCP 47 language tag" in bad.output


def test_summarize_needs_an_llm(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config(database_url))
    result = invoke("summarize", "2411.18562", config=config)
    assert result.exit_code == 2
    assert "summarize needs an [llm] section" in result.output


def test_try_shows_the_summaries_already_written_and_asks_nothing(site: Site) -> None:
    assert site.llm is not None
    before = site.run("try", RULES[0], "--since", "2024-11-28", "--summaries")
    assert before.exit_code == 0, before.output
    assert "[summary ·" not in before.output  # none written yet: the abstracts' snippets
    assert site.run("summarize", "2411.18562").exit_code == 0
    asked = len(site.llm.chat_requests)
    after = site.run("try", RULES[0], "--since", "2024-11-28", "--summaries", "--no-color")
    assert after.exit_code == 0, after.output
    assert f"[summary · {DEFAULT_MODEL}] Dexterous manipulation" in after.output
    assert after.output.count("[summary ·") == 1
    assert len(site.llm.chat_requests) == asked
