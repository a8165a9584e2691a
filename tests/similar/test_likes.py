"""The papers a subscriber likes and dislikes, given to paperbell: the config's `like`,
`dislike` and `like_file` (checked, mirrored into a real SQLite store, the file read again
when it changes), `check-config` on a like_file, the commands `like`, `dislike`, `unlike`
and `likes`, and the arXiv API asked (by id_list, through the polite fetcher) for a liked
paper's text, served by the local feed server from a real API answer."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.cli import outcome
from support.config import local_feed_config, sink_email, toml_table
from support.paths import FIXTURES
from support.servers import Route, feed_server

from bot.config import load_config, parse_config
from bot.core.errors import ConfigError
from bot.core.models import Feedback, Paper
from bot.pipeline.likes import (
    Named,
    resolve,
    sync_declared_likes,
    sync_declared_likes_online,
)
from bot.pipeline.wiring import build_sources
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 29, 9, 0, tzinfo=UTC)
LIBRARY = FIXTURES / "library"
API_1111 = (FIXTURES / "arxiv_api" / "api2016_idlist_1111.2011v2.xml").read_bytes()


def config_data(database_url: str, **subscriber: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "database": {"url": database_url},
        "email": sink_email(9),
        "subscribers": [
            {"name": "ada", "email": "ada@example.org", "rules": ["qubit"], **subscriber}
        ],
    }


def verdicts(store: Store, name: str = "ada") -> dict[str, Feedback]:
    record = store.subscribers.get(name)
    assert record is not None
    return {f.key: f for f in store.feedback.of(record.id)}


# -- the config ------------------------------------------------------------------------------


def test_config_likes_are_kept_as_keys_and_bad_ones_named_with_the_subscriber(
    database_url: str,
) -> None:
    config = parse_config(
        config_data(
            database_url,
            like=["2411.17703v2", "https://arxiv.org/abs/2411.17703", "DOI:10.1016/J.X"],
            dislike=["arXiv:2411.17704"],
            similar_max=0,
            similar_min=0.4,
        )
    )
    sub = config.subscribers[0]
    assert sub.like == ["2411.17703", "doi:10.1016/j.x"]
    assert sub.dislike == ["2411.17704"]
    declared = config.declared_subscribers()[0]
    assert (declared.similar_max, declared.similar_min) == (0, 0.4)
    assert (config.subscribers[0].model_copy().similar_max, sub.like_file) == (0, None)

    with pytest.raises(ConfigError) as caught:
        parse_config(
            config_data(database_url, like=["2411.17703", "nonsense"], dislike=["2413.00001"])
        )
    assert caught.value.problems == [
        "subscribers[0].like[1]: 'nonsense' is not an arXiv id (2411.18179), an arXiv link or "
        "a DOI (doi:10.1101/…)",
        "subscribers[0].dislike[0]: '2413.00001' is not an arXiv id (2411.18179), an arXiv "
        "link or a DOI (doi:10.1101/…)",
    ]
    with pytest.raises(ConfigError, match=r"ada both likes and dislikes 2411\.17703"):
        parse_config(config_data(database_url, like=["2411.17703"], dislike=["2411.17703v1"]))
    for bad in ({"similar_max": -1}, {"similar_min": 1.5}, {"like": "2411.17703"}):
        with pytest.raises(ConfigError):
            parse_config(config_data(database_url, **bad))


def test_check_config_reads_each_like_file_and_names_its_skipped_entries(
    tmp_path: Path, database_url: str
) -> None:
    shutil.copy(LIBRARY / "zotero_export.bib", tmp_path / "library.bib")
    path = tmp_path / "config.toml"
    path.write_text(
        f'version = 1\n[database]\nurl = "{database_url}"\n'
        + toml_table("email", sink_email(9))
        + '[[subscribers]]\nname = "ada"\nemail = "ada@example.org"\nrules = ["qubit"]\n'
        'like_file = "library.bib"\n'
    )
    code, out = outcome("check-config", config=path)
    assert code == 0, out
    assert (
        "subscribers[0] ada: like_file library.bib: BibTeX, 5 entries (2 by arXiv id, 1 by "
        "DOI, 2 by title only); 2 entries skipped" in out
    )
    assert "skipped entry 6 (broken_entry_2024): line 57: not valid BibTeX" in out
    assert "skipped entry 7: no arXiv id, DOI or title" in out

    (tmp_path / "library.bib").unlink()
    code, out = outcome("check-config", config=path)
    assert code == 2
    assert f"subscribers[0].like_file: {tmp_path / 'library.bib'}: no such file" in out
    (tmp_path / "library.bib").write_text("these are my notes")
    code, out = outcome("check-config", config=path)
    assert code == 2 and "not a BibTeX, RIS or CSL-JSON export" in out
    (tmp_path / "library.bib").write_text("")  # an empty collection's export
    code, out = outcome("check-config", config=path)
    assert code == 0, out
    assert "like_file library.bib: an empty file: 0 entries (nothing liked from it yet)" in out


@pytest.mark.parametrize("library", [None, "these are my notes"])
def test_check_config_lists_each_bad_like_and_the_like_file_with_every_other_problem(
    tmp_path: Path, library: str | None
) -> None:
    if library is not None:
        (tmp_path / "library.bib").write_text(library)
    path = tmp_path / "config.toml"
    path.write_text(  # no [email]: a problem of its own, beside the likes'
        'version = 1\n[[subscribers]]\nname = "lib"\nemail = "lib@example.org"\n'
        'rules = ["qubit"]\nlike = ["hello", "2411.18179", "doi:", ""]\n'
        'like_file = "library.bib"\n[[subscribers]]\nname = "bob"\nemail = "b@example.org"\n'
        'rules = ["x"]\nlike_file = 5\n'
    )
    code, out = outcome("check-config", config=path)
    assert code == 2, out
    lines = [line.strip() for line in out.splitlines()[1:]]
    forms = "an arXiv link or a DOI (doi:10.1101/…)"
    assert lines[:3] == [
        f"subscribers[0].like[0]: 'hello' is not an arXiv id (2411.18179), {forms}",
        f"subscribers[0].like[2]: 'doi:' is not an arXiv id (2411.18179), {forms}",
        f"subscribers[0].like[3]: '' is not an arXiv id (2411.18179), {forms}",
    ]
    assert "subscribers[1].like_file: Input should be a valid string" in lines
    why = "no such file" if library is None else "not a BibTeX, RIS or CSL-JSON export"
    assert any(
        line.startswith(f"subscribers[0].like_file: {tmp_path / 'library.bib'}: {why}")
        for line in lines
    ), out
    # Without the likes' problems, the missing [email] is listed with the file's.
    text = path.read_text().replace('like = ["hello", "2411.18179", "doi:", ""]\n', "")
    path.write_text(text.replace("like_file = 5\n", ""))
    code, out = outcome("check-config", config=path)
    assert code == 2 and "3 problems" in out, out
    assert "subscribers[0].email: an [email] section is needed" in out
    assert f"subscribers[0].like_file: {tmp_path / 'library.bib'}: {why}" in out


# -- finding the papers ------------------------------------------------------------------------


def test_a_paper_is_found_by_arxiv_id_doi_or_title_and_takes_the_best_text(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    found = resolve(
        store,
        [
            Named(arxiv="2411.17703"),
            Named(doi="10.1016/j.segan.2024.101477"),  # 2411.17758's journal DOI
            Named(
                title="Almost sure well-posedness and orbital stability for Schrödinger "
                "equation with potential"
            ),  # the feed writes Schr\"odinger
            Named(title="The TeXbook"),
            Named(arxiv="1706.03762", title="Attention Is All You Need", abstract="The abs."),
            Named(doi="10.1109/cvpr.2016.90"),
            Named(),
        ],
    )
    by_arxiv, by_doi, by_title, unknown, from_file, doi_only, nothing = found
    assert by_arxiv is not None and by_arxiv.key == "2411.17703" and by_arxiv.where == "store"
    assert by_arxiv.text.startswith("Probabilistic Forecasting of Radiation Exposure")
    assert "\n\nExtended human presence" in by_arxiv.text
    assert by_doi is not None and by_doi.key == "2411.17758"
    assert by_title is not None and by_title.key == "2411.17730"
    assert unknown is not None and unknown.key == "title:the texbook"
    assert unknown.text == "The TeXbook"  # found nowhere: still a like, its title its text
    assert from_file is not None and from_file.text == "Attention Is All You Need\n\nThe abs."
    assert doi_only is not None and (doi_only.key, doi_only.text) == (
        "doi:10.1109/cvpr.2016.90",
        "",
    )
    assert nothing is None


def test_the_configs_likes_are_mirrored_and_the_file_read_again_when_it_changes(
    tmp_path: Path, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    library = tmp_path / "library.bib"
    shutil.copy(LIBRARY / "mendeley_export.bib", library)
    config = parse_config(
        config_data(
            database_url,
            like=["2411.17703", "doi:10.1016/j.segan.2024.101477"],
            dislike=["https://arxiv.org/abs/2411.17704v1"],
            like_file="library.bib",
        ),
        path=tmp_path / "config.toml",
    )
    store.subscribers.sync_config(config.declared_subscribers(), now=NOW)
    report = sync_declared_likes(config, store, now=NOW)
    assert report.problems == []
    got = verdicts(store)
    assert {k: (f.verdict, f.via) for k, f in got.items()} == {
        "2411.17703": ("like", "config"),
        "2411.17758": ("like", "config"),
        "2411.17704": ("dislike", "config"),
        "2411.17775": ("like", "file"),
        "2411.17791": ("like", "file"),
        "doi:10.1109/cvpr.2016.90": ("like", "file"),
        "hep-th/9711200": ("like", "file"),
    }
    assert got["2411.17775"].text.startswith("What is the amount of baryonic dark matter")
    assert "Observations of galaxies" in got["2411.17775"].text  # the file's abstract
    assert got["2411.17791"].title == "Cardinal Sequences of Lindelöf scattered P-spaces"
    assert report.without_text == ["hep-th/9711200"]  # for the arXiv API

    # A verdict given by hand stays; the file changes (a paper gone, one new): read again.
    record = store.subscribers.get("ada")
    assert record is not None
    store.feedback.set(record.id, Feedback("2411.17791", "dislike", "command"), now=NOW)
    library.write_text((LIBRARY / "zotero_export.bib").read_text())
    os.utime(library, ns=(1, 1))
    sync_declared_likes(config, store, now=NOW)
    got = verdicts(store)
    assert got["2411.17791"].verdict == "dislike"  # by hand: kept
    assert "2411.17775" not in got and "hep-th/9711200" not in got  # no longer in the file
    assert got["2411.17730"].via == "file"  # by its title
    assert got["title:the texbook"].text == "The TeXbook"
    assert got["1706.03762"].text.startswith("Attention Is All You Need\n\nThe dominant")
    assert "2411.17703" in got and got["2411.17703"].via == "config"  # in both: the config's

    # The file gone: its verdicts stay as they were, and the sync says why.
    library.unlink()
    report = sync_declared_likes(config, store, now=NOW)
    assert report.problems and "no such file" in report.problems[0]
    assert "2411.17730" in verdicts(store)


def test_the_arxiv_api_gives_the_text_of_a_liked_paper_not_stored_once(
    tmp_path: Path, store: Store, database_url: str
) -> None:
    with feed_server() as server:
        server.answer = lambda path, headers: (
            Route(API_1111, content_type="application/atom+xml")
            if path.startswith("/api/query?id_list=1111.2011")
            else None
        )
        data = config_data(database_url, like=["1111.2011", "2411.99999"])
        data["sources"] = [
            {
                "kind": "arxiv",
                "categories": ["cs"],
                "url": (
                    FIXTURES / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"
                ).as_uri(),
                "api_url": server.url("/api/query"),
            }
        ]
        config = parse_config(data, path=tmp_path / "config.toml")
        store.subscribers.sync_config(config.declared_subscribers(), now=NOW)

        async def go() -> None:
            async with make_client() as client:
                fetcher = PoliteFetcher(client, min_interval=0, retries=0)
                sources = build_sources(config)
                await sync_declared_likes_online(config, store, fetcher, sources, now=NOW)
                await sync_declared_likes_online(config, store, fetcher, sources, now=NOW)

        asyncio.run(go())
    got = verdicts(store)
    assert got["1111.2011"].text.startswith(got["1111.2011"].title + "\n\n")
    assert len(got["1111.2011"].text) > 200
    assert got["2411.99999"].text == ""  # arXiv does not know it: no text yet
    asked = [path for path, _ in server.requests]
    # One request for both; the second sync, the config unchanged, asks nothing again.
    assert asked == ["/api/query?id_list=1111.2011,2411.99999&start=0&max_results=2"]


# -- the commands ----------------------------------------------------------------------------


def test_like_dislike_unlike_and_likes_commands(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        local_feed_config(database_url)
        + toml_table("email", sink_email(9))
        + '[[subscribers]]\nname = "ada"\nemail = "ada@example.org"\nrules = ["qubit"]\n'
        'like = ["2411.17703"]\n'
    )
    store = Store.open(load_config(path).database_url())
    try:
        store.papers.upsert(full_feed_papers, now=NOW)
    finally:
        store.close()
    cli = lambda *args: outcome(*args, config=path)  # noqa: E731
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0

    code, out = cli("like", "bob", "2411.17703v1", "https://arxiv.org/pdf/2411.17704")
    assert code == 0, out
    assert "liked 2411.17703: Probabilistic Forecasting of Radiation Exposure" in out
    assert "bob now has 2 verdicts" in out
    code, out = cli("dislike", "bob", "2411.17704", "doi:10.1016/j.segan.2024.101477")
    assert code == 0 and "disliked 2411.17758: PP-LEM" in out, out
    code, out = cli("likes", "bob")
    assert code == 0 and "bob: 1 liked, 2 disliked" in out
    assert "like     2411.17703  Probabilistic Forecasting" in out and "(from a command)" in out
    code, out = cli("like", "bob", "2411.17703", "2411.17758")
    assert code == 0 and "2411.17703 was already liked: Probabilistic Forecasting" in out
    assert "liked 2411.17758 in place of the earlier dislike: PP-LEM" in out
    code, out = cli("likes", "bob")  # the likes, then the dislikes, each as given
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["like", "2411.17703"],
        ["like", "2411.17758"],
        ["dislike", "2411.17704"],
    ], out
    assert cli("dislike", "bob", "2411.17758")[0] == 0
    code, out = cli("unlike", "bob", "2411.17704")
    assert code == 0 and "removed bob's verdict on 2411.17704" in out
    code, out = cli("unlike", "bob", "2411.17704")
    assert code == 1 and "bob has no verdict on 2411.17704" in out

    code, out = cli("like", "bob", "nonsense")
    assert code == 2 and "'nonsense' is not an arXiv id (2411.18179)" in out
    code, out = cli("like", "ada", "2411.17704")
    assert code == 1 and "declared in the config file" in out and "`like`" in out
    code, out = cli("likes", "ada")
    assert code == 0 and "ada: 1 liked, 0 disliked" in out and "(from the config file)" in out
    code, out = cli("likes", "nobody")
    assert code == 1 and "no subscriber named 'nobody'" in out


def test_likes_of_a_config_subscriber_without_any_points_at_the_file_and_makes_no_database(
    tmp_path: Path,
) -> None:
    database = tmp_path / "paperbell.sqlite"
    path = tmp_path / "config.toml"
    path.write_text(
        local_feed_config(f"sqlite:///{database}")
        + toml_table("email", sink_email(9))
        + '[[subscribers]]\nname = "ada"\nemail = "ada@example.org"\nrules = ["qubit"]\n'
    )
    cli = lambda *args: outcome(*args, config=path)  # noqa: E731
    for command in (("likes", "ada"), ("unlike", "bob", "2411.17703"), ("like", "bob", "1.1")):
        code, out = cli(*command)
        assert code in (1, 2) and not database.exists(), out
    code, out = cli("likes", "ada")
    assert code == 1 and "there is no database yet" in out and "paperbell poll -c" in out
    code, out = cli("like", "ada", "2411.17703")  # said before the database is looked for
    assert code == 1 and "declared in the config file" in out and not database.exists()
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
    code, out = cli("likes", "ada")
    assert code == 0 and "ada has liked and disliked nothing yet: add papers to its `like`" in out
    assert "paperbell like" not in out  # refused for ada
    code, out = cli("likes", "bob")
    assert code == 0 and "`paperbell like bob ID` adds one" in out


def test_like_says_when_the_arxiv_api_gives_no_title_and_that_it_comes_later(
    tmp_path: Path, database_url: str
) -> None:
    unknown = FIXTURES / "arxiv_api" / "edge_api2026_empty-result_idlist_0808.05394.xml"
    with feed_server() as server:
        server.answer = lambda path, headers: (
            Route(unknown.read_bytes(), content_type="application/atom+xml")
            if path.startswith("/api/query?id_list=2411.99999")
            else Route(b"down", status=404)
        )
        path = tmp_path / "config.toml"
        path.write_text(
            local_feed_config(database_url)
            + f'api_url = "{server.url("/api/query")}"\n'
            + toml_table("email", sink_email(9))
        )
        cli = lambda *args: outcome(*args, config=path)  # noqa: E731
        assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
        code, out = cli("like", "bob", "1706.03762")
        assert code == 0, out
        assert "liked 1706.03762 (title not known yet)" in out
        assert (
            "note: the title and abstract of 1706.03762 could not be fetched from the arXiv "
            "API (" in out
        )
        assert "they are filled in later: when paperbell stores the paper, or when this " in out
        assert "1 papers" not in out and "the source's `url`" not in out and "hint:" not in out
        code, out = cli("dislike", "bob", "2411.99999")
        assert code == 0 and "note: the arXiv API has no paper 2411.99999: check the id" in out
        assert "`paperbell unlike bob 2411.99999` removes it" in out


IDS = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=()), max_size=30),
    st.sampled_from(
        ("2411.17703", "2411.17703v9999999999", "hep-th/9711200", "doi:10.1/x", "\x00", "x" * 5000)
    ),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=5), max_size=2),
)


@settings(max_examples=100, deadline=None)
@given(like=st.lists(IDS, max_size=8) | IDS, dislike=st.lists(IDS, max_size=3))
@example(like=["nonsense"] * 1000, dislike=[])
def test_fuzz_any_like_list_is_a_config_or_a_problem_naming_the_key(
    like: Any, dislike: list[Any]
) -> None:
    data = config_data("sqlite:///unused.sqlite", like=like, dislike=dislike)
    try:
        config = parse_config(data, environ={})
    except ConfigError as exc:
        assert all(p.startswith("subscribers[0]") for p in exc.problems), exc.problems
        assert all("\x00" not in p and len(p) < 2000 for p in exc.problems)
    else:
        sub = config.subscribers[0]
        assert not set(sub.like) & set(sub.dislike)
        assert all(k == k.strip() and len(k) <= 255 for k in sub.like + sub.dislike)


@pytest.mark.parametrize(
    ("like_file", "problem"),
    [
        ("a\\u0000b", "control or invisible characters in the path"),
        ("\\u001b]0;pwned\\u0007.bib", "control or invisible characters in the path"),
        ("x" * 5000, "String should have at most 4096 characters"),
        ("", "String should have at least 1 character"),
    ],
)
def test_check_config_refuses_a_like_file_that_is_no_path_and_never_opens_it(
    tmp_path: Path, like_file: str, problem: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'version = 1\n[[subscribers]]\nname = "lib"\nemail = "lib@example.org"\n'
        f'rules = ["x"]\nlike_file = "{like_file}"\n'
    )
    code, out = outcome("check-config", config=path)
    assert code == 2 and out.count("subscribers[0].like_file: ") == 1, out
    assert f"subscribers[0].like_file: {problem}" in out
    assert "\x1b" not in out and "\x00" not in out and len(out) < 1000


@settings(max_examples=60, deadline=None)
@given(like_file=st.text(max_size=60) | st.sampled_from(["/", ".", "..", "~", "/dev/null"]))
def test_fuzz_check_config_reads_any_like_file_of_a_config_with_other_problems(
    tmp_path_factory: pytest.TempPathFactory, like_file: str
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "config.toml"
    path.write_text(  # no [email]: the file's like_file is read beside that problem
        'version = 1\n[[subscribers]]\nname = "lib"\nemail = "lib@example.org"\n'
        f'rules = ["x"]\nlike_file = {json.dumps(like_file)}\n'
    )
    code, out = outcome("check-config", config=path)
    assert code == 2, out
    assert out.startswith("error: ") and "Traceback" not in out
    assert all(c.isprintable() or c == "\n" for c in out)
