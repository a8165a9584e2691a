"""The emails' and pages' own words in their reader's language (`bot.render.words`): every
message of the code and templates has its translation in each catalog, the catalogs are
what `pip install .` ships, a reader's tag picks the right catalog (fuzzed), and dates are
written as the language writes them, on the reader's clock."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import _parse_mappings_from_toml
from babel.messages.pofile import read_po
from hypothesis import example, given
from hypothesis import strategies as st
from support.cli import loaded, modules_after
from support.paths import ROOT

from bot.core.languages import closest_supported
from bot.render import template_env
from bot.render.words import catalog_tags, locales_dir, offset_label, words_for

CATALOGS = sorted(tag for tag, folder in catalog_tags().items() if folder)
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def extracted() -> dict[tuple[str | None, str], tuple[str, ...]]:
    """Every message the code and templates mark, by (context, msgid): its forms."""
    with (ROOT / "pyproject.toml").open("rb") as config:
        method_map, options_map = _parse_mappings_from_toml(config, style="pyproject.toml")
    found: dict[tuple[str | None, str], tuple[str, ...]] = {}
    for _, _, message, _, context in extract_from_dir(
        str(ROOT), method_map, options_map, strip_comment_tags=True
    ):
        forms = message if isinstance(message, tuple) else (message,)
        found[(context, forms[0])] = tuple(form for form in forms if form is not None)
    return found


def catalog(tag: str) -> Catalog:
    folder = catalog_tags()[tag]
    with (locales_dir() / folder / "LC_MESSAGES" / "messages.po").open("rb") as source:
        return read_po(source, locale=folder)


def test_there_is_a_simplified_chinese_catalog() -> None:
    assert "zh-Hans" in CATALOGS


@pytest.mark.parametrize("tag", CATALOGS)
def test_every_message_has_its_translation_and_no_other(tag: str) -> None:
    """Fails when a message of the code or templates is new or changed and the catalog has
    no translation of it (or an unchecked, fuzzy one), and when the catalog keeps one the
    code no longer says: docs/languages.md says how to update it."""
    wanted = extracted()
    assert len(wanted) > 150, "the extraction found too few messages: is its mapping right?"
    held = catalog(tag)
    missing, fuzzy, empty = [], [], []
    for (context, msgid), forms in sorted(wanted.items(), key=str):
        message = held.get(msgid, context=context)
        if message is None:
            missing.append(msgid)
        elif message.fuzzy:
            fuzzy.append(msgid)
        elif not all(message.string if isinstance(message.string, tuple) else [message.string]):
            empty.append(msgid)
        elif isinstance(message.id, tuple) != (len(forms) > 1):
            missing.append(f"{msgid} (plural forms)")
    stale = [
        str(m.id)
        for m in held
        if m.id and (m.context, m.id if isinstance(m.id, str) else m.id[0]) not in wanted
    ]
    assert not missing, f"{tag}: no translation of {missing}"
    assert not fuzzy, f"{tag}: fuzzy (unchecked) translations of {fuzzy}"
    assert not empty, f"{tag}: empty translations of {empty}"
    assert not stale, f"{tag}: translations of messages no longer in the code: {stale}"


@pytest.mark.parametrize("tag", CATALOGS)
def test_each_translation_fills_in_what_its_message_fills_in(tag: str) -> None:
    """A translation that drops or misspells `%(name)s` would fail at render time, or lose
    a number; Babel's checks and the placeholders, compared."""
    held = catalog(tag)
    problems = [f"{message.id!r}: {errors}" for message, errors in held.check()]
    for message in held:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        wanted = set(PLACEHOLDER.findall(ids[-1]))
        for string in strings:
            if set(PLACEHOLDER.findall(string)) != wanted:
                problems.append(f"{ids[0]!r}: {string!r} fills in other names")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("tag", ["zh", "zh-CN", "zh-Hans", "zh-SG", "ZH-cn", "zh-Hans-CN"])
