"""What subscribers said about papers (liked, disliked), the vectors of texts per embedding
model, and each subscriber's fitted ranking model.

`store.feedback`, `store.vectors`, `store.ranking_models`. Verdicts leave as
`bot.core.models.Feedback`; a vector and a fitted model as bytes (their format is bot.similar's,
not the store's). One verdict per paper per subscriber: a later one replaces it, and a
verdict given by hand keeps the one it replaced, which its Undo (`take_back`) puts back. The
config file's verdicts (its `like`/`dislike` lists and `like_file`) are replaced whole each
time it is read, and never over a verdict given by hand on the same paper.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.core.models import DECLARED_VIA, Feedback, FeedbackVia, Verdict
from bot.store.database import Repository, aware
from bot.store.tables import FeedbackRow, RankingModelRow, TextVectorRow

# Keys asked for in one query at most (a bound on the statement's size).
CHUNK = 500


def _feedback(row: FeedbackRow) -> Feedback:
    return Feedback(
        key=row.paper_key,
        verdict=cast(Verdict, row.verdict),
        via=cast(FeedbackVia, row.via),
        title=row.title,
        text=row.text,
        created=aware(row.created_at),
    )


def _remember(row: FeedbackRow) -> None:
    """Keep the row's verdict as the one a new verdict replaces (for Undo)."""
    row.earlier_verdict, row.earlier_via, row.earlier_at = row.verdict, row.via, row.created_at


def _forget_earlier(row: FeedbackRow) -> None:
    row.earlier_verdict = row.earlier_via = row.earlier_at = None


