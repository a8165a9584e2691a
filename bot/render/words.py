"""The digests' and pages' own words in their reader's language: gettext catalogs (one
`.po` file a language, under `bot/locales/`, read with Babel) and dates and times as the
language writes them (Babel's CLDR data), in the reader's zone.

English is the source language: its words are the messages themselves, and a reader whose
language has no catalog reads English. A catalog is compiled in memory the first time it
is needed, so a source checkout and an installed wheel read the same committed `.po` file
and nothing is built before use.

Reads the catalogs from the package and nothing else: no clock (times are passed in),
no other I/O.
"""

from __future__ import annotations

import functools
import gettext
import importlib.resources
import io
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import babel
import babel.dates
import babel.numbers
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from bot.core.languages import ENGLISH, closest_supported

__all__ = ["CATALOG_DOMAIN", "N_", "Words", "catalog_tags", "locales_dir", "words_for"]

CATALOG_DOMAIN = "messages"


def N_(message: str) -> str:
    """Marks a message for the catalogs where it is defined; translated where it is shown."""
    return message


def locales_dir() -> Path:
    """The folder of the catalogs: `bot/locales/<locale>/LC_MESSAGES/messages.po`."""
    return Path(str(importlib.resources.files("bot") / "locales"))


@functools.cache
def catalog_tags() -> dict[str, str]:
    """The languages with a catalog, as BCP 47 tags (`zh-Hans`), and each one's folder
    (`zh_Hans`, Babel's name for it); English, the source, always."""
    tags = {ENGLISH: ""}
    folder = locales_dir()
    if folder.is_dir():
        for path in sorted(folder.glob(f"*/LC_MESSAGES/{CATALOG_DOMAIN}.po")):
            name = path.parent.parent.name
            tags[name.replace("_", "-")] = name
    return tags


@functools.cache
def _translations(tag: str) -> gettext.NullTranslations:
    """The catalog of `tag` (a key of `catalog_tags`), compiled in memory; English: none."""
    name = catalog_tags().get(tag)
    if not name:
        return gettext.NullTranslations()
    path = locales_dir() / name / "LC_MESSAGES" / f"{CATALOG_DOMAIN}.po"
    with path.open("rb") as source:
        catalog = read_po(source, locale=name, domain=CATALOG_DOMAIN)
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)  # an unchecked (fuzzy) translation: English
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def offset_label(offset: timedelta | None) -> str:
    """A UTC offset as people write it: `UTC+8`, `UTC-4`, `UTC+5:30`, `UTC`."""
    minutes = round((offset or timedelta()).total_seconds() / 60)
    if not minutes:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")


@dataclass(frozen=True)
class Words:
    """What a digest or page says, in one language (`tag`, a key of `catalog_tags`)."""

    tag: str
    translations: gettext.NullTranslations

    @property
    def locale(self) -> babel.Locale:
        return _locale(self.tag)

    @property
    def english(self) -> bool:
        return self.tag == ENGLISH

    def gettext(self, message: str) -> str:
        return self.translations.gettext(message)

    def ngettext(self, singular: str, plural: str, count: int, **values: object) -> str:
        """The form of the message for `count`, with `%(count)s` filled in as a number is
        written in the language (`1,504`), and any other `%(name)s` from `values`."""
        form = self.translations.ngettext(singular, plural, count)
        return form % {**values, "count": self.number(count)}

    def pgettext(self, context: str, message: str) -> str:
        return self.translations.pgettext(context, message)

    def number(self, count: int) -> str:
        return babel.numbers.format_decimal(count, locale=self.locale)

    def day(self, day: date, *, short: bool = False) -> str:
        """A day as the language writes it: `Thursday 28 November 2024` (`short`: `Thu 28
        Nov 2024`), `2024年11月28日星期四`."""
        if short:
            # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
            pattern = self.pgettext("date pattern: a short day", "EEE d MMM y")
        else:
            # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
            pattern = self.pgettext("date pattern: a day", "EEEE d MMMM y")
        return babel.dates.format_date(day, pattern, locale=self.locale)

    def short_date(self, day: date) -> str:
        """A date, short: `28 Nov 2024`, `2024年11月28日`."""
        # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
        return self.day_part(day, self.pgettext("date pattern: a date", "d MMM y"))

    def day_month(self, day: date) -> str:
        """A date without its year: `28 Nov`, `11月28日`."""
        # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
        return self.day_part(day, self.pgettext("date pattern: a day and month", "d MMM"))

    def weekday(self, index: int) -> str:
        """A weekday's name (0: Monday): `Monday`, `星期一`."""
        return str(self.locale.days["format"]["wide"][index % 7])

    def day_part(self, day: date, pattern: str) -> str:
        """A day written with a CLDR `pattern` the caller had translated."""
        return babel.dates.format_date(day, pattern, locale=self.locale)

    def moment(self, at: datetime, zone: str) -> str:
        """An instant on the reader's clock, with its offset: `Friday 29 November 2024,
        09:00 (UTC+8)`; `zone`: an IANA zone name (UTC when it is not one)."""
        local = at.astimezone(_zone(zone))
        # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
        pattern = self.pgettext("date pattern: a day and time", "EEEE d MMMM y, HH:mm")
        written = babel.dates.format_datetime(local, pattern, locale=self.locale)
        return self.gettext("%(time)s (%(offset)s)") % {
            "time": written,
            "offset": offset_label(local.utcoffset()),
        }


@functools.cache
def _locale(tag: str) -> babel.Locale:
    return babel.Locale.parse(tag, sep="-")


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # not a zone name: the checks say so elsewhere
        return ZoneInfo("UTC")


@functools.cache
def _words(tag: str) -> Words:
    return Words(tag=tag, translations=_translations(tag))


def words_for(language: str | None) -> Words:
    """The words for a reader of `language` (a BCP 47 tag: `zh`, `zh-CN` and `zh-Hans` all
    read Simplified Chinese); English when it has no catalog, or is no tag."""
    return _words(closest_supported(language, catalog_tags()) or ENGLISH)
