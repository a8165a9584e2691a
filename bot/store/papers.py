"""Papers: storing what the sources bring (merged, bot.core.merge), reading them back as
`bot.core.models.Paper`, and the parts of a backfill already done.

Papers are checked once more before they are written (NUL and lone surrogates stripped,
http(s) links only: bot.sources.feedtext). A paper is one row of `papers`, mapped field by
field from `Paper` in one place (`_paper_from_row`, `_fill_paper_row`); its DOIs are other
names of it (`paper_keys`). Nothing here knows subscribers, except that a paper renamed to
its arXiv id takes its deliveries along.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import date, datetime
from typing import Any, get_origin, get_type_hints

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from bot.core.merge import ARXIV_LISTING, merge_paper
from bot.core.models import Paper, is_arxiv_id
from bot.sources.feedtext import checked
from bot.store.database import Repository, rows_where_in
from bot.store.tables import BackfillRow, DeliveryRow, PaperKeyRow, PaperRow, dump_list, load_list

log = logging.getLogger(__name__)

# Every field of a Paper is the `papers` column of its name; its tuples are JSON lists.
_FIELDS = tuple(field.name for field in fields(Paper))
_LISTS = frozenset(
    name for name, hint in get_type_hints(Paper).items() if get_origin(hint) is tuple
)


@dataclass(frozen=True, slots=True)
class UpsertCounts:
    new: int
    updated: int
    unchanged: int
    merged: int = 0  # stored papers another source added facts to (upvotes, DOIs, ...)


def _paper_from_row(row: PaperRow) -> Paper:
    values: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(row, name)
        values[name] = load_list(value) if name in _LISTS else value
    return Paper(**values)


def _fill_paper_row(row: PaperRow, paper: Paper, authority: int) -> None:
    """Write `paper` (from a source of this `authority`) over `row`, its id aside."""
    for name in _FIELDS:
        if name != "id":
            value = getattr(paper, name)
            setattr(row, name, dump_list(value) if name in _LISTS else value)
    row.first_type = paper.first_type or paper.announce_type
    row.authority = authority


class Papers(Repository):
    """The stored papers (`store.papers`)."""

    def upsert(
        self, papers: Sequence[Paper], *, now: datetime, authority: int = ARXIV_LISTING
    ) -> UpsertCounts:
        """Store papers from a source of this `authority` (bot.core.merge): a paper already
        stored, under its id or a DOI it shares, is merged with the new one; count what
        was new, updated (a newer version), merged (facts added) and unchanged."""
        latest: dict[str, Paper] = {}
        storable: list[Paper] = []
        for paper in papers:  # whatever a source's parser let through: never NUL, say
            try:
                storable.append(checked(paper))
            except ValueError as exc:
                log.warning("not stored: %s", exc)
        for paper in storable:  # a feed may list an id twice; keep its highest version
            kept = latest.get(paper.id)
            if kept is None or paper.version > kept.version:
                latest[paper.id] = paper
        counts: Counter[str] = Counter()
        with self.database.session() as session:
            rows = self._paper_rows(session, list(latest))
            doi_keys = [f"doi:{doi}" for paper in latest.values() for doi in paper.dois]
            aliases = self._aliases(session, doi_keys)
            for paper in latest.values():
                row = rows.get(paper.id)
                if row is None:
                    row = self._stored_under_doi(session, paper, rows, aliases)
                stored = _paper_from_row(row) if row is not None else None
                incoming = replace(paper, id=row.id) if row is not None else paper
                kept, kept_authority, outcome = merge_paper(
                    stored, row.authority if row is not None else 0, incoming, authority
                )
                counts[outcome] += 1
                if row is None:
                    row = PaperRow(
                        id=kept.id,
                        version=kept.version,
                        title="",
                        abstract="",
                        authors="[]",
                        categories="[]",
                        announce_type=kept.announce_type,
                        first_seen=now,
                        updated_at=now,
                    )
                    rows[kept.id] = row
                elif outcome == "unchanged":
                    continue
                _fill_paper_row(row, kept, kept_authority)
                if outcome == "updated":
                    row.updated_at = now
                session.add(row)
                for doi in kept.dois:
                    key = f"doi:{doi}"
                    if key not in aliases:  # a DOI the paper had before: looked up now
                        known = session.get(PaperKeyRow, key)
                        aliases[key] = known.paper_id if known is not None else None
                    if aliases[key] is None:
                        aliases[key] = kept.id
                        session.add(PaperKeyRow(key=key, paper_id=kept.id))
            session.commit()
        return UpsertCounts(
            new=counts["new"],
            updated=counts["updated"],
            unchanged=counts["unchanged"] + len(storable) - len(latest),
            merged=counts["merged"],
        )

    @staticmethod
    def _paper_rows(session: Session, ids: Sequence[str]) -> dict[str, PaperRow]:
        return {row.id: row for row in rows_where_in(session, PaperRow.id, ids)}

    @staticmethod
    def _aliases(session: Session, keys: Sequence[str]) -> dict[str, str | None]:
        found: dict[str, str | None] = dict.fromkeys(keys)
        rows = rows_where_in(session, PaperKeyRow.key, list(found))
        found.update({row.key: row.paper_id for row in rows})
        return found

    def _stored_under_doi(
        self,
        session: Session,
        paper: Paper,
        rows: dict[str, PaperRow],
        aliases: Mapping[str, str | None],
    ) -> PaperRow | None:
        """The stored paper a new one is under another name, through a DOI they share.

        A journal entry joins the arXiv paper with its DOI. An arXiv paper whose DOI names
        a paper stored from a journal feed takes that paper over: the arXiv id becomes its
        name, and what was delivered under the old one counts for the new one."""
        for doi in paper.dois:
            other = aliases.get(f"doi:{doi}")
            if other is None or other == paper.id:
                continue
            row = rows.get(other) or session.get(PaperRow, other)
            if row is None:
                continue
            stored_on_arxiv = is_arxiv_id(row.id)
            if paper.on_arxiv and stored_on_arxiv:
                continue  # two arXiv papers naming one DOI (an erratum, a typo): both stay
            if paper.on_arxiv:
                return self._rename_paper(session, row, paper.id, rows)
            rows[row.id] = row
            return row
        return None

    @staticmethod
    def _rename_paper(
        session: Session, row: PaperRow, new_id: str, rows: dict[str, PaperRow]
    ) -> PaperRow:
        renamed = PaperRow.model_validate(row.model_dump() | {"id": new_id})
        session.delete(row)
        session.flush()
        session.add(renamed)
        session.execute(
            update(DeliveryRow).where(col(DeliveryRow.paper_id) == row.id).values(paper_id=new_id)
        )
        session.execute(
            update(PaperKeyRow).where(col(PaperKeyRow.paper_id) == row.id).values(paper_id=new_id)
        )
        rows.pop(row.id, None)
        rows[new_id] = renamed
        log.info("paper %s is arXiv:%s: stored under the arXiv id from now on", row.id, new_id)
        return renamed

    def announced_since(self, since: date) -> list[Paper]:
        """Stored papers whose (latest) announcement is on or after `since`, newest first."""
        with self.database.session() as session:
            rows = session.exec(
                select(PaperRow)
                .where(col(PaperRow.announced) >= since)
                .order_by(col(PaperRow.announced).desc(), col(PaperRow.id))
            ).all()
            return [_paper_from_row(row) for row in rows]

    def per_day(self, since: date, until: date) -> dict[date, int]:
        """How many stored papers each announcement day from `since` to `until` brought."""
        with self.database.session() as session:
            rows = session.exec(
                select(col(PaperRow.announced), func.count())
                .where(col(PaperRow.announced) >= since, col(PaperRow.announced) <= until)
                .group_by(col(PaperRow.announced))
            ).all()
            return {day: count for day, count in rows if day is not None}

    def count(self) -> int:
        with self.database.session() as session:
            return int(session.exec(select(func.count()).select_from(PaperRow)).one())

    def latest_announcement(self) -> date | None:
        with self.database.session() as session:
            return session.exec(select(func.max(PaperRow.announced))).one()

    def by_id(self, ids: Sequence[str]) -> dict[str, Paper]:
        """The stored papers with these (version-less) ids."""
        with self.database.session() as session:
            return {
                paper_id: _paper_from_row(row)
                for paper_id, row in self._paper_rows(session, list(ids)).items()
            }

    def ids_of_keys(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored papers that go by these other names ("doi:10.1101/…"), by name."""
        with self.database.session() as session:
            return {
                key: paper_id
                for key, paper_id in self._aliases(session, list(keys)).items()
                if paper_id is not None
            }

    def titles(self) -> list[tuple[str, str]]:
        """Every stored paper's id and title (as published, TeX and all): what a library
        entry named by its title alone is looked for in."""
        with self.database.session() as session:
            rows = session.exec(select(PaperRow.id, PaperRow.title).order_by(col(PaperRow.id)))
            return [(paper_id, title) for paper_id, title in rows.all()]

    # -- backfill ---------------------------------------------------------------------------

    def backfilled(self, source: str) -> set[str]:
        """The parts of a backfill of `source` already done."""
        with self.database.session() as session:
            rows = session.exec(select(BackfillRow.chunk).where(BackfillRow.source == source))
            return set(rows.all())

    def mark_backfilled(self, source: str, chunk: str, *, papers: int, now: datetime) -> None:
        with self.database.session() as session:
            row = session.get(BackfillRow, (source, chunk)) or BackfillRow(
                source=source, chunk=chunk, done_at=now
            )
            row.papers, row.done_at = papers, now
            session.add(row)
            session.commit()
