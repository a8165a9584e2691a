"""Summaries and translations for the digests going out: delivery's step between building
the digests and rendering them.

Owns which digests want texts (those whose subscribers asked: `summaries`, `language`)
and how the texts go into them; `bot.texts.writer` writes them, once each, read from the
store when a model already wrote it (`store.texts`), asked of the model the wiring made
(`TextModel`) otherwise. What could not be written is shown as the abstract, said in the
digest (`Digest.texts_note`) and counted (`TextsRun`, `status`, /metrics). A preview
(`ask=False`) reads the store and asks nothing.

Without [llm], a summary is Hugging Face's AI summary where the paper has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from bot.core.languages import language_name, usable_tag
from bot.core.models import Digest, Subscriber
from bot.render.words import words_for
from bot.store import Store
from bot.texts.client import TextModel
from bot.texts.writer import DigestTexts, TextsRun, known_summaries, write_for

__all__ = ["TextsRun", "known_summaries", "write_texts"]


async def write_texts(
    llm: TextModel | None,
    store: Store,
    digests: Sequence[Digest],
    *,
    now: datetime,
    ask: bool = True,
) -> tuple[list[Digest], TextsRun]:
    """The digests, each with the texts its subscriber asked for (`Digest.texts`) and a
    note when some are missing; and what the run came to. `ask`: ask the model for the
    texts not stored yet (a preview does not). `llm`: the model [llm] sets up, if any."""
    wanting = [d for d in digests if d.subscriber.wants_texts and d.items]
    run = TextsRun(model=llm.model if llm else None)
    if not wanting:
        return list(digests), run
    shown = await write_for(llm, store.texts, wanting, run, now=now, ask=ask)
    if shown is None:
        return list(digests), run
    done = {
        id(d): replace(d, texts=s.texts, texts_note=_note(d.subscriber, s))
        for d, s in zip(wanting, shown, strict=True)
    }
    return [done.get(id(d), d) for d in digests], run


def _note(sub: Subscriber, shown: DigestTexts) -> str | None:
    """What the digest says of its missing texts, in its reader's words; None: none missing."""
    language = usable_tag(sub.language)
    # In the reader's words (bot.render.words): the note is shown as it is written here.
    words = words_for(sub.language)
    notes = []
    if shown.no_summary:
        notes.append(
            words.ngettext(
                "%(count)s summary could not be written this time: that paper shows its abstract.",
                "%(count)s summaries could not be written this time: those papers show their "
                "abstracts.",
                shown.no_summary,
            )
        )
    if shown.no_translation and language is not None:
        name = language_name(language, words.tag)
        notes.append(
            words.ngettext(
                "The %(language)s translation is missing for %(count)s paper.",
                "The %(language)s translation is missing for %(count)s papers.",
                shown.no_translation,
                language=name,
            )
        )
    return " ".join(notes) or None
