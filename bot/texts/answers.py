"""A model's answer, checked before anyone reads it: model output is untrusted text.

`clean_answer` takes the raw content of an answer and gives the text to store, or raises
`Unusable` with the reason it is not used (empty, too long, not in the asked language,
thinking only). Its thinking (`<think>…</think>`) never reaches a reader; markup, links and
control characters are dropped; the text is capped. `shown_summary` cuts a stored summary
for the digest (near 300 characters, at most 330: at a sentence's end, else at a word with
"…"). Pure: no I/O. Linear in the answer's
length: no regex here backtracks on what a model sends.
"""

from __future__ import annotations

import re
import unicodedata

from bot.core.languages import ENGLISH, language_script
from bot.texts.prompts import TextRequest

__all__ = [
    "MAX_ANSWER",
    "SUMMARY_SHOWN",
    "Unusable",
    "clean_answer",
    "plain_text",
    "shown_summary",
    "without_links",
]

# Characters of raw answer read at all (past it: too long); a request's max_tokens keeps a
# real answer far below it.
MAX_ANSWER = 50_000
SUMMARY_SHOWN = 300  # a summary is cut near this many characters in a digest
# A summary cut at a sentence's end keeps at least this share of SUMMARY_SHOWN (220 of
# 300 characters); a shorter one is cut at a word instead.
SENTENCE_SHARE = 11 / 15
MAX_SUMMARY = 1200  # a summary longer than this is no summary
# A translation may be this many times its source's length (and at least the floor).
TRANSLATION_FACTOR = 3
TRANSLATION_FLOOR = {"title": 300, "abstract": 1000, "summary": 800, "hf-summary": 800}
# Blocks of a model's thinking, as reasoning models and their chat templates write them.
THINKING = ("think", "thinking", "reasoning", "reflection")
# The letters of each script, by the first word of their Unicode names.
SCRIPT_NAMES: dict[str, tuple[str, ...]] = {
    "Latn": ("LATIN",),
    "Hans": ("CJK",),
    "Hant": ("CJK",),
    "Hani": ("CJK",),
    "Jpan": ("CJK", "HIRAGANA", "KATAKANA"),
    "Kore": ("HANGUL", "CJK"),
    "Cyrl": ("CYRILLIC",),
    "Arab": ("ARABIC",),
    "Hebr": ("HEBREW",),
    "Grek": ("GREEK",),
    "Deva": ("DEVANAGARI",),
    "Beng": ("BENGALI",),
    "Thai": ("THAI",),
    "Geor": ("GEORGIAN",),
    "Armn": ("ARMENIAN",),
    "Taml": ("TAMIL",),
    "Telu": ("TELUGU",),
    "Ethi": ("ETHIOPIC",),
}
# Of the words of a text, at least this share must be in the asked language's script:
# CJK texts keep Latin names and acronyms (Transformer, GPT-4), so theirs is lower.
SCRIPT_SHARE = {"Hans": 0.3, "Hant": 0.3, "Hani": 0.3, "Jpan": 0.3, "Kore": 0.3, "Latn": 0.75}
DEFAULT_SHARE = 0.4

_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>()\[\]{}\"']*", re.IGNORECASE)
# What mail clients and Slack make links of without a scheme: an address, a bare domain of
# a common top-level domain (not "Node.js" or "e.g.").
_EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
_DOMAIN = re.compile(
    r"\b[a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){0,8}\."
    r"(?:com|org|net|io|ai|edu|gov|co|info|xyz|app|dev|me|cn|uk|de|jp|fr|ru|us|ly|gl|to|sh|"
    r"site|online|link|page|tech|top|cc|tv|biz|ws)\b(?:/[^\s]*)?",
    re.IGNORECASE,
)
# Chat-format tokens some servers leak (<|channel|>analysis<|message|>...): the answer is
# what follows the last message token.
_FORMAT_TOKEN = re.compile(r"<\|[A-Za-z_]{1,30}\|>")
_MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]{0,500})\]\([^()\s]{0,2000}\)")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]{0,30}(?:\s[^<>]{0,500})?/?>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`+)")
_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s+|[-*•]\s+|>\s*)", re.MULTILINE)
_LABEL = re.compile(
    r"^\s*(?:summary|translation|translated (?:title|text|abstract)|title|abstract|tl;?dr|"
    r"摘要|总结|翻译|标题|要約|要旨|翻訳|タイトル|요약|번역|제목)\s*[:：]\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?。！？](?=\s|$)|[。！？]")
_QUOTES = ('""', "''", "“”", "‘’", "«»", "「」", "『』", "„“")


class Unusable(ValueError):
    """A model's answer that is not shown, and why: `reason` is one of "empty", "too long",
    "wrong language", "untranslated", "thinking only"."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def clean_answer(raw: str | None, request: TextRequest) -> str:
    """The text to store from a model's answer to `request`, or Unusable."""
    if raw is None or not raw.strip():
        raise Unusable("empty", "the model answered nothing")
    if len(raw) > MAX_ANSWER:
        raise Unusable("too long", f"{len(raw):,} characters")
    text = _without_thinking(raw)
    text = plain_text(text)
    text = _unquoted(_LABEL.sub("", text, count=1).strip())
    if not text:
        raise Unusable("empty", "nothing but markup or links")
    limit = _limit(request)
    if len(text) > limit:
        raise Unusable("too long", f"{len(text):,} characters (at most {limit:,})")
    _check_language(text, request)
    if request.kind == "title":
        text = " ".join(text.split())
    return text