class FeedbackStore(Repository):
    """Each subscriber's verdicts on papers (`store.feedback`)."""

    def set(self, subscriber_id: int, feedback: Feedback, *, now: datetime | None = None) -> bool:
        """Record a verdict (replacing the subscriber's earlier one on that paper); False when
        it was already recorded as it is (a second click changes nothing). Two clicks at
        once: the second finds the first's row and is a repeat, or replaces it."""
        try:
            return self._set(subscriber_id, feedback, now=now)
        except IntegrityError:  # another request inserted it between our read and write
            return self._set(subscriber_id, feedback, now=now)

    def _set(self, subscriber_id: int, feedback: Feedback, *, now: datetime | None) -> bool:
        by_hand = feedback.via not in DECLARED_VIA
        with self.database.session() as session:
            row = self._row(session, subscriber_id, feedback.key)
            if row is not None and row.verdict == feedback.verdict:
                changed = False
                if row.via in DECLARED_VIA and by_hand:
                    _remember(row)  # Undo gives the verdict back to the file
                    row.via = feedback.via  # given by hand now: the file no longer owns it
                    changed = True
                if (feedback.text and not row.text) or (feedback.title and not row.title):
                    row.title = row.title or feedback.title  # known now: kept, no new verdict
                    row.text = row.text or feedback.text
                    changed = True
                if changed:
                    session.add(row)
                    session.commit()
                return False
            created = feedback.created or now
            if created is None:
                raise ValueError("a verdict needs a time (feedback.created or now)")
            if row is None:
                row = FeedbackRow(
                    subscriber_id=subscriber_id,
                    paper_key=feedback.key,
                    verdict=feedback.verdict,
                    via=feedback.via,
                    created_at=created,
                )
            elif by_hand:
                _remember(row)
            else:
                _forget_earlier(row)
            row.verdict = feedback.verdict
            row.via = feedback.via
            row.title = feedback.title or row.title
            row.text = feedback.text or row.text
            row.created_at = created
            session.add(row)
            session.commit()
            return True

    def take_back(self, subscriber_id: int, key: str, verdict: Verdict) -> bool:
        """Undo `verdict` on a paper, if it is still the one recorded: the verdict it
        replaced (a click before it, the config file's) stands again, as it was; with none,
        the paper has no verdict. Whether one was taken back."""
        with self.database.session() as session:
            row = self._row(session, subscriber_id, key)
            if row is None or row.verdict != verdict:
                return False
            if row.earlier_verdict is None or row.earlier_via is None:
                session.delete(row)
            else:
                row.verdict, row.via = row.earlier_verdict, row.earlier_via
                row.created_at = row.earlier_at or row.created_at
                _forget_earlier(row)
                session.add(row)
            session.commit()
            return True

    def remove(self, subscriber_id: int, key: str) -> bool:
        """Forget the subscriber's verdict on a paper; False when there was none."""
        with self.database.session() as session:
            row = self._row(session, subscriber_id, key)
            if row is None:
                return False
            session.delete(row)
            session.commit()
            return True

    def of(self, subscriber_id: int) -> list[Feedback]:
        """A subscriber's verdicts, oldest first."""
        return self.of_all([subscriber_id]).get(subscriber_id, [])

    def of_all(self, ids: Iterable[int] | None = None) -> dict[int, list[Feedback]]:
        """The verdicts of the subscribers `ids` (None: everyone's), oldest first each; a
        subscriber with none is absent."""
        found: dict[int, list[Feedback]] = {}
        with self.database.session() as session:
            query = select(FeedbackRow).order_by(col(FeedbackRow.created_at), col(FeedbackRow.id))
            if ids is None:
                rows: Iterable[FeedbackRow] = session.exec(query)
            else:
                wanted = sorted(set(ids))
                rows = [
                    row
                    for start in range(0, len(wanted), CHUNK)
                    for row in session.exec(
                        query.where(
                            col(FeedbackRow.subscriber_id).in_(wanted[start : start + CHUNK])
                        )
                    )
                ]
                rows = sorted(rows, key=lambda r: (r.created_at, r.id or 0))
            for row in rows:
                found.setdefault(row.subscriber_id, []).append(_feedback(row))
        return found

    def replace_via(
        self,
        subscriber_id: int,
        via: FeedbackVia,
        feedback: Sequence[Feedback],
        *,
        now: datetime,
    ) -> None:
        """Make the verdicts that came from `via` (the config's lists, a library file) be
        `feedback`, whole: the ones no longer there go, a verdict given by hand on the same
        paper stays as it is, and one that came from elsewhere in the file stays too."""
        wanted = {f.key: f for f in feedback}
        with self.database.session() as session:
            rows = session.exec(
                select(FeedbackRow).where(FeedbackRow.subscriber_id == subscriber_id)
            ).all()
            by_key = {r.paper_key: r for r in rows}
            for row in rows:
                if row.via == via and row.paper_key not in wanted:
                    session.delete(row)
                elif row.earlier_via == via and row.via not in DECLARED_VIA:
                    # Given by hand over the file's: Undo puts back what the file says now.
                    if row.paper_key in wanted:
                        row.earlier_verdict = wanted[row.paper_key].verdict
                    else:
                        _forget_earlier(row)
                    session.add(row)
            for key, item in wanted.items():
                found = by_key.get(key)
                if found is not None and found.via not in DECLARED_VIA:
                    continue  # given by hand: it wins over the file
                if found is not None and found.via != via:
                    found.via = via  # moved from the library file to the list, or back
                new = found or FeedbackRow(
                    subscriber_id=subscriber_id,
                    paper_key=key,
                    verdict=item.verdict,
                    via=via,
                    created_at=item.created or now,
                )
                new.verdict = item.verdict
                new.title = item.title or new.title
                new.text = item.text or new.text
                if item.created is not None:
                    new.created_at = item.created
                session.add(new)
            session.commit()

    def forget(self, subscriber_id: int) -> None:
        """Forget every verdict of a subscriber (it is deleted), and its fitted model."""
        with self.database.session() as session:
            for model in (FeedbackRow, RankingModelRow):
                for row in session.exec(select(model).where(model.subscriber_id == subscriber_id)):
                    session.delete(row)
            session.commit()

    def any(self) -> bool:
        """Whether anyone has a verdict (one row read)."""
        with self.database.session() as session:
            return session.exec(select(FeedbackRow.id).limit(1)).first() is not None

    def counts(self) -> dict[str, int]:
        """How many verdicts there are of each kind, everyone's ({"like": 12, ...})."""
        counts = dict.fromkeys(("like", "dislike"), 0)
        with self.database.session() as session:
            for verdict in session.exec(select(FeedbackRow.verdict)):
                counts[verdict] = counts.get(verdict, 0) + 1
        return counts

    @staticmethod
    def _row(session: Session, subscriber_id: int, key: str) -> FeedbackRow | None:
        return session.exec(
            select(FeedbackRow).where(
                FeedbackRow.subscriber_id == subscriber_id, FeedbackRow.paper_key == key
            )
        ).first()


