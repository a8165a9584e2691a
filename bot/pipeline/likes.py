"""The papers subscribers like and dislike, found and kept: a paper named by arXiv id, DOI
or title (the config's `like`/`dislike` lists, a library export's entries, a command) made
a verdict (`bot.core.models.Feedback`) with the text the ranking reads.

Wiring, like `bot.pipeline`: a paper is looked for by arXiv id among the stored papers,
else by DOI (the store's other names of papers, "doi:…"), else by its title (folded:
`bot.similar.refs.fold_title`) among the stored titles. Its text is the file's abstract,
else the stored paper's, else the arXiv API's (asked once per 100 ids, through the run's
polite fetcher: 3 seconds apart); an entry found nowhere still counts, its title being its
text. `sync_declared_likes` mirrors the config's verdicts into the store (via "config" and
"file"), reading a like_file again only when its size or time of change changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from bot.config import Config, SubscriberConfig
from bot.config.likes import like_file_path, read_like_file, stat_like_file
from bot.core.errors import SourceError
from bot.core.models import Feedback, FeedbackVia, Paper, Verdict, is_arxiv_id
from bot.core.plurals import plural
from bot.similar.library import Library, LibraryError
from bot.similar.refs import (
    DOI_PREFIX,
    PaperRefError,
    fold_title,
    is_title_key,
    paper_key,
    plain_title,
    title_key,
)
from bot.similar.text import joined_text
from bot.sources import Source
from bot.sources.arxiv import ArxivListingSource
from bot.sources.arxiv_api import API_BASE
from bot.sources.arxiv_query import ArxivQuerySource, papers_by_id
from bot.store import Store

log = logging.getLogger("bot.pipeline")

MAX_LOOKUPS = 2000  # ids asked of the arXiv API in one sync at most (20 requests)


@dataclass(frozen=True, slots=True)
class Named:
    """A paper as something names it: an arXiv id, a DOI, a title, perhaps an abstract."""

    arxiv: str | None = None
    doi: str | None = None  # lower case, without "doi:"
    title: str = ""
    abstract: str = ""

    @classmethod
    def of_key(cls, key: str) -> Named:
        """A paper named by its key (an arXiv id, "doi:…")."""
        if key.startswith(DOI_PREFIX):
            return cls(doi=key[len(DOI_PREFIX) :])
        return cls(arxiv=key)


@dataclass(frozen=True, slots=True)
class Found:
    """Where a named paper was found, and its key, title and text."""

    named: Named
    key: str
    title: str
    text: str
    where: str  # "store", "arxiv", "file", "" (the title only, or nothing)


def resolve(
    store: Store, named: Sequence[Named], *, fetched: Mapping[str, Paper] | None = None
) -> list[Found | None]:
    """Each named paper's key and text, in order (None: nothing names it). `fetched`: the
    arXiv API's papers by id, for those the store does not have."""
    fetched = fetched or {}
    dois = [f"{DOI_PREFIX}{n.doi}" for n in named if n.doi and not n.arxiv]
    aliases = store.papers.ids_of_keys(dois) if dois else {}
    by_title: dict[str, str] = {}
    wanted = {fold_title(n.title) for n in named if not (n.arxiv or n.doi) and n.title}
    wanted.discard("")
    if wanted:
        for stored_id, title in store.papers.titles():
            folded = fold_title(title)
            if folded in wanted:
                by_title.setdefault(folded, stored_id)
    ids: list[str | None] = []
    for n in named:
        doi_key = f"{DOI_PREFIX}{n.doi}" if n.doi else None
        ids.append(
            n.arxiv
            or (aliases.get(doi_key) if doi_key else None)
            or doi_key
            or by_title.get(fold_title(n.title) if n.title else "")
        )
    stored = store.papers.by_id([i for i in ids if i])
    found: list[Found | None] = []
    for n, paper_id in zip(named, ids, strict=True):
        paper = stored.get(paper_id or "") or fetched.get(n.arxiv or "")
        where = "" if paper is None else ("store" if paper_id in stored else "arxiv")
        key: str | None = (paper.id if paper is not None else paper_id) or title_key(n.title)
        if not key:
            found.append(None)
            continue
        title = n.title or (plain_title(paper.title) if paper is not None else "")
        if n.abstract:
            text, where = joined_text(title, n.abstract), "file"
        elif paper is not None:
            text = joined_text(plain_title(paper.title), paper.abstract)
        else:
            text = title
        found.append(Found(n, key, title, text, where))
    return found


