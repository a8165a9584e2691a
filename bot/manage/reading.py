"""How a subscriber's reading settings are offered and described: the settings page's
choices of translation and papers per email, a language's name, and how a subscriber's
digests read, for the pages, Slack and the command line alike. Pure: no I/O.
"""

from __future__ import annotations

from bot.core.languages import language_name
from bot.core.models import Subscriber
from bot.render.words import Words, words_for

# The translations the settings page offers first (any other tag a subscriber has is added).
LANGUAGES = ("zh", "zh-Hant", "ja", "ko", "de", "fr", "es", "pt", "ru", "it", "ar", "hi")
# How many papers an email may show, as the settings page offers them (the subscriber's own
# number is added). The best ones are shown; an email says how many more matched.
PAPER_COUNTS = (10, 15, 20, 30, 50, 100)


def language_called(tag: str, in_language: str = "en") -> str:
    """A stored language's name ("Chinese", "Portuguese (Brazil)"; in `in_language`, a
    tag: "中文"); a tag that is not one (stored by hand) as it is, so a page or a reply
    never fails on it."""
    try:
        return language_name(tag, in_language)
    except ValueError:
        return tag


def language_label(tag: str, in_language: str = "en") -> str:
    """A language as the settings page names it: "zh" is written in simplified characters,
    named so beside zh-Hant's "Chinese (Traditional)"."""
    return language_called("zh-Hans" if tag == "zh" else tag, in_language)


def language_choices(current: str | None, words: Words | None = None) -> list[tuple[str, str]]:
    """The settings page's translation choices, (tag, name in the reader's `words`), with
    the subscriber's own tag when it is not among LANGUAGES; "English only" (tag "none")
    is the page's own."""
    in_language = (words or words_for(None)).tag
    tags = [*LANGUAGES, *([current] if current and current not in LANGUAGES else [])]
    return [(tag, language_label(tag, in_language)) for tag in tags]


def paper_count_choices(current: int) -> list[int]:
    """The settings page's choices of papers per email, with the subscriber's own number."""
    return sorted({*PAPER_COUNTS, current})


def reading_parts(sub: Subscriber, words: Words | None = None) -> list[str]:
    """How a subscriber's digests read beyond the abstracts, as short phrases for a status
    line, in the reader's `words`: "summaries", "in Chinese beside the English", "a long
    digest as one email" (none: English abstracts, a long digest in parts)."""
    words = words or words_for(None)
    parts = [words.gettext("summaries")] if sub.summaries else []
    if sub.language:
        name = language_called(sub.language, words.tag)
        parts.append(words.gettext("in %(language)s beside the English") % {"language": name})
    if sub.long_emails == "one":
        parts.append(words.gettext("a long digest as one email"))
    return parts