def shown_summary(text: str, limit: int = SUMMARY_SHOWN) -> str:
    """A summary as a digest shows it, one paragraph near `limit` characters (300): whole
    up to a tenth more (330); longer, cut at the last sentence end within that if it keeps
    at least 11/15 of `limit` (220), else at a word, with "…", within `limit`. Never
    longer than `limit` and a tenth: paragraphs of a steady length, as in the digests
    people read. Linear: only the first `limit` and a tenth characters are searched."""
    text = " ".join(text.split())
    most = limit + limit // 10
    if len(text) <= most:
        return text
    head = text[: most + 1]  # one more: what follows a full stop says if it ends a sentence
    ends = [end for match in _SENTENCE_END.finditer(head) if (end := match.end()) <= most]
    if ends and ends[-1] >= limit * SENTENCE_SHARE:
        return head[: ends[-1]].rstrip()
    space = head.rfind(" ", 0, limit)
    cut = head[:space] if space >= limit // 2 else head[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


def _without_thinking(text: str) -> str:
    """The answer without its thinking blocks. An answer that is all thinking (an opened
    block never closed: the model ran out of tokens thinking) is Unusable; a closing tag
    with no opening one (the template opened it) ends the thinking."""
    if "<|message|>" in text:
        text = text[text.rfind("<|message|>") + len("<|message|>") :]
    for name in THINKING:
        opening, closing = f"<{name}>", f"</{name}>"
        lower = _ascii_lower(text)  # as long as the text: its positions are the text's
        if closing in lower and opening not in lower[: lower.find(closing)]:
            cut = lower.rfind(closing) + len(closing)
            text, lower = text[cut:], lower[cut:]
        parts: list[str] = []
        position = 0
        while (start := lower.find(opening, position)) != -1:
            parts.append(text[position:start])
            end = lower.find(closing, start)
            if end == -1:
                kept = "".join(parts).strip()
                if not kept:
                    raise Unusable("thinking only", "the answer is the model's thinking")
                position = len(text)
                break
            position = end + len(closing)
        parts.append(text[position:])
        text = "".join(parts)
    return text


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(text: str) -> str:
    """Lower case for ASCII letters only: every character stays one character (`İ`.lower()
    is two), so positions found in it are positions in the text."""
    return text.translate(_ASCII_LOWER)


def plain_text(text: str) -> str:
    """Text as paperbell shows what others wrote (a model, Hugging Face's AI summary): one
    paragraph, no control or format characters, no HTML tags, no links, no Markdown."""
    kept = []
    for index, char in enumerate(text):
        category = unicodedata.category(char)
        if char in "\n\t":
            kept.append(char)
        elif char == "\u200d":  # joins emoji; beside ASCII, it only hides a link
            near = text[index - 1 : index] + text[index + 1 : index + 2]
            if near and not near.isascii():
                kept.append(char)
        elif category in ("Cc", "Cs", "Co", "Cn", "Cf"):
            continue  # controls, NUL, bidi overrides, private use: never shown
        else:
            kept.append(char)
    text = _FORMAT_TOKEN.sub("", "".join(kept))
    text = _MARKDOWN_LINK.sub(r"\1", text)
    for _ in range(8):  # <scr<script>ipt>: until no tag is left (or it gives up trying)
        stripped = _TAG.sub("", text)
        if stripped == text:
            break
        text = stripped
    text = _HEADING.sub("", text)
    # Links last: `evil**.**com` is a link once its emphasis is dropped.
    text = _EMPHASIS.sub("", text)
    return without_links(text)


def without_links(text: str) -> str:
    """The text without what mail apps and Slack make links of (URLs, addresses, bare
    domains), as one paragraph: every run of spaces one space."""
    text = _URL.sub("", text)
    text = _EMAIL.sub("", text)
    text = _DOMAIN.sub("", text)
    return " ".join(text.split())


def _unquoted(text: str) -> str:
    for pair in _QUOTES:
        if len(text) > 2 and text[0] == pair[0] and text[-1] == pair[1]:
            return text[1:-1].strip()
    return text


def _limit(request: TextRequest) -> int:
    if not request.translation:
        return MAX_SUMMARY
    floor = TRANSLATION_FLOOR.get(request.kind, 1000)
    return max(floor, TRANSLATION_FACTOR * len(request.source))


def _check_language(text: str, request: TextRequest) -> None:
    """The answer is in the asked language's script (English for a summary): a model that
    answers in Chinese when asked for English, or in English when asked for Chinese, is
    wrong. A translation into a language of the source's own script must differ from it."""
    script = language_script(request.language)
    names = SCRIPT_NAMES.get(script)
    if names is None:
        return  # a script not known here: not checked
    # Counted in words, not letters: a CJK character is a word, a Latin name is one too
    # ("Transformer" weighs what "模" weighs).
    letters = 0
    inside = 0
    previous = ""
    for char in text:
        if not char.isalpha():
            previous = ""
            continue
        name = unicodedata.name(char, "")
        script_word = name.split(" ", 1)[0]
        ideograph = script_word in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")
        if not ideograph and script_word == previous:
            continue  # the same word goes on
        previous = "" if ideograph else script_word
        letters += 1
        if name.startswith(names):
            inside += 1
    if letters == 0:
        return  # digits and symbols only ("3D-GS++"): nothing to judge by
    share = SCRIPT_SHARE.get(script, DEFAULT_SHARE)
    if inside / letters < share:
        wanted = "English" if request.language == ENGLISH else request.language
        raise Unusable(
            "wrong language",
            f"{inside} of {letters} words in the {script} script of {wanted}",
        )
    if (
        request.translation
        and request.kind != "title"
        and script == "Latn"
        and _folded(text) == _folded(request.source)
    ):
        raise Unusable("untranslated", "the answer is the English text")


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())