def verdicts(
    found: Iterable[Found | None], verdict: Verdict, via: FeedbackVia, *, now: datetime
) -> list[Feedback]:
    """The verdicts on the papers found (None left out; a paper named twice, once)."""
    seen: dict[str, Feedback] = {}
    for item in found:
        if item is not None and item.key not in seen:
            seen[item.key] = Feedback(
                key=item.key,
                verdict=verdict,
                via=via,
                title=item.title,
                text=item.text,
                created=now,
            )
    return list(seen.values())


def api_base(sources: Sequence[Source]) -> str:
    """Where the arXiv API is asked: the first arXiv source's API address (a local
    stand-in in tests), else export.arxiv.org."""
    for source in sources:
        if isinstance(source, ArxivListingSource):
            return source.api_url
        if isinstance(source, ArxivQuerySource):
            return source.url
    return API_BASE


class Looked(NamedTuple):
    """What the arXiv API gave: its papers by id, and why it gave none (None: it answered)."""

    papers: dict[str, Paper]
    failure: str | None = None


async def look_up(fetcher: Any, ids: Sequence[str], *, base_url: str) -> Looked:
    """The arXiv API's papers with these ids (at most MAX_LOOKUPS), by id; none when the
    API fails, and why (the verdicts keep their titles as text until the next try)."""
    wanted = list(dict.fromkeys(ids))[:MAX_LOOKUPS]
    if not wanted:
        return Looked({})
    try:
        papers = await papers_by_id(fetcher, base_url=base_url, ids=wanted)
    except SourceError as exc:  # its message only: its hint is about a source's `url`
        return Looked({}, exc.message)
    return Looked({paper.id: paper for paper in papers})


# -- the config's verdicts ----------------------------------------------------------------------


@dataclass
class LikesSync:
    """What mirroring the config's verdicts did."""

    liked: int = 0
    disliked: int = 0
    from_file: int = 0
    skipped: int = 0  # library entries with nothing to find them by, or unreadable
    without_text: list[str] = field(default_factory=list)  # arXiv ids the API may give
    problems: list[str] = field(default_factory=list)


# What each config subscriber's verdicts were last mirrored from, by database and name:
# the lists and the like_file's size and time of change.
_SYNCED: dict[tuple[str, str], Any] = {}
# A like_file's entries, by path, while its size and time of change stay the same.
_LIBRARIES: dict[Path, tuple[tuple[int, int], Library]] = {}


def library_of(path: Path) -> Library:
    """A like_file's entries, read again only when its size or time of change changed.
    Raises LibraryError."""
    signature = stat_like_file(path).signature
    cached = _LIBRARIES.get(path)
    if cached is not None and cached[0] == signature:
        return cached[1]
    library = read_like_file(path)
    _LIBRARIES[path] = (signature, library)
    return library


