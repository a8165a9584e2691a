"""One run's summaries and translations, written: each text asked for once however many
digests show it, read from the `TextShelf` (the store's texts) when a model already wrote
it, asked of the model (`TextModel`) otherwise, within the day's budget, `concurrency`
requests at a time and one deadline for the whole run. What could not be written is
counted (`TextsRun`) and asked for again at the next run. A preview (`ask=False`) reads
the shelf and asks nothing.

Which digests want texts, and how the texts and their notes go into the digests, are the
caller's (`bot.pipeline.texts`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Protocol

from bot.core.checks import terminal_safe
from bot.core.languages import ENGLISH, usable_tag
from bot.core.models import HUGGING_FACE, Digest, Paper, PaperTexts
from bot.core.plurals import plural
from bot.core.redact import redact_shapes
from bot.texts.answers import SUMMARY_SHOWN, plain_text, shown_summary
from bot.texts.client import FATAL, TextFailure, TextModel
from bot.texts.prompts import HF_SUMMARY, TextKey, TextRequest, summary_request, translation_request

__all__ = [
    "DigestTexts",
    "PaperKey",
    "TextShelf",
    "TextsRun",
    "WrittenTexts",
    "known_summaries",
    "shown_source",
    "write_for",
]

log = logging.getLogger(__name__)

PaperKey = tuple[str, int]  # id, version


class TextShelf(Protocol):
    """Where written texts are kept, and each day's use of each model (`store.texts`)."""

    def get(self, wanted: Iterable[tuple[TextKey, str]], model: str) -> dict[TextKey, str]: ...

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
    ) -> str: ...

    def reserve(self, day: date, model: str, limit: int | None) -> bool: ...

    def charge(self, day: date, model: str, requests: int) -> None: ...

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
    ) -> None: ...


@dataclass
class TextsRun:
    """What one run's summaries and translations came to."""

    model: str | None = None  # None: no [llm]
    wanted: int = 0  # distinct texts the run's digests needed from the model
    cached: int = 0  # of them, already written (read from the store)
    written: int = 0  # written by the model in this run
    not_asked: int = 0  # a preview's: not written yet, and a preview asks nothing
    over_budget: int = 0  # not asked: the day's max_requests_per_day was reached
    failed: Counter[str] = field(default_factory=Counter)  # reason -> count
    hugging_face: int = 0  # papers shown with Hugging Face's summary
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_error: str | None = None

    @property
    def missing(self) -> int:
        return sum(self.failed.values()) + self.over_budget

    def line(self) -> str | None:
        """The run's figures for people, or None when no digest wanted any text."""
        if self.model is None:
            if not self.hugging_face:
                return None
            return f"summaries: {self.hugging_face} from Hugging Face (no [llm] is set up)"
        if not self.wanted:
            return None
        parts = [f"{self.written} written", f"{self.cached} already stored"]
        if self.not_asked:
            parts.append(f"{self.not_asked} not written yet (a preview asks no model)")
        if self.over_budget:
            parts.append(f"{self.over_budget} over today's budget")
        if self.failed:
            reasons = ", ".join(f"{why}: {n}" for why, n in self.failed.most_common())
            parts.append(f"{sum(self.failed.values())} failed ({reasons})")
        tokens = self.prompt_tokens + self.completion_tokens
        if tokens:
            parts.append(plural(tokens, "token"))
        line = f"summaries and translations ({self.model}): " + ", ".join(parts)
        if self.last_error and self.failed:
            line += f"; last error: {self.last_error}"
        return terminal_safe(line)  # an endpoint's words: printed and logged as they are


@dataclass(frozen=True)
class DigestTexts:
    """What one digest shows: each paper's texts (by paper id), and how many summaries and
    translations could not be written (for the note that says so)."""

    texts: dict[str, PaperTexts]
    no_summary: int
    no_translation: int


@dataclass(frozen=True)
class WrittenTexts:
    """What a run wrote or found: each paper's summary and who wrote it, and the
    translations by key."""

    summaries: dict[PaperKey, tuple[str, str]]
    translations: dict[TextKey, str]


async def write_for(
    llm: TextModel | None,
    shelf: TextShelf,
    digests: Sequence[Digest],
    run: TextsRun,
    *,
    now: datetime,
    ask: bool = True,
) -> list[DigestTexts] | None:
    """What each of `digests` (those that want texts) shows, in their order, counted in
    `run`; None when the shelf failed (the digests go out as they are). `ask`: ask the
    model for the texts not kept yet (a preview does not). `llm`: the model [llm] sets up,
    if any."""
    writer = _Writer(llm, shelf, run, now=now, ask=ask)
    try:
        summaries = await writer.summaries(digests)
        translations = await writer.translations(digests, summaries)
    except Exception as exc:  # the shelf failed: the digests go out as they are
        log.exception("summaries and translations: not written")
        run.failed["store"] += 1
        run.last_error = f"store: {type(exc).__name__}: {exc}"[:300]
        return None
    finally:
        await writer.close()
    for papers in summaries.values():
        if papers[1] == HUGGING_FACE:
            run.hugging_face += 1
    written = WrittenTexts(summaries, translations)
    return [DigestTexts(*_shown_texts(d, written, run.model)) for d in digests]


