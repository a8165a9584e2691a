"""Real days with hostile items in them (issue 17): the files of tests/fixtures/hostile/
inserted into the real arXiv listing of 28 Nov 2024 and the real Hugging Face day of
21 Aug 2026, and the cases too large for a file, built here. Also hostile language tags,
for every place a subscriber's language comes in (issue 20), and what each should give."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from bot.config import NO_LANGUAGE
from bot.core.languages import LanguageError, is_english, standard_tag
from support.paths import FIXTURES, FULL_FEED

HOSTILE = FIXTURES / "hostile"
HF_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-08-21.json"

# What the hostile files hold: kept (cleaned) and left out.
ARXIV_KEPT = {"2411.90001", "2411.90002", "2411.90004", "2411.90006"}
ARXIV_LEFT_OUT = {"2411.90003", "2411.90005"}
HF_KEPT = {"2411.90101", "2411.90102", "2411.90104", "2411.90105"}
HF_LEFT_OUT = 5


def with_items(body: bytes, items: bytes) -> bytes:
    """A real feed with `items` inserted before its `</channel>` (or `</feed>`)."""
    end = body.rindex(b"</channel>") if b"</channel>" in body else body.rindex(b"</feed>")
    return body[:end] + items + body[end:]


def hostile_day() -> bytes:
    """The real arXiv day with the hostile items of arxiv_items.xml at its end."""
    return with_items(FULL_FEED.read_bytes(), (HOSTILE / "arxiv_items.xml").read_bytes())


def hostile_hf_day() -> bytes:
    """The real Hugging Face day with the hostile items of hf_items.json at its end."""
    items = json.loads(HF_DAY.read_bytes())
    hostile = (HOSTILE / "hf_items.json").read_bytes()
    return json.dumps(items)[:-1].encode() + b", " + hostile.strip()[1:]


def long_fields_item(size: int) -> bytes:
    """The day's first item with a new id and each field `size` characters long."""
    run = "a" * size
    return (
        "<item>"
        f"<title>{run}</title><link>https://arxiv.org/abs/{run}</link>"
        f"<description>arXiv:2411.90020v1 Announce Type: new \nAbstract: {run}</description>"
        f'<guid isPermaLink="false">oai:arXiv.org:{run}</guid>'
        f"<category>{run}</category><dc:creator>{run}</dc:creator>"
        f"<author>{run}</author><arxiv:announce_type>new</arxiv:announce_type>"
        "</item>"
    ).encode()


# Language tags as a hostile user types them: huge, NUL, odd Unicode (full-width letters, a
# right-to-left override, a BOM), tags that look right and are not, and good ones.
HOSTILE_LANGUAGES = [
    "zh",
    "zh-Hant",
    "ZH-cn",
    "en-GB",
    "none",
    "OFF",
    "xx",
    "und",
    "zh_CN",
    "zh\x00",
    "\u202ezh",
    "\ufeffja",
    "ｚｈ",
    "x" * 5000,
    "zh-" + "a" * 40,
    "i-klingon",
    "-",
    "",
]
LANGUAGE_TEXTS = st.one_of(
    st.sampled_from(HOSTILE_LANGUAGES),
    st.from_regex(r"[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8}){0,3}", fullmatch=True),
    st.text(
        alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from("\x00-_ "),
        max_size=50,
    ),
)


def expected_language(text: str) -> tuple[str | None, str | None]:
    """What a language typed anywhere should give: (the tag stored, None) — None for
    English or a word that clears it — or (None, the refusal)."""
    if text.strip().lower() in NO_LANGUAGE:
        return None, None
    try:
        tag = standard_tag(text)
    except LanguageError as exc:
        return None, str(exc)
    return (None if is_english(tag) else tag), None
