"""Languages a subscriber may read their digests in: BCP 47 tags, checked and standardised,
with their names and the script they are written in (`langcodes`, `language_data`).

Pure: no I/O. A tag is accepted when it names a known language ("zh", "zh-Hant", "pt-BR",
"ja"), refused with a message that says why otherwise; English needs no translation.
langcodes is imported at the first tag read (`_language`), not with this module: its
tables are large, and a process that reads no tag (a sender whose subscribers all read
English) never needs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langcodes import Language

__all__ = [
    "ENGLISH",
    "MAX_TAG",
    "LanguageError",
    "closest_supported",
    "is_english",
    "language_name",
    "language_script",
    "standard_tag",
    "usable_tag",
]

ENGLISH = "en"
MAX_TAG = 35  # the longest tag stored (RFC 5646 advises 35 characters)


class LanguageError(ValueError):
    """A language tag paperbell cannot use, with why."""


def standard_tag(text: str) -> str:
    """The standard form of a BCP 47 tag (`zh-cn` -> `zh-CN`, `chi` -> `zh`); raises
    LanguageError naming the problem when it is not a tag of a known language."""
    wanted = text.strip() if isinstance(text, str) else ""
    shown = repr(wanted)  # escapes what cannot be printed: cut the escaped form, not the text
    if len(shown) > 44:
        shown = shown[:42] + "…" + shown[0]
    if not wanted or len(wanted) > MAX_TAG or not wanted.isascii():
        raise LanguageError(f"language {shown}: not a BCP 47 language tag (like zh, ja, de, pt-BR)")
    try:
        language = _language(wanted, normalize=True)
    except ValueError as exc:
        raise LanguageError(
            f"language {shown}: not a BCP 47 language tag (like zh, ja, de, pt-BR)"
        ) from exc
    if not language.language or not language.is_valid() or not _known(language.language):
        raise LanguageError(f"language {shown}: no language paperbell knows by that tag")
    return language.to_tag()


def usable_tag(tag: str | None) -> str | None:
    """A stored tag as one to translate into: standard, and not English; None for English,
    none, or a tag that is no tag (stored by hand, or by an older paperbell)."""
    if not tag:
        return None
    try:
        standard = standard_tag(tag)
    except LanguageError:
        return None
    return None if is_english(standard) else standard


@lru_cache(maxsize=256)
def language_name(tag: str, in_language: str = ENGLISH) -> str:
    """The language's name, in English or `in_language`: `zh-Hant` -> `Chinese
    (Traditional)`, `繁體中文` (the tag itself, for a tag that is no tag)."""
    try:
        return str(_language(tag).display_name(in_language))
    except ValueError:
        return tag


@lru_cache(maxsize=256)
def language_script(tag: str) -> str:
    """The ISO 15924 script the language is usually written in: `zh` -> `Hans`,
    `ja` -> `Jpan`, `ru` -> `Cyrl`, `de` -> `Latn` (`Zyyy`, unknown, for a tag that is
    no tag)."""
    try:
        return str(_language(tag).maximize().script or "Latn")
    except ValueError:
        return "Zyyy"


def closest_supported(tag: str | None, supported: Iterable[str]) -> str | None:
    """Which of the `supported` tags (catalogs of the email's own words) serves a reader of
    `tag`: the same language in the same script (`zh`, `zh-CN`, `zh-SG` and `zh-Hans` all
    take `zh-Hans`; `zh-TW` and `zh-Hant` do not), the same region first when several
    differ only by it (`pt-PT` before `pt-BR`). None when none does, or `tag` is no tag."""
    if not tag:
        return None
    try:
        wanted = _likely(standard_tag(tag))
    except LanguageError:
        return None
    same = [
        one
        for one in sorted(supported)
        if _likely(one)[:2] == wanted[:2]  # language and script
    ]
    if not same:
        return None
    return next((one for one in same if _likely(one)[2] == wanted[2]), same[0])


@lru_cache(maxsize=256)
def _likely(tag: str) -> tuple[str, str, str]:
    """A tag's language, likely script and likely region: `zh` -> (`zh`, `Hans`, `CN`)."""
    try:
        full = _language(tag, normalize=True).maximize()
    except ValueError:
        return ("", "", "")
    return (full.language or "", full.script or "", full.territory or "")


def is_english(tag: str | None) -> bool:
    try:
        return tag is not None and _language(tag).language == ENGLISH
    except ValueError:
        return False


@lru_cache(maxsize=256)
def _known(code: str) -> bool:
    """Whether the language subtag has a name (`xx` has none). English, every subscriber's
    unless they chose another, is known without reading the names: their table
    (`language_data`) is the larger part of langcodes' data."""
    if code == ENGLISH:
        return True
    return not str(_language(code).display_name()).startswith("Unknown language")


def _language(tag: str, *, normalize: bool = False) -> Language:
    """langcodes' reading of `tag` (`normalize`: its standard form). Raises ValueError
    (langcodes' LanguageTagError is one) for a text that is no tag."""
    import langcodes

    return langcodes.Language.get(tag, normalize=normalize)