def sync_declared_likes(
    config: Config,
    store: Store,
    *,
    now: datetime,
    fetched: Mapping[str, Paper] | None = None,
) -> LikesSync:
    """Mirror each config subscriber's `like`, `dislike` (via "config") and like_file (via
    "file") into the store, after `store.subscribers.sync_config`. A like_file that cannot
    be read leaves its earlier verdicts as they were (and is a problem, logged)."""
    report = LikesSync()
    where = str(store.database.engine.url)
    for sub in config.subscribers:
        record = store.subscribers.get(sub.name)
        if record is None or record.origin != "config":
            continue
        path = like_file_path(config, sub)
        try:
            signature = (sub.like, sub.dislike, path and stat_like_file(path).signature)
        except LibraryError:
            signature = None
        if not fetched and signature is not None and _SYNCED.get((where, sub.name)) == signature:
            continue  # as mirrored last time: nothing to do
        declared = _declared(store, sub, path, report, now=now, fetched=fetched)
        for via, feedback in declared.items():
            store.feedback.replace_via(record.id, via, feedback, now=now)
        if signature is not None and "file" in declared:
            _SYNCED[(where, sub.name)] = signature
        # An arXiv paper known by its title alone (or not at all): the API has its abstract.
        have_text = {f.key for f in store.feedback.of(record.id) if "\n\n" in f.text}
        report.without_text += [
            f.key
            for items in declared.values()
            for f in items
            if f.key not in have_text and is_arxiv_id(f.key) and not is_title_key(f.key)
        ]
    for problem in report.problems:
        log.warning("likes: %s", problem)
    return report


def _declared(
    store: Store,
    sub: SubscriberConfig,
    path: Path | None,
    report: LikesSync,
    *,
    now: datetime,
    fetched: Mapping[str, Paper] | None,
) -> dict[FeedbackVia, list[Feedback]]:
    """A config subscriber's verdicts by where they are declared: its `like` and `dislike`
    lists ("config"), its like_file at `path` ("file": absent when the file cannot be read,
    so that its earlier verdicts stay)."""
    liked = resolve(store, [Named.of_key(k) for k in sub.like], fetched=fetched)
    disliked = resolve(store, [Named.of_key(k) for k in sub.dislike], fetched=fetched)
    config_verdicts = verdicts(liked, "like", "config", now=now) + verdicts(
        disliked, "dislike", "config", now=now
    )
    report.liked += len(sub.like)
    report.disliked += len(sub.dislike)
    declared: dict[FeedbackVia, list[Feedback]] = {"config": config_verdicts}
    if path is None:
        declared["file"] = []
        return declared
    try:
        library = library_of(path)
    except LibraryError as exc:
        report.problems.append(f"{sub.name}: like_file: {exc}")
        return declared  # the file's earlier verdicts stay
    named = [Named(e.arxiv, e.doi, e.title, e.abstract) for e in library.entries]
    file_verdicts = verdicts(resolve(store, named, fetched=fetched), "like", "file", now=now)
    in_config = {f.key for f in config_verdicts}
    declared["file"] = [f for f in file_verdicts if f.key not in in_config]
    report.from_file += len(declared["file"])
    report.skipped += len(library.skipped) + library.left_out
    return declared


async def sync_declared_likes_online(
    config: Config, store: Store, fetcher: Any, sources: Sequence[Source], *, now: datetime
) -> LikesSync:
    """`sync_declared_likes`, then the arXiv API asked for the liked papers whose text is
    still unknown (in the store neither as a paper nor as a verdict's text), and the
    verdicts written again with it."""
    report = sync_declared_likes(config, store, now=now)
    if not report.without_text:
        return report
    papers, failure = await look_up(fetcher, report.without_text, base_url=api_base(sources))
    if failure is not None:
        log.warning(
            "likes: the arXiv API could not be asked for the title and abstract of %s (%s): "
            "asked again at the next start",
            plural(len(report.without_text), "liked paper"),
            failure,
        )
    return sync_declared_likes(config, store, now=now, fetched=papers) if papers else report


# -- verdicts given by hand ---------------------------------------------------------------------


def paper_keys(texts: Iterable[str]) -> tuple[list[str], list[str]]:
    """The keys of the papers `texts` name (each once, in order), and a problem for each
    text that names none."""
    keys: list[str] = []
    problems: list[str] = []
    for text in texts:
        try:
            key = paper_key(text)
        except PaperRefError as exc:
            problems.append(str(exc))
            continue
        if key not in keys:
            keys.append(key)
    return keys, problems