class _Writer:
    """One run's texts: read from the store, else asked of the model, once each."""

    def __init__(
        self, llm: TextModel | None, shelf: TextShelf, run: TextsRun, *, now: datetime, ask: bool
    ):
        self.llm = llm
        self.shelf = shelf
        self.run = run
        self.now = now
        self.ask = ask
        self.client = llm.open() if ask and llm is not None else None
        # A failure every further request would meet (reason, detail): nothing more is asked.
        self.fatal: tuple[str, str] | None = None
        if self.llm is not None and self.llm.api_key_env and not self.llm.api_key:
            self.fatal = ("no key", f"[llm] api_key_env names {self.llm.api_key_env}, not set")
            self.run.last_error = f"no key: {self.fatal[1]}"
        self.deadline: float | None = None
        self.limit = asyncio.Semaphore(self.llm.concurrency if self.llm else 1)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.llm is not None and self.run.wanted:
            try:
                self._record()
            except Exception:  # the day's figures are lost, not the digests
                log.exception("summaries and translations: today's figures not recorded")

    def _record(self) -> None:
        assert self.llm is not None
        self.shelf.record(
            self.now.date(),
            self.llm.model,
            written=self.run.written,
            cached=self.run.cached,
            over_budget=self.run.over_budget,
            prompt_tokens=self.run.prompt_tokens,
            completion_tokens=self.run.completion_tokens,
            failures=dict(self.run.failed),
            last_error=self.run.last_error,
            now=self.now,
        )

    async def summaries(self, digests: Sequence[Digest]) -> dict[PaperKey, tuple[str, str]]:
        """Each paper's summary and who wrote it, for the digests that show summaries: the
        model's, else Hugging Face's (when the paper has one)."""
        papers = {
            (p.id, p.version): p
            for d in digests
            if d.subscriber.summaries
            for p in (item.paper for item in d.items)
        }
        written: dict[TextKey, str] = {}
        if self.llm is not None:
            written = await self.resolve([summary_request(p) for p in papers.values()])
        return known_summaries(papers.values(), written, self.llm.model if self.llm else None)

    async def translations(
        self, digests: Sequence[Digest], summaries: dict[PaperKey, tuple[str, str]]
    ) -> dict[TextKey, str]:
        """The translations the digests with a language show: each paper's title, and the
        text shown in place of its abstract (its summary, else its abstract)."""
        if self.llm is None:
            return {}
        requests: list[TextRequest | None] = []
        for digest in digests:
            language = usable_tag(digest.subscriber.language)
            if language is None:
                continue
            for paper in (item.paper for item in digest.items):
                requests.append(translation_request(paper, "title", language, paper.title))
                kind, text = shown_source(paper, digest, summaries)
                requests.append(translation_request(paper, kind, language, text))
        return await self.resolve(requests)

    async def resolve(self, requests: Sequence[TextRequest | None]) -> dict[TextKey, str]:
        """The texts of `requests` (each once; None: nothing to ask): stored ones read, the
        others asked for."""
        assert self.llm is not None
        unique = list({r.key: r for r in requests if r is not None}.values())
        if not unique:
            return {}
        found = self.shelf.get(((r.key, r.source_hash) for r in unique), self.llm.model)
        self.run.wanted += len(unique)
        self.run.cached += len(found)
        missing = [r for r in unique if r.key not in found]
        if not missing:
            return found
        if not self.ask:
            self.run.not_asked += len(missing)
            return found
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + self.llm.deadline_seconds
        answers = await asyncio.gather(*(self._ask(r) for r in missing), return_exceptions=True)
        for request, text in zip(missing, answers, strict=True):
            if isinstance(text, str) and text:
                found[request.key] = text
            elif isinstance(text, BaseException):  # not the model's: the store's, say
                self._failed(request, "error", f"{type(text).__name__}: {text}"[:300])
        return found

    async def _ask(self, request: TextRequest) -> str | None:
        """One text asked of the model and stored; None (counted, logged) when it failed."""
        assert self.llm is not None and self.client is not None and self.deadline is not None
        async with self.limit:
            if self.fatal is not None:
                self._failed(request, *self.fatal, asked=False)
                return None
            remaining = self.deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                self._failed(request, "deadline", "the run's deadline_seconds passed")
                return None
            budget = self.llm.max_requests_per_day
            try:
                allowed = self.shelf.reserve(self.now.date(), self.llm.model, budget)
            except Exception as exc:  # the budget cannot be counted: nothing is asked
                self.fatal = ("store", f"{type(exc).__name__}: {exc}"[:300])
                self._failed(request, *self.fatal)
                return None
            if not allowed:
                self.run.over_budget += 1
                return None
            try:
                async with asyncio.timeout(remaining):
                    written = await self.client.write(
                        request, timeout=min(self.llm.timeout, remaining)
                    )
            except TimeoutError:
                self._failed(request, "deadline", "the run's deadline_seconds passed")
                return None
            except TextFailure as exc:
                self._charge(exc.calls)
                if exc.reason in FATAL:
                    self.fatal = (exc.reason, exc.detail)
                self._failed(request, exc.reason, exc.detail)
                return None
            except Exception as exc:  # one odd answer never stops a digest
                log.exception("%s: not written", request.describe())
                self._failed(request, "error", f"{type(exc).__name__}: {exc}"[:300])
                return None
        self._charge(written.calls)
        self.run.prompt_tokens += written.prompt_tokens
        self.run.completion_tokens += written.completion_tokens
        try:
            kept = self.shelf.put(
                request.key,
                self.llm.model,
                written.text,
                source_hash=request.source_hash,
                now=self.now,
                prompt_tokens=written.prompt_tokens,
                completion_tokens=written.completion_tokens,
            )
        except Exception as exc:  # not kept: not shown either (asked again next run)
            log.exception("%s: written, not stored", request.describe())
            self._failed(request, "store", f"{type(exc).__name__}: {exc}"[:300])
            return None
        self.run.written += 1
        # Another run may have kept its own at the same moment: every digest shows that one.
        return kept

    def _charge(self, calls: int) -> None:
        """Count the calls a text took beyond the one reserved (the client's retries): each
        cost the endpoint a request, so each costs the budget."""
        assert self.llm is not None
        if calls <= 1:
            return
        try:
            self.shelf.charge(self.now.date(), self.llm.model, calls - 1)
        except Exception:  # the budget is then short of them; the text is not lost
            log.exception("summaries and translations: %d retries not counted", calls - 1)

    def _failed(
        self, request: TextRequest, reason: str, detail: str, *, asked: bool = True
    ) -> None:
        """Count a text not written; the first of each reason in a run is logged, and what
        the endpoint said is the run's last error (not a request skipped after it)."""
        first = reason not in self.run.failed
        self.run.failed[reason] += 1
        if not asked:
            return
        said = redact_shapes(f"{reason}: {detail}" if detail else reason)
        if first:
            log.warning("%s: not written (%s)", request.describe(), terminal_safe(said))
        self.run.last_error = said


