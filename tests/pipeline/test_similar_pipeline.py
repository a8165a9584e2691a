"""Papers like these through the whole path: a real feed over HTTP, a real database, the
CLI, digests over SMTP to aiosmtpd; the default ranking, an embeddings endpoint on loopback
(the OpenAI protocol, a deterministic model inside), and that endpoint failing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import Result
from support.cli import invoke
from support.config import sink_email, toml_table
from support.embeddings import EmbeddingsStandIn, Fault
from support.servers import FeedServer, Route, SinkHandler, feed_server, smtp_sink

from bot.core.models import Paper
from bot.store import Store

pytestmark = pytest.mark.database

CONFIG = """\
version = 1

[database]
url = "{database_url}"

[digest]
window_days = 7

[[sources]]
kind = "arxiv"
name = "arxiv-all"
categories = ["astro-ph", "cond-mat", "physics", "quant-ph", "math", "cs", "stat"]
url = "{feed_url}"

{email}
{embeddings}
"""
SINCE = ("--since", "2024-11-28")


@dataclass
class World:
    config: Path
    feed: FeedServer
    sink: SinkHandler
    database_url: str
    folder: Path

    def run(self, *args: str) -> Result:
        result = invoke(*args, config=self.config)
        assert result.exit_code == 0, result.output
        return result

    def preview(self, name: str) -> str:
        """The plain-text part of NAME's digest as it would be sent now (nothing recorded)."""
        out = self.folder / "out"
        for old in out.glob("*"):
            old.unlink()
        self.run("digest", *SINCE, "--subscriber", name, "--out", str(out))
        (eml,) = out.glob("*.eml")
        message = message_from_bytes(eml.read_bytes(), policy=policy.default)
        assert isinstance(message, EmailMessage)
        body = message.get_body(("plain",))
        assert body is not None
        return str(body.get_content())


def make_world(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, embeddings: str = ""
) -> Iterator[World]:
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(full_feed_bytes)
        config = tmp_path / "config.toml"
        config.write_text(
            CONFIG.format(
                database_url=database_url,
                feed_url=feed.url("/rss/all"),
                email=toml_table("email", sink_email(port, timeout=5)),
                embeddings=embeddings,
            )
        )
        world = World(config, feed, sink, database_url, tmp_path)
        world.run("poll")
        yield world


@contextmanager
def endpoint_world(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, papers: tuple[Paper, ...]
) -> Iterator[tuple[EmbeddingsStandIn, World, list[str]]]:
    """A world whose [embeddings] is a stand-in endpoint, and the ids of five PDE papers
    (math.AP) to like."""
    with EmbeddingsStandIn() as standin:
        settings = f'[embeddings]\nbase_url = "{standin.base_url}"\nmodel = "stand-in-64"\n'
        for world in make_world(tmp_path, database_url, full_feed_bytes, settings):
            yield standin, world, [p.id for p in new_of(papers, "math.AP")[:5]]


@pytest.fixture
def world(tmp_path: Path, database_url: str, full_feed_bytes: bytes) -> Iterator[World]:
    yield from make_world(tmp_path, database_url, full_feed_bytes)


def new_of(papers: tuple[Paper, ...], category: str) -> list[Paper]:
    return [p for p in papers if p.primary_category == category and p.announce_type == "new"]


def listed(text: str, heading: str) -> list[str]:
    """The arXiv ids listed under a heading of a digest's plain text, in order."""
    section = text.split(f"== {heading}", 1)[1].split("\n== ", 1)[0]
    return re.findall(r"arxiv\.org/abs/(\d{4}\.\d{4,5})", section)


def likes_pde(world: World, papers: tuple[Paper, ...]) -> tuple[list[str], str]:
    """Ada subscribes to "robot" and likes five PDE papers (math.AP): the ids she liked and
    her digest's text as it would be sent now."""
    seeds = [p.id for p in new_of(papers, "math.AP")[:5]]
    world.run("subscribe", "ada", "--email", "ada@lab.example", "robot")
    liked = world.run("like", "ada", *seeds)
    assert "5" in liked.output
    return seeds, world.preview("ada")


def test_likes_add_similar_papers(world: World, full_feed_papers: tuple[Paper, ...]) -> None:
    pde = new_of(full_feed_papers, "math.AP")
    world.run("subscribe", "ada", "--email", "ada@lab.example", "robot")
    before = world.preview("ada")
    assert "Similar to what you like" not in before  # rules only: as before
    robot = listed(before, "robot")
    assert len(robot) > 10

    seeds = [p.id for p in pde[:5]]
    liked = world.run("like", "ada", *seeds)
    assert "5" in liked.output
    ranked = world.preview("ada")
    similar = listed(ranked, "Similar to what you like")
    assert len(similar) == 5  # similar_max, by default
    others = {p.id for p in pde[5:]}
    assert sum(key in others for key in similar) >= 4, similar  # PDE papers, like the seeds
    assert not set(similar) & set(seeds)  # never the liked papers themselves
    assert "like \u201c" in ranked  # each says which liked paper it is like
    order = listed(ranked, "robot")
    assert sorted(order) == sorted(robot)  # the same papers matched, in the ranking's order