class Vectors(Repository):
    """Texts' vectors per embedding model, by the text's hash (`store.vectors`)."""

    def get(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """The stored vectors by `model` of the texts `hashes` (the others are absent)."""
        wanted = sorted(set(hashes))
        found: dict[str, bytes] = {}
        with self.database.session() as session:
            for start in range(0, len(wanted), CHUNK):
                query = select(TextVectorRow).where(
                    TextVectorRow.model == model,
                    col(TextVectorRow.text_hash).in_(wanted[start : start + CHUNK]),
                )
                for row in session.exec(query):
                    found[row.text_hash] = row.vector
        return found

    def put(self, model: str, vectors: Mapping[str, bytes], *, now: datetime) -> None:
        """Keep vectors by `model` (a text already there keeps the one stored first, also
        when another process stored it at the same moment)."""
        for _ in range(3):
            try:
                return self._put(model, vectors, now=now)
            except IntegrityError:  # another run stored some of them meanwhile: again
                continue
        self._put(model, vectors, now=now)

    def _put(self, model: str, vectors: Mapping[str, bytes], *, now: datetime) -> None:
        if not vectors:
            return
        have = self.get(model, vectors)
        with self.database.session() as session:
            for text_hash, vector in vectors.items():
                if text_hash not in have:
                    session.add(
                        TextVectorRow(
                            model=model, text_hash=text_hash, vector=vector, created_at=now
                        )
                    )
            session.commit()

    def forget(self, model: str) -> None:
        """Forget every vector of `model` (the model behind its name changed)."""
        with self.database.session() as session:
            for row in session.exec(select(TextVectorRow).where(TextVectorRow.model == model)):
                session.delete(row)
            session.commit()

    def count(self, model: str | None = None) -> int:
        with self.database.session() as session:
            query = select(TextVectorRow.text_hash)
            if model is not None:
                query = query.where(TextVectorRow.model == model)
            return len(session.exec(query).all())


@dataclass(frozen=True, slots=True)
class RankingModel:
    """A subscriber's fitted ranking model: what kind (the vectoriser and model it is for),
    the hash of the feedback it was fitted on, its bytes (bot.similar's format)."""

    subscriber_id: int
    kind: str
    feedback_hash: str
    data: bytes
    fitted: datetime


class RankingModels(Repository):
    """Each subscriber's fitted ranking model (`store.ranking_models`)."""

    def get(self, subscriber_ids: Iterable[int]) -> dict[int, RankingModel]:
        wanted = sorted(set(subscriber_ids))
        found: dict[int, RankingModel] = {}
        with self.database.session() as session:
            for start in range(0, len(wanted), CHUNK):
                query = select(RankingModelRow).where(
                    col(RankingModelRow.subscriber_id).in_(wanted[start : start + CHUNK])
                )
                for row in session.exec(query):
                    found[row.subscriber_id] = RankingModel(
                        subscriber_id=row.subscriber_id,
                        kind=row.kind,
                        feedback_hash=row.feedback_hash,
                        data=row.data,
                        fitted=aware(row.fitted_at),
                    )
        return found

    def put(self, model: RankingModel) -> None:
        """Keep a subscriber's model (replacing the one before)."""
        with self.database.session() as session:
            row = session.get(RankingModelRow, model.subscriber_id) or RankingModelRow(
                subscriber_id=model.subscriber_id,
                kind=model.kind,
                feedback_hash=model.feedback_hash,
                data=model.data,
                fitted_at=model.fitted,
            )
            row.kind = model.kind
            row.feedback_hash = model.feedback_hash
            row.data = model.data
            row.fitted_at = model.fitted
            session.add(row)
            session.commit()
