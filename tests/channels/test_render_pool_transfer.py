"""What goes between the render pool and its workers (bot.channels.renderpool): a share of
digests and their targets one way, the rendered results the other, pickled with the run's
papers as their places and each model as its fields' values. Whatever goes comes back
equal; a paper of the run comes back as the receiver's own copy of it; a place that names
no paper is refused."""

from __future__ import annotations

import dataclasses
import functools
import io
import pickle
from dataclasses import InitVar, dataclass, field, replace
from datetime import UTC, datetime, time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.demo_texts import fifty_paper_digest

from bot.channels.base import Target
from bot.channels.renderpool import (
    _REDUCERS,
    _TRAVELLING,
    Result,
    _by_fields,
    _dump,
    _dumps,
    _load,
    _loads,
    _paper_at,
)
from bot.core.models import Digest, Hit, Paper
from bot.core.schedule import Schedule
from bot.render.apprise import ChatShape
from bot.rules.tree import Category


def share() -> tuple[list[Paper], list[tuple[Digest, Target]]]:
    """The run's papers and a share of two digests of them, every field of every model
    that travels set (summaries and translations, labels, a weekly schedule, papers left
    out and disliked, an Apprise target with its shape)."""
    papers, pairs = _share()
    return list(papers), list(pairs)


@functools.cache
def _share() -> tuple[tuple[Paper, ...], tuple[tuple[Digest, Target], ...]]:
    digest = fifty_paper_digest(summaries=True, language="zh")
    subscriber = replace(
        digest.subscriber,
        labels={"robot": "Robots"},
        schedule=Schedule(every="weekly", at=time(7, 30), timezone="Europe/Paris", weekday=2),
        apprise=("ntfy://ntfy.example/papers",),
        created=datetime(2024, 11, 1, tzinfo=UTC),
        id=7,
    )
    papers = [item.paper for item in digest.items]
    digest = replace(
        digest,
        subscriber=subscriber,
        omitted=tuple(papers[40:]),
        disliked=(papers[3],),
        ranking_note="ranked by what you liked",
        ranked=True,
    )
    shape = ChatShape(markdown=True, body=4096, title=250, json=True)
    apprise = Target("apprise:1a2b3c4d5e6f", "ntfy.example", "apprise ntfy.example", shape=shape)
    other = replace(digest, groups=digest.groups[:1], texts={}, channel="apprise")
    email = Target("email", "ada@lab.example", "<ada@lab.example>")
    return tuple(papers), ((digest, email), (other, apprise))


def copies(papers: list[Paper]) -> list[Paper]:
    """The run's papers as a worker holds them: equal, read from the papers file."""
    copied: list[Paper] = pickle.loads(pickle.dumps(papers))
    return copied


def places(papers: list[Paper]) -> dict[int, int]:
    return {id(paper): place for place, paper in enumerate(papers)}


def test_a_share_comes_back_equal_with_the_receivers_own_papers() -> None:
    papers, pairs = share()
    theirs = copies(papers)
    blob = _dumps(pairs, places(papers))
    back = _loads(blob, theirs)
    assert back == pairs
    assert [target.shape for _, target in back] == [target.shape for _, target in pairs]
    digest, _ = back[0]
    shown = [item.paper for item in digest.items] + list(digest.omitted + digest.disliked)
    assert all(any(paper is mine for mine in theirs) for paper in shown)
    # A paper goes as its place: the share is far smaller than with the papers whole.
    assert len(blob) * 2 < len(_dumps(pairs, {}))


def test_a_paper_not_among_the_runs_papers_travels_whole() -> None:
    """Only the papers of the run (these objects) go as places: another one, or an equal
    copy of one of them, goes whole and comes back equal."""
    papers, pairs = share()
    digest, target = pairs[0]
    stranger = replace(papers[0], id="2411.99999", title="Not in this run")
    look_alike = replace(papers[1])
    digest = replace(digest, omitted=(stranger, look_alike), disliked=())
    theirs = copies(papers)
    ((back, _),) = _loads(_dumps([(digest, target)], places(papers)), theirs)
    assert back == digest
    assert back.omitted == (stranger, look_alike)
    assert not any(paper is mine for paper in back.omitted for mine in theirs)


