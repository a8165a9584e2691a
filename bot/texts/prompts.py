"""What paperbell asks a model to write about a paper, one text per request: the paper's
summary (in English), its title translated, its abstract (or its summary) translated.

Owns the requests' keys (a text is written once per paper version, kind, language and model,
and stored under that key) and their prompts: plain text in, plain text out, because small
local models break JSON. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from bot.core.languages import ENGLISH, language_name
from bot.core.models import Paper

__all__ = [
    "HF_SUMMARY",
    "MIN_ABSTRACT",
    "TextKey",
    "TextRequest",
    "messages",
    "summary_request",
    "translation_request",
]

TextKey = tuple[str, int, str, str]  # paper id, version, kind, language: a text's key
# The kinds a request may be: the three of `bot.core.models.TEXT_KINDS`, and the translation
# of Hugging Face's AI summary (shown when no model summary is there).
HF_SUMMARY = "hf-summary"
# An abstract shorter than this is no source for a summary (a feed that gives none, or a
# line): the digest shows it as it is.
MIN_ABSTRACT = 100
# The longest source text sent (an abstract is at most 1,920 characters on arXiv; other
# feeds may carry whole articles): past it, the text is cut at a word.
MAX_SOURCE = 4000


@dataclass(frozen=True, slots=True)
class TextRequest:
    """One text to write: `kind` ("summary", "title", "abstract", HF_SUMMARY) of one paper
    version, in `language` ("en" for the English summary), from `source`."""

    paper_id: str
    version: int
    kind: str
    language: str
    source: str  # what the model reads: the title and abstract, or the text to translate
    title: str = ""  # the paper's title, for people (logs, `paperbell summarize`)

    @property
    def key(self) -> TextKey:
        return (self.paper_id, self.version, self.kind, self.language)

    @property
    def source_hash(self) -> str:
        """What the text is written from, as a short digest: a text stored from another
        source (a summary written again, an abstract fixed in place) is not this one's."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def translation(self) -> bool:
        return self.kind != "summary" or self.language != ENGLISH

    def describe(self) -> str:
        """For people: `2411.17700v2 summary`, `2411.17700v2 title in zh`."""
        what = self.kind if self.kind != HF_SUMMARY else "Hugging Face summary"
        where = "" if not self.translation else f" in {self.language}"
        return f"{self.paper_id}v{self.version} {what}{where}"


def summary_request(paper: Paper) -> TextRequest | None:
    """The English summary of a paper, from its title and abstract; None when its abstract
    is too short to summarise."""
    if len(" ".join(paper.abstract.split())) < MIN_ABSTRACT:
        return None
    source = f"Title: {_clip(paper.title)}\n\nAbstract: {_clip(paper.abstract)}"
    return TextRequest(paper.id, paper.version, "summary", ENGLISH, source, paper.title)


def translation_request(paper: Paper, kind: str, language: str, text: str) -> TextRequest | None:
    """`text` (the paper's title, abstract or a summary of it) in `language`; None when
    there is nothing to translate."""
    if not text.strip():
        return None
    return TextRequest(paper.id, paper.version, kind, language, _clip(text), paper.title)


def messages(request: TextRequest) -> list[dict[str, str]]:
    """The chat messages that ask for `request`'s text: a system message that says what to
    write and how, then the source as the user's message."""
    if not request.translation:
        system = (
            "You write the summaries in a daily digest of new research papers. Read the "
            "paper's title and abstract and answer with one paragraph of two or three plain "
            "sentences, about 300 characters (at most 330, about 50 words), in English, "
            "saying what the paper does and what it finds. Answer with the summary only: no "
            "title, no preamble, no lists, no Markdown, no links, no notes."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": request.source}]
    name = language_name(request.language)
    what = "title" if request.kind == "title" else "paragraph"
    system = (
        f"You translate research papers' texts from English into {name} (BCP 47: "
        f"{request.language}) for a digest of new papers. Translate the {what} the user "
        f"sends into {name}, faithfully and completely, as a scientist writing in {name} "
        "would: keep names, acronyms, code and math as they are. Answer with the "
        f"translation only, in {name}: no quotes, no preamble, no notes, no Markdown, no "
        "links, no transliteration."
    )
    if request.kind == "title":
        system += " The translation is one line."
    return [{"role": "system", "content": system}, {"role": "user", "content": request.source}]


def _clip(text: str) -> str:
    """The text, tidied, at most MAX_SOURCE characters (cut at a word)."""
    text = " ".join(text.split())
    if len(text) <= MAX_SOURCE:
        return text
    cut = text[:MAX_SOURCE]
    space = cut.rfind(" ")
    return (cut[:space] if space > MAX_SOURCE // 2 else cut) + " …"
