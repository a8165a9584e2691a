"""The texts models wrote for papers (summaries, translations), each kept once per paper
version, kind, language and model, and each day's use of each model: requests against the
day's budget, texts written and found already written, failures by reason, tokens.

`store.texts`. A text is stored after the model wrote it and it passed its checks; a run
that needs it again (another subscriber, a preview, tomorrow's digest) reads it here. The
budget is counted here, in the database, so that every process using one model shares it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from sqlalchemy import and_, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from bot.store.database import Repository, aware
from bot.store.tables import LlmDayRow, PaperTextRow

TextKey = tuple[str, int, str, str]  # paper id, version, kind, language
# Keys asked for in one query at most (a bound on the statement's size).
CHUNK = 200


@dataclass(frozen=True, slots=True)
class ModelDay:
    """One day's use of one model."""

    day: date
    model: str
    requests: int = 0
    written: int = 0
    cached: int = 0
    failed: int = 0
    over_budget: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: Mapping[str, int] = field(default_factory=dict)
    last_error: str | None = None
    last_error_at: datetime | None = None


class Texts(Repository):
    """The written texts and the models' daily use (`store.texts`)."""

    def get(self, wanted: Iterable[tuple[TextKey, str]], model: str) -> dict[TextKey, str]:
        """The stored texts by `model` of each (key, source hash) wanted: those written from
        that same source (the others are absent)."""
        sources = dict(wanted)
        keys = list(sources)
        found: dict[TextKey, str] = {}
        with self.database.session() as session:
            for start in range(0, len(keys), CHUNK):
                chunk = keys[start : start + CHUNK]
                query = select(PaperTextRow).where(
                    PaperTextRow.model == model,
                    or_(
                        *(
                            and_(
                                col(PaperTextRow.paper_id) == paper,
                                col(PaperTextRow.version) == version,
                                col(PaperTextRow.kind) == kind,
                                col(PaperTextRow.language) == language,
                            )
                            for paper, version, kind, language in chunk
                        )
                    ),
                )
                for row in session.exec(query):
                    key = (row.paper_id, row.version, row.kind, row.language)
                    if sources.get(key) == row.source_hash:
                        found[key] = row.text
        return found

    def put(
        self,
        key: TextKey,
        model: str,
        text: str,
        *,
        source_hash: str,
        now: datetime,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> str:
        """Keep a text written for `key` by `model` from the source `source_hash`, unless
        one from the same source is there already (another run wrote it at the same time):
        the text kept, which every digest then shows. A text from another source is
        replaced."""
        paper, version, kind, language = key
        for _ in range(2):
            with self.database.session() as session:
                row = session.get(PaperTextRow, (paper, version, kind, language, model))
                if row is not None and row.source_hash == source_hash:
                    return row.text
                if row is None:
                    row = PaperTextRow(
                        paper_id=paper,
                        version=version,
                        kind=kind,
                        language=language,
                        model=model,
                        source_hash=source_hash,
                        text=text,
                        created_at=now,
                    )
                row.source_hash = source_hash
                row.text = text
                row.created_at = now
                row.prompt_tokens = prompt_tokens
                row.completion_tokens = completion_tokens
                session.add(row)
                try:
                    session.commit()
                except IntegrityError:  # another process inserted it first: read theirs
                    session.rollback()
                    continue
                return text
        return text

    def reserve(self, day: date, model: str, limit: int | None) -> bool:
        """Count one request of `model` on `day`; False (nothing counted) when the day's
        `limit` is reached. Atomic: processes sharing the database share the budget."""
        self._day_row(day, model)
        with self.database.session() as session:
            statement = (
                update(LlmDayRow)
                .where(col(LlmDayRow.day) == day, col(LlmDayRow.model) == model)
                .values(requests=LlmDayRow.requests + 1)
            )
            if limit is not None:
                statement = statement.where(col(LlmDayRow.requests) < limit)
            result = session.exec(statement)  # type: ignore[call-overload]
            session.commit()
            return bool(result.rowcount)

    def charge(self, day: date, model: str, requests: int) -> None:
        """Count `requests` more of `model` on `day`, past the limit if need be: they were
        made already (the client's retries of a reserved one)."""
        self._day_row(day, model)
        with self.database.session() as session:
            session.exec(
                update(LlmDayRow)  # type: ignore[call-overload]
                .where(col(LlmDayRow.day) == day, col(LlmDayRow.model) == model)
                .values(requests=LlmDayRow.requests + requests)
            )
            session.commit()

    def record(
        self,
        day: date,
        model: str,
        *,
        written: int = 0,
        cached: int = 0,
        over_budget: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        failures: Mapping[str, int] | None = None,
        last_error: str | None = None,
        now: datetime | None = None,
    ) -> None:
        """Add a run's figures to the day's (each counter added in the database, so that
        runs at once lose none)."""
        self._day_row(day, model)
        failed = sum((failures or {}).values())
        where = (col(LlmDayRow.day) == day, col(LlmDayRow.model) == model)
        with self.database.session() as session:
            values: dict[str, object] = {
                "written": LlmDayRow.written + written,
                "cached": LlmDayRow.cached + cached,
                "over_budget": LlmDayRow.over_budget + over_budget,
                "prompt_tokens": LlmDayRow.prompt_tokens + prompt_tokens,
                "completion_tokens": LlmDayRow.completion_tokens + completion_tokens,
                "failed": LlmDayRow.failed + failed,
            }
            if last_error is not None:
                values["last_error"] = last_error[:500]
                values["last_error_at"] = now
            session.exec(update(LlmDayRow).where(*where).values(**values))  # type: ignore[call-overload]
            if failures:
                # The reasons' counts: read under the row's lock (PostgreSQL; SQLite writes
                # one at a time) and written back.
                row = session.exec(select(LlmDayRow).where(*where).with_for_update()).one()
                counts = json.loads(row.failures or "{}")
                for reason, count in failures.items():
                    counts[reason] = counts.get(reason, 0) + count
                row.failures = json.dumps(counts, sort_keys=True)
                session.add(row)
            session.commit()

    def day(self, day: date) -> list[ModelDay]:
        """Each model's use on `day`."""
        with self.database.session() as session:
            rows = session.exec(
                select(LlmDayRow).where(LlmDayRow.day == day).order_by(col(LlmDayRow.model))
            ).all()
            return [_model_day(row) for row in rows]

    def count(self) -> int:
        """How many texts are stored."""
        with self.database.session() as session:
            return len(session.exec(select(PaperTextRow.paper_id)).all())

    def _day_row(self, day: date, model: str) -> None:
        with self.database.session() as session:
            if session.get(LlmDayRow, (day, model)) is not None:
                return
            session.add(LlmDayRow(day=day, model=model))
            try:
                session.commit()
            except IntegrityError:  # another process made it first
                session.rollback()


def _model_day(row: LlmDayRow) -> ModelDay:
    return ModelDay(
        day=row.day,
        model=row.model,
        requests=row.requests,
        written=row.written,
        cached=row.cached,
        failed=row.failed,
        over_budget=row.over_budget,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        failures=json.loads(row.failures or "{}"),
        last_error=row.last_error,
        last_error_at=aware(row.last_error_at) if row.last_error_at else None,
    )