def test_results_come_back_through_a_file_equal() -> None:
    """A worker's results as the pool reads them: payloads, a digest the channel cut
    (its papers the parent's own), and a digest that could not be rendered."""
    papers, pairs = share()
    theirs = copies(papers)
    digest, _ = _loads(_dumps(pairs, places(papers)), theirs)[0]
    cut = replace(digest, groups=digest.groups[:1])
    results = [
        Result(b"\x00\r\n" * 30_000, cut),
        Result(b"Subject: papers\r\n\r\n"),
        Result(None, error="no channel kind 'fax' is known"),
    ]
    file = io.BytesIO()
    _dump(results, file, places(theirs))
    file.seek(0)
    back = _load(file, papers)
    assert back == results
    assert back[0].shown.items[0].paper is papers[0]


@pytest.mark.parametrize("place", [3, -1, 2**70, "0", True, 1.0, None])
def test_a_place_that_names_no_paper_is_refused(place: Any) -> None:
    class Hostile:
        def __reduce__(self) -> tuple[Any, ...]:
            return _paper_at, (place,)

    papers, _ = share()
    blob = pickle.dumps([Hostile()], protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(pickle.UnpicklingError, match="no paper at place"):
        _loads(blob, papers[:3])


def test_a_place_read_without_the_runs_papers_is_refused() -> None:
    """A share read by a plain unpickler fails: it never gives a paper that is not there."""
    papers, pairs = share()
    with pytest.raises(pickle.UnpicklingError, match="only with the run's papers"):
        pickle.loads(_dumps(pairs, places(papers)))


def test_every_model_that_travels_is_pickled_by_its_fields() -> None:
    """None fell back to the dataclass's own pickling (a field added that the constructor
    does not take in order would: this says so)."""
    assert set(_TRAVELLING) <= set(_REDUCERS)
    assert Hit in _REDUCERS


@dataclass(frozen=True, slots=True)
class _NotInit:
    value: str
    derived: str = field(init=False, default="")


@dataclass(frozen=True, slots=True)
class _KeywordOnly:
    value: str
    flag: bool = field(default=False, kw_only=True)
    other: int = 0


@dataclass(frozen=True)
class _InitVar:
    value: str
    seed: InitVar[int] = 0


@dataclass(frozen=True, slots=True)
class _PostInit:
    value: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", self.value.strip())


def test_a_dataclass_its_constructor_takes_field_by_field_is_rebuilt_by_it() -> None:
    reducer = _by_fields(Category)  # a single field
    assert reducer is not None
    rebuild, values = reducer(Category("cs.RO"))
    assert rebuild(*values) == Category("cs.RO")


@pytest.mark.parametrize("cls", [_NotInit, _KeywordOnly, _InitVar, _PostInit])
def test_a_dataclass_its_constructor_does_not_take_as_its_fields_is_left_alone(
    cls: type,
) -> None:
    assert _by_fields(cls) is None


# Text as hostile as a feed may bring: NUL, lone surrogates, control and right-to-left
# characters, and what looks like pickle's own opcodes.
HOSTILE_TEXT = st.text(st.characters(blacklist_categories=()), max_size=40) | st.sampled_from(
    ["", "\x00", "\ud800", "\u202e", "cos\nsystem\n(S'ls'\ntR.", "\x80\x05\x95"]
)


@given(
    title=HOSTILE_TEXT,
    abstract=HOSTILE_TEXT,
    authors=st.lists(HOSTILE_TEXT, max_size=3).map(tuple),
    link=st.none() | HOSTILE_TEXT,
    upvotes=st.none() | st.integers(),
    term=HOSTILE_TEXT,
    rule=HOSTILE_TEXT,
)
def test_any_paper_travels_equal_whole_or_by_place(
    title: str,
    abstract: str,
    authors: tuple[str, ...],
    link: str | None,
    upvotes: int | None,
    term: str,
    rule: str,
) -> None:
    papers, pairs = share()
    digest, target = pairs[0]
    paper = replace(
        papers[0], title=title, abstract=abstract, authors=authors, link=link, upvotes=upvotes
    )
    item = replace(digest.groups[0].items[0], paper=paper, hits=(Hit("title", 0, 1, term),))
    group = replace(digest.groups[0], rule=rule, items=(item,))
    hostile = replace(digest, groups=(group,), omitted=(paper,), note=title)
    for run in ([], [paper]):
        ((back, _),) = _loads(_dumps([(hostile, target)], places(run)), copies(run))
        assert back == hostile
        assert dataclasses.astuple(back.groups[0].items[0].paper) == dataclasses.astuple(paper)
