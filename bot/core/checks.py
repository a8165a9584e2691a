"""Checks shared by the config, the CLI and the renderers, so they never disagree.

Pure: each check returns the (canonical) value or raises ValueError with a message a person
can act on. Used to validate the config file, `paperbell subscribe`, and again right before
a header is built from the value. `terminal_safe` makes a stranger's text harmless to print.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from urllib.parse import urlsplit

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# A plausible single addr-spec: dot-atom local part, dotted ASCII domain. Deliberately
# stricter than RFC 5322 (no quoted local parts, no comments, no IP literals, no IDN).
_LOCAL_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_DOMAIN_RE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}")
# An archive (cs, astro-ph, q-bio) with an optional subject class (RO, CO, stat-mech, gen-ph).
CATEGORY_RE = re.compile(r"[a-z]+(?:-[a-z]+)?(?:\.[a-z]+(?:-[a-z]+)?)?", re.IGNORECASE)


def check_address(address: str | None, *, what: str = "address") -> str:
    """Return `address` if it is one plausible bare ASCII email address; raise ValueError."""
    prefix = f"{what}: " if what else ""
    if not isinstance(address, str) or not address:
        raise ValueError(f"{prefix}no email address given")
    if CONTROL_RE.search(address):
        raise ValueError(f"{prefix}control characters (CR/LF ...) in {address!r}")
    if len(address) > 254 or address.count("@") != 1:
        raise ValueError(f"{prefix}not a single email address: {address!r}")
    local, _, domain = address.partition("@")
    if not _LOCAL_RE.fullmatch(local) or len(local) > 64 or not _DOMAIN_RE.fullmatch(domain):
        raise ValueError(f"{prefix}not a plausible email address: {address!r}")
    return address


def check_header_text(value: str, *, what: str) -> str:
    """Text that goes into a mail header: no control characters (no header injection)."""
    if CONTROL_RE.search(value):
        prefix = f"{what}: " if what else ""
        raise ValueError(f"{prefix}control characters (CR/LF ...) in {value!r}")
    return value


# arXiv's archives (its own error feed lists them); categories are `<archive>.<subject>`.
ARCHIVES = frozenset(
    [
        "astro-ph",
        "cond-mat",
        "cs",
        "econ",
        "eess",
        "gr-qc",
        "hep-ex",
        "hep-lat",
        "hep-ph",
        "hep-th",
        "math",
        "math-ph",
        "nlin",
        "nucl-ex",
        "nucl-th",
        "physics",
        "q-bio",
        "q-fin",
        "quant-ph",
        "stat",
    ]
)


def canonical_category(value: str) -> str:
    """An arXiv category in arXiv's spelling (`CS.ro` -> `cs.RO`, `physics.Gen-Ph` ->
    `physics.gen-ph`); raise ValueError if it cannot be one."""
    if not CATEGORY_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an arXiv category (like cs, cs.RO, q-bio.NC, astro-ph.CO)"
        )
    archive, dot, subject = value.partition(".")
    if archive.lower() not in ARCHIVES:
        close = difflib.get_close_matches(archive.lower(), sorted(ARCHIVES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"{archive!r} is not an arXiv archive{hint}")
    if not dot:
        return archive.lower()
    subject = subject.upper() if len(subject) == 2 else subject.lower()
    return f"{archive.lower()}.{subject}"


def redact_url(url: str) -> str:
    """A URL with its password hidden, for messages and logs."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return url


MAX_URL_LENGTH = 2048  # longer is no link anyone follows (and no browser shares it)
# Characters no plain URL holds raw; a backslash is a slash to browsers (`https:\\evil`).
_NOT_IN_URLS = frozenset('\\"<>`')


def is_web_url(url: str) -> bool:
    """Whether `url` may become a link anywhere (a stored paper, an email, Slack, a page):
    http or https, a host, no credentials, no space or control or invisible character, at
    most MAX_URL_LENGTH characters. `javascript:`, `data:` and the rest never may."""
    if not url or len(url) > MAX_URL_LENGTH or not url.isprintable():
        return False  # isprintable: no control, format (bidi), separator or unassigned char
    if any(c in _NOT_IN_URLS or unicodedata.category(c)[0] in "CZ" for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is not a number
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not url.lower().startswith(scheme + "://"):
        return False
    return bool(parts.hostname) and "@" not in parts.netloc


# A rule's label: a short name shown in place of the rule (subject, headings). It goes into
# a mail header and every page, so it is one line of visible text: no control, format
# (bidi, zero-width), surrogate, private-use, unassigned or line/paragraph-separator
# character, and no pile of combining marks.
MAX_LABEL_LENGTH = 40
_LABEL_REFUSED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_MAX_MARKS = 2  # combining marks on one character: more is decoration ("Zalgo"), not text


def check_label(value: str, *, what: str = "") -> str:
    """A rule's label as kept: NFC, whitespace runs as one space, stripped; raise
    ValueError with what is wrong (empty, too long, a character no label may hold)."""
    prefix = f"{what}: " if what else ""
    if not isinstance(value, str):
        raise ValueError(f"{prefix}a label is text")
    if len(value) > 4 * MAX_LABEL_LENGTH:  # before any work on a huge one
        raise ValueError(
            f"{prefix}a label can be at most {MAX_LABEL_LENGTH} characters long "
            f"(this one has {len(value)})"
        )
    for char in value:
        category = unicodedata.category(char)
        if category in _LABEL_REFUSED and char not in " \t":
            raise ValueError(
                f"{prefix}a label cannot hold the character U+{ord(char):04X} "
                f"({_character_kind(category)})"
            )
    label = " ".join(unicodedata.normalize("NFC", value).replace("\t", " ").split())
    if not label:
        raise ValueError(f"{prefix}a label cannot be empty: leave it out for none")
    if len(label) > MAX_LABEL_LENGTH:
        raise ValueError(
            f"{prefix}a label can be at most {MAX_LABEL_LENGTH} characters long "
            f"(this one has {len(label)})"
        )
    marks = 0
    for char in unicodedata.normalize("NFD", label):  # é is one mark, ệ two
        marks = marks + 1 if unicodedata.combining(char) else 0
        if marks > _MAX_MARKS:
            raise ValueError(f"{prefix}a label cannot stack more than {_MAX_MARKS} accents")
    if not any(unicodedata.category(char)[0] in "LNS" for char in label):
        raise ValueError(f"{prefix}a label needs a letter, a digit or a symbol")
    return label


def _character_kind(category: str) -> str:
    return {
        "Cc": "a control character",
        "Cf": "an invisible formatting character",
        "Cs": "a lone surrogate",
        "Co": "a private-use character",
        "Cn": "an unassigned character",
        "Zl": "a line separator",
        "Zp": "a paragraph separator",
    }[category]


# C0 and C1 control characters and DEL, and the bidirectional embeddings, overrides and
# isolates (they reorder what follows them on the line): whitespace among them is tidied
# to a space later.
_CONTROLS = {
    c: " " if chr(c) in "\t\n\r\f\v" else "\ufffd"
    for c in (*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def terminal_safe(text: str) -> str:
    """Text a feed, a model or an endpoint gave, safe to print on a terminal: one
    character for one."""
    return text.translate(_CONTROLS)
