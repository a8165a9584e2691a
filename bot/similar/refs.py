"""A paper as a person names one: `2411.18179`, `2411.18179v2`, `arXiv:2411.18179`, an
arXiv abs/pdf link, `doi:10.1101/…` or a DOI link; and a paper's title as a key
(`title_key`) for an entry that names it by title alone.

Owns the keys a verdict (`bot.core.models.Feedback`) is kept under: an arXiv id without
its version ("2411.18179", "hep-th/9901001"), "doi:" and the DOI in lower case, or
"title:" and the title folded (`title_key`). Pure; linear on any text.
"""

from __future__ import annotations

import re
import unicodedata

from bot.core.models import DOI_RE, MAX_ID_LENGTH

# A new-style id (0704.0001 … 2411.18179) or an old-style one (hep-th/9901001,
# math.GT/0309136), without its version.
_ID = r"(?:\d{4}\.\d{4,5}|[a-z][a-z\-]{0,15}(?:\.[A-Z]{2})?/\d{7})"
ARXIV_REF_RE = re.compile(
    rf"(?:(?i:arxiv):\s?)?(?P<id>{_ID})(?:v(?P<version>\d{{1,9}}))?", re.ASCII
)
ARXIV_URL_RE = re.compile(
    rf"(?i:https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/)(?P<id>{_ID})"
    r"(?:v\d{1,9})?(?i:\.pdf)?/?",
    re.ASCII,
)
# arXiv's own DOIs name the paper: 10.48550/arXiv.2411.18179.
ARXIV_DOI_RE = re.compile(rf"10\.48550/arxiv\.(?P<id>{_ID.replace('[A-Z]', '[a-z]')})", re.ASCII)
DOI_REF_RE = re.compile(
    r"(?:(?i:doi):\s?|(?i:https?://(?:dx\.)?doi\.org/))?(?P<doi>10\.\d{4,9}/\S+)", re.ASCII
)
MAX_REF_LENGTH = 300  # the longest id, link or DOI a person is taken to type
MAX_TITLE_KEY = 200  # characters of a folded title kept in its key

TITLE_PREFIX = "title:"
DOI_PREFIX = "doi:"


class PaperRefError(ValueError):
    """Text that names no paper paperbell can find: the message says what it accepts."""


REF_FORMS = "an arXiv id (2411.18179), an arXiv link or a DOI (doi:10.1101/…)"


def valid_arxiv_id(paper: str) -> bool:
    """Whether a version-less id could be arXiv's: a new-style one's month is 01..12 and it
    has 4 digits after the dot before 2015 (1501) and 5 from then; old-style ids pass."""
    if "/" in paper:
        return True
    yymm, number = paper.split(".", 1)
    year, month = int(yymm[:2]), int(yymm[2:])
    if not 1 <= month <= 12:
        return False
    return len(number) == (5 if year >= 15 and year < 90 else 4) or (
        year == 7 and month >= 4 and len(number) == 4
    )


def arxiv_key(text: str) -> str | None:
    """The arXiv id that `text` is (a bare id with or without `arXiv:` and a version, an
    abs/pdf/html link, arXiv's DOI), or None."""
    text = text.strip()
    if len(text) > MAX_REF_LENGTH:
        return None
    for pattern in (ARXIV_REF_RE, ARXIV_URL_RE):
        if (match := pattern.fullmatch(text)) and valid_arxiv_id(match.group("id")):
            return match.group("id")
    doi = doi_key(text)
    return arxiv_of_doi(doi[len(DOI_PREFIX) :]) if doi else None


def arxiv_of_doi(doi: str) -> str | None:
    """The arXiv id of one of arXiv's DOIs (10.48550/arXiv.2411.18179), or None."""
    match = ARXIV_DOI_RE.fullmatch(doi.lower())
    if match is None:
        return None
    found = match.group("id")
    if "/" in found:  # the archive's subject class is upper case: math.GT
        archive, number = found.split("/", 1)
        head, _, tail = archive.partition(".")
        found = f"{head}.{tail.upper()}/{number}" if tail else found
    return found if valid_arxiv_id(found) else None


def doi_key(text: str) -> str | None:
    """ "doi:" and the DOI `text` is (`doi:10.1101/X`, `https://doi.org/10.1101/x`,
    `10.1101/x`), lower case; or None."""
    text = text.strip()
    if len(text) > MAX_REF_LENGTH:
        return None
    match = DOI_REF_RE.fullmatch(text)
    if match is None:
        return None
    doi = match.group("doi").rstrip(".,;").lower()
    if not DOI_RE.fullmatch(doi) or len(DOI_PREFIX + doi) > MAX_ID_LENGTH:
        return None
    return DOI_PREFIX + doi


def paper_key(text: str) -> str:
    """The key of the paper `text` names: its arXiv id, else "doi:…". Raises PaperRefError
    saying what is accepted."""
    cleaned = text.strip()
    if found := arxiv_key(cleaned):
        return found
    if found := doi_key(cleaned):
        return found
    shown = cleaned if len(cleaned) <= 60 else cleaned[:57] + "…"
    shown = "".join(c if c.isprintable() else "?" for c in shown)
    raise PaperRefError(f"{shown!r} is not {REF_FORMS}")


def is_title_key(key: str) -> bool:
    return key.startswith(TITLE_PREFIX)


