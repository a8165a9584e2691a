"""The text the ranking reads of a paper, and the hashes that name texts and feedback.

A paper is read as its title and abstract (`paper_text`), TeX lightly turned into words:
font and formatting commands go (`\\mathcal{L}` reads as `L`), symbol names stay words
(`\\alpha` reads as `alpha`), accents drop their command (`Schr\\"odinger` reads as
`Schrodinger`). Pure, linear in the text's length (no regular expression here backtracks).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable

from bot.core.models import Feedback, Paper

__all__ = ["MAX_TEXT", "feedback_hash", "joined_text", "paper_text", "readable", "text_hash"]

MAX_TEXT = 20_000  # characters of one text read: an abstract is at most a few thousand
# Commands that only format what follows (dropped, their argument kept).
_FORMAT = (
    "mathrm|mathcal|mathbb|mathbf|mathit|mathsf|mathtt|mathfrak|mathscr|boldsymbol|"
    "textbf|textit|textrm|texttt|textsf|textsc|emph|text|operatorname|bm|left|right|"
    "big|Big|bigg|Bigg|rm|bf|it|cal|displaystyle|hat|tilde|bar|vec|dot|ddot|overline|"
    "underline|widehat|widetilde"
)
_FORMAT_RE = re.compile(rf"\\(?:{_FORMAT})(?![A-Za-z])")
_ACCENT_RE = re.compile(r"""\\["'`^~=.uvHcdbkr](?=[{A-Za-z ])""")
_COMMAND_RE = re.compile(r"\\([A-Za-z]{1,40})")
_NOISE_RE = re.compile(r"[${}\\^_~]+")


def readable(text: str) -> str:
    """`text` (TeX and all) as plain words for the vectoriser, at most MAX_TEXT characters."""
    text = text[:MAX_TEXT]
    text = _FORMAT_RE.sub(" ", text)
    text = _ACCENT_RE.sub("", text)
    text = _COMMAND_RE.sub(r" \1 ", text)
    return _NOISE_RE.sub(" ", text)


def joined_text(title: str, abstract: str) -> str:
    """A title and an abstract as the ranking reads them, the parts that are "" left out
    (a library entry's, a paper resolved for one)."""
    return "\n\n".join(part for part in (title, abstract) if part)


def paper_text(paper: Paper) -> str:
    """What the ranking reads of a paper: its title, a blank line, its abstract (as
    `Feedback.text` keeps a liked paper's)."""
    return f"{paper.title}\n\n{paper.abstract}"


def text_hash(text: str) -> str:
    """The name of a text's vector in `store.vectors` (per model): a SHA-256 of its UTF-8."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def feedback_hash(feedback: Iterable[Feedback], kind: str) -> str:
    """What a fitted model was fitted on: the verdicts (key, verdict, text) and the model's
    kind; a model whose hash differs from its subscriber's feedback now is refitted."""
    items = sorted((f.key, f.verdict, text_hash(f.text)) for f in feedback)
    body = json.dumps([kind, items], ensure_ascii=True)
    return hashlib.sha256(body.encode("ascii")).hexdigest()