def known_summaries(
    papers: Iterable[Paper], written: Mapping[TextKey, str], model: str | None
) -> dict[PaperKey, tuple[str, str]]:
    """Each paper's summary and who wrote it, of those there are: `model`'s among the texts
    `written` (read from the store), else Hugging Face's (theirs to write: made plain
    text, never markup). Asks nothing."""
    found: dict[PaperKey, tuple[str, str]] = {}
    for paper in papers:
        text = written.get((paper.id, paper.version, "summary", ENGLISH))
        if text is not None and model is not None:
            found[(paper.id, paper.version)] = (text, model)
        elif paper.ai_summary and (hf := plain_text(paper.ai_summary)):
            found[(paper.id, paper.version)] = (hf, HUGGING_FACE)
    return found


def shown_source(
    paper: Paper, digest: Digest, summaries: dict[PaperKey, tuple[str, str]]
) -> tuple[str, str]:
    """What a digest shows in place of the paper's abstract, as (kind, English text): its
    summary (the model's, or Hugging Face's), else the abstract."""
    summary = summaries.get((paper.id, paper.version)) if digest.subscriber.summaries else None
    if summary is None:
        return "abstract", paper.abstract
    text, by = summary
    return ("summary" if by != HUGGING_FACE else HF_SUMMARY), text


def _shown_texts(
    digest: Digest, written: WrittenTexts, model: str | None
) -> tuple[dict[str, PaperTexts], int, int]:
    """Each paper's texts as the digest shows them, and how many of its summaries and
    translations are missing (`model`: the run's; None: no [llm])."""
    summaries, translations = written.summaries, written.translations
    sub = digest.subscriber
    language = usable_tag(sub.language)
    texts: dict[str, PaperTexts] = {}
    no_summary = 0
    no_translation = 0
    for paper in (item.paper for item in digest.items):
        summary = summaries.get((paper.id, paper.version)) if sub.summaries else None
        asked = summary_request(paper) is not None  # too short an abstract: none asked
        if sub.summaries and summary is None and model is not None and asked:
            no_summary += 1
        title = text = None
        if language is not None and model is not None:
            kind, english = shown_source(paper, digest, summaries)
            title = translations.get((paper.id, paper.version, "title", language))
            text = translations.get((paper.id, paper.version, kind, language))
            if text is not None and kind != "abstract":
                text = _shown_share(text, english)
            if title is None or (text is None and english.strip()):
                no_translation += 1
        texts[paper.id] = PaperTexts(
            summary=shown_summary(summary[0]) if summary else None,
            summary_by=summary[1] if summary else None,
            language=language,
            title=title,
            text=text,
        )
    return texts, no_summary, no_translation


def _shown_share(translation: str, english: str) -> str:
    """A summary's translation cut as its English is cut in the digest (the same share)."""
    shown = shown_summary(english)
    if len(shown) >= len(" ".join(english.split())):
        return translation
    limit = max(40, round(len(translation) * SUMMARY_SHOWN / max(1, len(english))))
    return shown_summary(translation, limit)