_TEX_COMMAND_RE = re.compile(r"\\(?:[A-Za-z]{1,40}|.)", re.DOTALL)
# An accent and its letter: \"o, {\"o}, \"{o}, \v{c}, \c c, \'{\i}.
_ACCENT_RE = re.compile(
    r"\\(?:(?P<mark>[\"'`^~=.])|(?P<word>[uvHckdbrt])(?![A-Za-z]))[ \t]*"
    r"(?:\{[ \t]*(?P<braced>\\?[A-Za-z])[ \t]*\}|(?P<bare>\\?[A-Za-z]))"
)
_NOT_WORD_RE = re.compile(r"[\W_]+")
_SPACES_RE = re.compile(r"\s+")

# TeX's accents as Unicode's combining marks.
_MARKS = {
    '"': "\u0308",
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "u": "\u0306",
    "v": "\u030c",
    "H": "\u030b",
    "c": "\u0327",
    "k": "\u0328",
    "d": "\u0323",
    "b": "\u0331",
    "r": "\u030a",
    "t": "\u0361",
}
# TeX's letters that are commands (`\o`, `\ss`) and its escaped characters.
_TEX_LETTERS = {
    "\\o": "ø",
    "\\O": "Ø",
    "\\ss": "ß",
    "\\l": "ł",
    "\\L": "Ł",
    "\\ae": "æ",
    "\\AE": "Æ",
    "\\oe": "œ",
    "\\OE": "Œ",
    "\\aa": "å",
    "\\AA": "Å",
    "\\i": "ı",
    "\\j": "ȷ",
    "\\&": "&",
    "\\%": "%",
    "\\_": "_",
    "\\#": "#",
    "\\$": "$",
    "\\{": "(",
    "\\}": ")",
}
# Commands that only set how their text looks: dropped, their text kept.
_FORMATTING = frozenset(
    [
        "emph",
        "textbf",
        "textit",
        "texttt",
        "textsc",
        "textrm",
        "textsf",
        "textnormal",
        "text",
        "mathrm",
        "mathbf",
        "mathit",
        "mathcal",
        "mathbb",
        "mathsf",
        "mathtt",
        "mathfrak",
        "boldsymbol",
        "bm",
        "mbox",
        "hbox",
        "url",
        "href",
        "ensuremath",
        "textup",
        "textsl",
        "uppercase",
        "lowercase",
        "MakeUppercase",
        "it",
        "bf",
        "rm",
        "sc",
        "tt",
        "em",
        "sf",
        "sl",
        "small",
        "large",
        "Large",
        "left",
        "right",
        "protect",
    ]
)


def plain_title(title: str) -> str:
    """A title's TeX as plain letters, on one line: `Schr{\\"o}dinger` -> Schrödinger,
    `\\textbf{R}easoning` -> Reasoning, `$\\alpha$` -> alpha; braces and `$` dropped.
    A plain normalisation for library files (bot.render.tex, a layer above, shows TeX in
    full for the digests). Linear on any text."""
    text = _ACCENT_RE.sub(_accented, title)
    text = _TEX_COMMAND_RE.sub(lambda m: _command_letters(m.group()), text)
    text = text.replace("{", "").replace("}", "").replace("$", "")
    text = text.replace("---", "\u2014").replace("--", "\u2013").replace("~", " ")
    text = "".join(c if c.isprintable() else " " for c in text)
    return unicodedata.normalize("NFC", _SPACES_RE.sub(" ", text).strip())


def _accented(match: re.Match[str]) -> str:
    letter = match.group("braced") or match.group("bare")
    letter = {"\\i": "i", "\\j": "j"}.get(letter, letter)
    if letter.startswith("\\"):
        return letter  # another command: left for the next pass
    mark = _MARKS[match.group("mark") or match.group("word")]
    return unicodedata.normalize("NFC", letter + mark)


def _command_letters(command: str) -> str:
    if command in _TEX_LETTERS:
        return _TEX_LETTERS[command]
    name = command[1:]
    if name in _FORMATTING or not name.isalpha():
        return " " if name.isspace() or name == "\\" else ""
    # Greek letters and other symbols by name (`$\alpha$`): the word is kept.
    return f" {name} "


# Letters that Unicode does not split into a letter and a mark.
_UNACCENTED = str.maketrans(
    {
        "ł": "l",
        "Ł": "L",
        "ø": "o",
        "Ø": "O",
        "æ": "ae",
        "Æ": "AE",
        "œ": "oe",
        "Œ": "OE",
        "ı": "i",
        "ȷ": "j",
        "đ": "d",
        "Đ": "D",
        "ð": "d",
        "Ð": "D",
        "þ": "th",
        "Þ": "TH",
    }
)


def fold_title(title: str) -> str:
    """A title as it is compared: plain letters (`plain_title`), accents taken off, lower
    case, words joined by single spaces (`Schr\\"odinger's {Cat}` and `Schrödinger’s cat`
    are both "schrodinger s cat"). Linear; at most MAX_TITLE_KEY characters."""
    text = plain_title(title[: MAX_TITLE_KEY * 20])
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).translate(_UNACCENTED)
    words = _NOT_WORD_RE.sub(" ", text.casefold()).split()
    return " ".join(words)[:MAX_TITLE_KEY].rstrip()


def title_key(title: str) -> str | None:
    """ "title:" and the folded title, or None for a title with no word."""
    folded = fold_title(title)
    return TITLE_PREFIX + folded if folded else None