def test_a_dislike_moves_a_paper_down(world: World, full_feed_papers: tuple[Paper, ...]) -> None:
    _, ranked = likes_pde(world, full_feed_papers)
    # 👎 on the paper ranked first: the next digest puts it lower.
    first = listed(ranked, "robot")[0]
    world.run("dislike", "ada", first)
    after = listed(world.preview("ada"), "robot")
    assert first in after and after.index(first) > 0


def test_three_dislikes_leave_a_paper_out(
    world: World, full_feed_papers: tuple[Paper, ...]
) -> None:
    _, ranked = likes_pde(world, full_feed_papers)
    order = listed(ranked, "robot")
    # Three dislikes of the paper ranked first and two more robot papers: it is left out,
    # and said so.
    first = order[0]
    world.run("dislike", "ada", first)
    world.run("dislike", "ada", order[1], order[2])
    text = world.preview("ada")
    assert first not in listed(text, "robot")
    assert re.search(r"\d+ papers? close to ones you marked 👎 (was|were) left out", text)


def test_what_dislikes_left_out_is_recorded_and_never_comes_later(
    world: World, full_feed_papers: tuple[Paper, ...]
) -> None:
    world.run("subscribe", "ada", "--email", "ada@lab.example", "robot")
    robot = listed(world.preview("ada"), "robot")  # before any like: ranked by the rules
    world.run("like", "ada", *(p.id for p in new_of(full_feed_papers, "math.AP")[:5]))
    world.run("dislike", "ada", *robot[:3])

    # Sent for real: what was left out by 👎 is recorded and never comes later.
    world.run("digest", *SINCE)
    (mail,) = world.sink.messages
    assert "Similar to what you like" in str(mail.get_body(("plain",)).get_content())
    again = invoke("digest", *SINCE, config=world.config)
    assert "no new matching papers" in again.output and len(world.sink.messages) == 1

    with Store.open(world.database_url) as store:
        (model,) = store.ranking_models.get([1, 2, 3]).values()
        assert model.kind == "hashed-tfidf-lsa" or model.kind


def test_similar_max_zero_ranks_but_adds_nothing(
    world: World, full_feed_papers: tuple[Paper, ...]
) -> None:
    seeds = [p.id for p in new_of(full_feed_papers, "math.AP")[:5]]
    world.run("subscribe", "ada", "--email", "ada@lab.example", "robot", "--similar-max", "0")
    world.run("like", "ada", *seeds)
    assert "Similar to what you like" not in world.preview("ada")


def test_embeddings_from_an_endpoint_each_text_once(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, full_feed_papers: tuple[Paper, ...]
) -> None:
    with endpoint_world(tmp_path, database_url, full_feed_bytes, full_feed_papers) as (
        standin,
        world,
        seeds,
    ):
        # try --like ranks in the space a digest uses: the endpoint's.
        tried = world.run("try", *(f"--like={key}" for key in seeds), "--limit", "5")
        assert standin.requests and "note:" not in tried.output
        shown = re.findall(r"^\s+\d+\. (\d{4}\.\d{5})", tried.output, re.M)
        assert len(shown) == 5 and not set(shown) & set(seeds)
        world.run("subscribe", "ada", "--email", "ada@lab.example", "robot")
        world.run("like", "ada", *seeds)
        text = world.preview("ada")
        assert len(listed(text, "Similar to what you like")) == 5
        asked = sum(len(r["input"]) for r in standin.requests)
        assert asked >= 1504  # every paper of the day (and the liked texts), once
        with Store.open(database_url) as store:
            assert store.vectors.count("openai:stand-in-64") == asked
        world.preview("ada")  # a second run asks for nothing: kept per model
        assert sum(len(r["input"]) for r in standin.requests) == asked


def test_embeddings_from_an_endpoint_that_fails_fall_back(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, full_feed_papers: tuple[Paper, ...]
) -> None:
    with endpoint_world(tmp_path, database_url, full_feed_bytes, full_feed_papers) as (
        standin,
        world,
        seeds,
    ):
        world.run("subscribe", "ada", "--email", "ada@lab.example", "robot")
        world.run("like", "ada", *seeds)
        text = world.preview("ada")  # ranked in the endpoint's space
        assert len(listed(text, "Similar to what you like")) == 5

        # A new paper's text to embed and the endpoint down: the default ranking, said.
        world.run("dislike", "ada", listed(text, "robot")[0])
        standin.script[:] = [Fault(status=500)] * 10
        _drop_vectors(database_url)
        fallback = world.preview("ada")
        assert "ranked by their words today" in " ".join(fallback.split())
        assert len(listed(fallback, "Similar to what you like")) == 5  # never empty


def test_try_like_with_an_endpoint_that_fails_falls_back_and_says_so(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, full_feed_papers: tuple[Paper, ...]
) -> None:
    with endpoint_world(tmp_path, database_url, full_feed_bytes, full_feed_papers) as (
        standin,
        world,
        seeds,
    ):
        standin.script[:] = [Fault(status=500)] * 10
        tried = world.run("try", *(f"--like={key}" for key in seeds), "--limit", "5")
        assert "note: " in tried.output and "failed (server error)" in tried.output


def _drop_vectors(database_url: str) -> None:
    from sqlalchemy import create_engine, text

    from bot.store import normalize_url

    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM text_vectors"))
    engine.dispose()