def papers_named(
    keys: Sequence[str], papers: Sequence[Paper], store: Store | None = None
) -> dict[str, Paper]:
    """The papers these keys (`paper_key`'s) name, by key: among `papers` by id or DOI,
    else (with a store) among the stored papers, by id or by another name of theirs (a
    DOI). A key that names none is absent."""
    by_id = {paper.id: paper for paper in papers}
    by_doi = {DOI_PREFIX + doi.lower(): paper for paper in papers for doi in paper.dois}
    found = {key: paper for key in keys if (paper := by_id.get(key) or by_doi.get(key))}
    rest = [key for key in keys if key not in found]
    if store is None or not rest:
        return found
    aliases = store.papers.ids_of_keys([key for key in rest if key.startswith(DOI_PREFIX)])
    ids = {key: aliases.get(key, key) for key in rest}
    stored = store.papers.by_id(sorted(set(ids.values())))
    found.update({key: stored[i] for key, i in ids.items() if i in stored})
    return found


@dataclass
class Given:
    """What giving verdicts by hand did: the papers (in order), those that had this verdict
    already or the other one, and the arXiv ids whose title and abstract are not known yet
    (and why: the arXiv API could not be asked, or does not know them)."""

    found: list[Found] = field(default_factory=list)
    repeated: set[str] = field(default_factory=set)
    replaced: set[str] = field(default_factory=set)  # had the other verdict
    without_text: list[str] = field(default_factory=list)
    failure: str | None = None  # why the arXiv API could not be asked


async def give_verdicts(
    store: Store,
    subscriber_id: int,
    keys: Sequence[str],
    verdict: Verdict,
    via: FeedbackVia,
    *,
    now: datetime,
    fetcher: Any = None,
    sources: Sequence[Source] = (),
) -> Given:
    """Record the subscriber's verdict on these papers (by key), each with its text: the
    stored paper's, else (with a fetcher) the arXiv API's, else none yet (a verdict given
    again takes a text found since)."""
    named = [Named.of_key(key) for key in keys]
    found = resolve(store, named)
    given = Given()
    missing = [
        f.key for f in found if f is not None and "\n\n" not in f.text and is_arxiv_id(f.key)
    ]
    if fetcher is not None and missing:
        fetched, given.failure = await look_up(fetcher, missing, base_url=api_base(sources))
        if fetched:
            found = resolve(store, named, fetched=fetched)
        if given.failure is not None:
            log.info("likes: the arXiv API could not be asked: %s", given.failure)
    before = {f.key: f.verdict for f in store.feedback.of(subscriber_id)}
    for feedback in verdicts(found, verdict, via, now=now):
        store.feedback.set(subscriber_id, feedback, now=now)
        if before.get(feedback.key) == verdict:
            given.repeated.add(feedback.key)
        elif feedback.key in before:
            given.replaced.add(feedback.key)
    given.found = [f for f in found if f is not None]
    if fetcher is not None:
        given.without_text = [f.key for f in given.found if f.key in missing and not f.title]
    return given


VIA_WORDS: dict[str, str] = {
    "config": "the config file",
    "file": "the library file",
    "command": "a command",
    "slack": "Slack",
    "email": "an email",
    "page": "the manage page",
}


def verdict_lines(feedback: Sequence[Feedback]) -> list[str]:
    """A subscriber's verdicts, one line each: the likes, then the dislikes (each oldest
    first, as given), each with the paper, its title and where it came from."""
    lines = []
    for item in sorted(feedback, key=lambda f: not f.liked):
        mark = "like" if item.liked else "dislike"
        if is_title_key(item.key):  # found by no id: its title, as the file writes it
            shown, title = f'"{item.title or item.key.removeprefix("title:")}"', ""
        else:
            shown, title = item.key, f"  {item.title}" if item.title else ""
        lines.append(f"{mark:<7}  {shown}{title}  (from {VIA_WORDS.get(item.via, item.via)})")
    return lines
