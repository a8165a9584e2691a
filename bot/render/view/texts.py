"""What a digest shows of the texts models wrote of its papers (`Digest.texts`), and what it
says of itself in words.

Owns the subscriber's summaries and translations (`TextsView`, `texts_view`; `with_texts`
puts a paper's into its view), the layout they give the digest (`layout_of`), how a model's
text is shown (`model_text`) and a translation cut where its English is (`cut_like`), and
the digest's lines: who wrote its summaries (`summaries_note`: once, at the top, not on
every paper), the papers it leaves out (`shown_note`), its ranking (`ranking_note`), the
texts that could not be written (`texts_note`) and why a similar paper is there
(`similar_marker`).

Pure: no I/O, no clock; it escapes nothing. A model's texts are untrusted plain text: here
they lose control and bidi-override characters and are capped (`model_text`); they never
become links, not even once their TeX is shown as letters (`written_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.core.languages import (
    LanguageError,
    language_name,
    language_script,
    standard_tag,
    usable_tag,
)
from bot.core.models import HUGGING_FACE, Digest, Paper, PaperTexts, Subscriber
from bot.render.text import Segment, clip, letters, plain_text, tidy
from bot.render.view.models import BRIEF_CHARS, ItemView, Layout, TextLength
from bot.render.words import Words, words_for
from bot.texts.answers import without_links

# The most shown of a model's texts, in characters. The pipeline cuts a summary near 300
# characters, at most 330 (`bot.texts.answers.shown_summary`): a longer one is cut here
# too. The others only bound what a runaway answer can cost.
SUMMARY_CHARS = 330
SUMMARY_BY_CHARS = 80  # a model's name
NOTE_CHARS = 500  # Digest.texts_note
SIMILAR_TITLE_CHARS = 70  # the liked paper's title in a similar paper's "like “…”"
TRANSLATED_TITLE_CHARS = 500
TRANSLATED_TEXT_CHARS = 4000
# A translation of a short abstract is cut where the English is: at the same share of its
# length, times this.
TRANSLATION_MARGIN = 1.0
# Scripts written right to left: their translations are marked dir="rtl".
RTL_SCRIPTS = frozenset({"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Rohg"})


@dataclass(frozen=True)
class TextsView:
    """What a digest shows of its `Digest.texts`, for its subscriber: summaries (when asked
    for) and translations into `language` (when asked for; None: none)."""

    texts: Mapping[str, PaperTexts]
    summaries: bool = False
    language: str | None = None  # the subscriber's tag

    def of(self, paper: Paper) -> PaperTexts | None:
        return self.texts.get(paper.id)

    @property
    def language_name(self) -> str | None:
        return language_name(self.language) if self.language else None

    @property
    def language_note(self) -> str | None:
        """The line that says the translations are a machine's: `With machine translations
        into Chinese.`; None without translations."""
        return self.language_note_in(words_for(None))

    def language_note_in(self, words: Words) -> str | None:
        """`language_note` in the reader's words: `中文翻译由机器生成。`."""
        if not self.language:
            return None
        name = self.language_name if words.english else language_name(self.language, words.tag)
        return words.gettext("With machine translations into %(language)s.") % {"language": name}


def texts_view(digest: Digest) -> TextsView | None:
    """The digest's summaries and translations as its subscriber asked for them; None when
    it asked for neither (the digest is shown exactly as without them)."""
    subscriber = digest.subscriber
    language = _language(subscriber)
    if not subscriber.summaries and language is None:
        return None
    return TextsView(texts=digest.texts, summaries=subscriber.summaries, language=language)


def layout_of(subscriber: Subscriber) -> Layout:
    """The subscriber's layout: translated with a language, else summaries when asked for."""
    if _language(subscriber):
        return "translated"
    return "summaries" if subscriber.summaries else "standard"


def _language(subscriber: Subscriber) -> str | None:
    """The language translations are shown in: None for none, English, or a tag that is
    no tag (the pipeline writes none for those either: `usable_tag` decides for both)."""
    return usable_tag(subscriber.language)


def model_text(text: str | None, limit: int) -> str | None:
    """A model's text as shown: control and bidi-override characters dropped, whitespace
    tidied, TeX as letters (as titles are), at most `limit` characters (cut with
    "…"); None when nothing is left."""
    if not text:
        return None
    shown = plain_text(text[: 4 * limit])  # a runaway answer is cut before any work on it
    shown = tidy(letters(shown))
    return clip(shown, limit) or None


def written_text(text: str | None, limit: int) -> str | None:
    """A model's summary or translation as shown: `model_text`, and no link, not even one
    its TeX makes once shown as letters (`evil{}.com` shows as evil.com)."""
    if not text:
        return None
    shown = without_links(tidy(letters(plain_text(text[: 4 * limit]))))
    return clip(shown, limit) or None


def summaries_note(items: Iterable[ItemView], words: Words | None = None) -> str | None:
    """Who wrote the summaries the papers `items` show, said once at the top of a digest:
    `AI summaries by qwen2.5:7b-instruct.`, `AI summaries by qwen2.5:7b-instruct and
    Hugging Face.`; None without a summary."""
    writers = [item.summary_by for item in items if item.summary is not None]
    return _written_by(writers, words or words_for(None))


def digest_summaries_note(digest: Digest, words: Words | None = None) -> str | None:
    """`summaries_note` of a digest's papers as their subscriber asked for them."""
    texts = texts_view(digest)
    if texts is None or not texts.summaries:
        return None
    writers = []
    for item in digest.items:
        written = texts.of(item.paper)
        if written is not None and written_text(written.summary, SUMMARY_CHARS):
            writers.append(model_text(written.summary_by, SUMMARY_BY_CHARS))
    return _written_by(writers, words or words_for(None))


def _written_by(writers: Sequence[str | None], words: Words) -> str | None:
    """`AI summaries by <the writers>.` (None: an unnamed writer); None without any."""
    if not writers:
        return None
    # The model first: Hugging Face writes the few it has, the model the rest.
    names = sorted(dict.fromkeys(w for w in writers if w), key=lambda w: w == HUGGING_FACE)
    if not names:
        return words.gettext("AI summaries.")
    if len(names) == 1:
        return words.gettext("AI summaries by %(writers)s.") % {"writers": names[0]}
    listed = words.gettext("%(first)s and %(last)s") % {
        "first": words.gettext(", ").join(names[:-1]),
        "last": names[-1],
    }
    return words.gettext("AI summaries by %(writers)s.") % {"writers": listed}


def shown_note(digest: Digest, words: Words | None = None) -> str | None:
    """What a digest with papers left out says of them, in its reader's words: `The best 15
    of the 34 papers that matched your rules are here.`; None when it shows every one."""
    words = words or words_for(None)
    left = len(digest.omitted)
    matched = digest.count - len(digest.similar)
    if not left or not matched:
        return None
    total = words.number(matched + left)
    if matched == 1:
        return words.gettext(
            "The best of the %(total)s papers that matched your rules is here."
        ) % {"total": total}
    return words.gettext(
        "The best %(shown)s of the %(total)s papers that matched your rules are here."
    ) % {"shown": words.number(matched), "total": total}


def ranking_note(digest: Digest, words: Words | None = None) -> str | None:
    """What a digest ranked by its reader's verdicts says of it: the papers their 👎 pushed
    out (`2 papers close to ones you marked 👎 were left out.`), and why the ranking is not
    the usual one today (`Digest.ranking_note`, as shown); None when there is nothing."""
    words = words or words_for(None)
    notes = []
    if disliked := len(digest.disliked):
        notes.append(
            words.ngettext(
                "%(count)s paper close to ones you marked 👎 was left out.",
                "%(count)s papers close to ones you marked 👎 were left out.",
                disliked,
            )
        )
    if note := model_text(digest.ranking_note, NOTE_CHARS):
        notes.append(note)
    return " ".join(notes) or None


def similar_marker(title: str, words: Words | None = None) -> str:
    """What a paper no rule matched says of why it is there: `like “<the liked paper's
    title>”` (TeX as letters, cut at SIMILAR_TITLE_CHARS)."""
    words = words or words_for(None)
    shown = clip(tidy(letters(title)), SIMILAR_TITLE_CHARS)
    if not shown:
        return words.gettext("like “a paper you liked”")
    return words.gettext("like “%(title)s”") % {"title": shown}


def texts_note(digest: Digest) -> str | None:
    """The digest's line about the texts that could not be written, as shown."""
    return model_text(digest.texts_note, NOTE_CHARS)


def cut_like(translation: str, shown: int, whole: int) -> str:
    """A translation of a text of `whole` characters, cut (with "…") at the same share of
    its length as the `shown` characters of the English are."""
    if shown >= whole:
        return translation
    keep = round(len(translation) * TRANSLATION_MARGIN * shown / max(whole, 1))
    return clip(translation, max(keep, 1))


def with_texts(
    view: ItemView,
    texts: PaperTexts | None,
    wanted: TextsView,
    *,
    abstract: Sequence[Segment],
    length: TextLength = "short",
) -> ItemView:
    """The view with the paper's summary and translations, as far as the digest has them
    and `length` shows them (a brief summary is cut, its translation where the English is;
    "none" shows neither, only the translated title)."""
    if texts is None:
        return view
    written = written_text(texts.summary, SUMMARY_CHARS) if wanted.summaries else None
    summary = written
    if written and length in ("brief", "none"):
        summary = clip(written, BRIEF_CHARS) if length == "brief" else None
    summary_by = model_text(texts.summary_by, SUMMARY_BY_CHARS) if summary else None
    language = wanted.language
    if language is None or not _same_language(texts.language, language):
        # Not asked for, or written in another language than asked: none is shown.
        return replace(view, summary=summary, summary_by=summary_by)
    translated_text = written_text(texts.text, TRANSLATED_TEXT_CHARS)
    title_chars = TRANSLATED_TITLE_CHARS if length in ("full", "short") else BRIEF_CHARS
    if length == "none":
        translated_text = None
    elif translated_text and written and summary and len(summary) < len(written):
        # A brief summary's translation, cut about where the English is cut.
        translated_text = cut_like(translated_text, len(summary.rstrip("…")), len(written))
    elif translated_text and summary is None and view.abstract.clipped:
        # The translation of the whole abstract, cut about where the English is cut.
        whole = sum(len(part) for part, _ in abstract)
        head = sum(len(part) for part, _ in view.abstract.head)
        translated_text = cut_like(translated_text, head, whole)
    return replace(
        view,
        summary=summary,
        summary_by=summary_by,
        translated_title=written_text(texts.title, title_chars),
        translated_text=translated_text,
        language=language,
        language_name=language_name(language),
        direction="rtl" if language_script(language) in RTL_SCRIPTS else "ltr",
    )


def _same_language(written: str | None, wanted: str) -> bool:
    """Whether texts tagged `written` (None: untagged, taken as asked) are in `wanted`."""
    if written is None or written == wanted:
        return True
    try:
        return standard_tag(written) == standard_tag(wanted)
    except LanguageError:
        return False