def test_the_tags_of_simplified_chinese_all_read_it(tag: str) -> None:
    assert words_for(tag).tag == "zh-Hans"
    assert template_env(tag) is template_env("zh-Hans")


@pytest.mark.parametrize("tag", [None, "", "en", "en-GB", "zh-Hant", "zh-TW", "ja", "tlh", "x"])
def test_a_language_without_its_catalog_reads_english(tag: str | None) -> None:
    """Traditional Chinese is another script: its readers get English, not Simplified."""
    assert words_for(tag).tag == "en"
    assert words_for(tag).gettext("Unsubscribe") == "Unsubscribe"


def test_an_english_reader_s_words_read_no_table_of_language_names(tmp_path: Path) -> None:
    """Every subscriber reads English unless they chose another language: picking their
    words leaves langcodes' table of names (`language_data`, most of its weight) unread."""
    code = (
        "from bot.core.languages import closest_supported, standard_tag\n"
        "assert standard_tag('EN-us') == 'en-US'\n"
        "assert closest_supported('en', ['en', 'zh-Hans']) == 'en'"
    )
    assert loaded(modules_after(code, cwd=tmp_path), ("language_data",)) == []


@given(
    st.one_of(
        st.none(), st.text(max_size=60), st.from_regex(r"[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8}){0,3}")
    )
)
@example("zh-Hans-CN-x-private")
@example("zh-\x00")
@example("i-klingon")
@example("-")
def test_any_tag_picks_a_catalog_or_english_and_never_fails(tag: str | None) -> None:
    """A subscriber's stored tag is whatever a page, a file or an old database held."""
    picked = closest_supported(tag, catalog_tags())
    assert picked is None or picked in catalog_tags()
    words = words_for(tag)
    assert words.tag in catalog_tags()
    assert words.gettext("Unsubscribe")


@given(st.sampled_from(["zh", "zh-CN", "zh-Hans"]), st.sampled_from(["CN", "SG", "MY"]))
def test_simplified_chinese_with_any_region_reads_simplified(language: str, region: str) -> None:
    assert words_for(f"{language.split('-')[0]}-Hans-{region}").tag == "zh-Hans"


def test_dates_and_times_as_each_language_writes_them_on_the_readers_clock() -> None:
    english, chinese = words_for("en"), words_for("zh")
    day = date(2024, 11, 28)
    generated = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
    assert english.day(day) == "Thursday 28 November 2024"
    assert english.day(day, short=True) == "Thu 28 Nov 2024"
    assert chinese.day(day) == "2024年11月28日星期四"
    assert chinese.moment(generated, "Asia/Shanghai") == "2024年11月28日星期四 20:00（UTC+8）"
    assert (
        english.moment(generated, "America/New_York") == "Thursday 28 November 2024, 07:00 (UTC-5)"
    )
    assert english.moment(generated, "Asia/Kolkata").endswith("17:30 (UTC+5:30)")
    assert english.moment(generated, "Not/AZone").endswith("12:00 (UTC)")
    assert chinese.ngettext("%(count)s new paper", "%(count)s new papers", 1504) == "1,504 篇新论文"


@pytest.mark.parametrize(
    ("minutes", "label"), [(0, "UTC"), (480, "UTC+8"), (-300, "UTC-5"), (330, "UTC+5:30")]
)
def test_offsets_are_written_as_people_write_them(minutes: int, label: str) -> None:
    from datetime import timedelta

    assert offset_label(timedelta(minutes=minutes)) == label


def test_the_catalogs_are_inside_the_package_so_the_wheel_ships_them() -> None:
    """`bot/locales/` is in the package (hatch ships every file under `bot/`); the `.po`
    is read and compiled at first use, so nothing is built at install time."""
    assert Path(str(locales_dir())).is_relative_to(ROOT / "bot") or "site-packages" in str(
        locales_dir()
    )
    assert (locales_dir() / "zh_Hans" / "LC_MESSAGES" / "messages.po").is_file()
