"""Reading a library exported from Zotero, Mendeley or a BibTeX manager (bot.similar.library)
and the ids people type (bot.similar.refs): the sample exports of tests/fixtures/library/
(hand-written in each program's shape: see its SOURCES.md), one bad entry skipped and
counted with its number and key, the format told by content, and hostile files (huge,
deep braces, NUL, odd Unicode, wrong JSON types) read or refused with a LibraryError,
never anything else."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.paths import FIXTURES

from bot.similar.library import (
    MAX_ENTRIES,
    MAX_LIBRARY_BYTES,
    LibraryError,
    detect_format,
    read_library,
)
from bot.similar.refs import PaperRefError, fold_title, paper_key, plain_title, title_key

LIBRARY = FIXTURES / "library"
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(name: str):
    return read_library((LIBRARY / name).read_bytes(), name=name)


def found(library) -> dict[str, tuple[str | None, str | None, str]]:
    return {e.feedback_key: (e.arxiv, e.doi, e.title) for e in library.entries}


# -- the ids people type ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("2411.18179", "2411.18179"),
        ("2411.18179v2", "2411.18179"),
        (" arXiv:2411.18179v12 ", "2411.18179"),
        ("https://arxiv.org/abs/2411.18179v2", "2411.18179"),
        ("http://arxiv.org/pdf/2411.18179v2.pdf", "2411.18179"),
        ("https://export.arxiv.org/abs/hep-th/9711200", "hep-th/9711200"),
        ("math.GT/0309136v1", "math.GT/0309136"),
        ("0704.0001", "0704.0001"),
        ("doi:10.1101/2024.05.01.592030", "doi:10.1101/2024.05.01.592030"),
        ("DOI: 10.1016/J.DARK.2024.101730", "doi:10.1016/j.dark.2024.101730"),
        ("https://doi.org/10.1109/CVPR.2016.90", "doi:10.1109/cvpr.2016.90"),
        ("10.1109/CVPR.2016.90", "doi:10.1109/cvpr.2016.90"),
        ("https://doi.org/10.48550/arXiv.2411.18179", "2411.18179"),
    ],
)
def test_paper_key_accepts_the_ways_a_paper_is_named(text: str, key: str) -> None:
    assert paper_key(text) == key


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "2413.00001",  # month 13
        "1101.00001",  # five digits before 2015
        "2411.1817",  # four digits after 2015
        "https://example.org/abs/2411.18179",
        "2411.18179 2411.18180",
        "doi:11.1/x",
        "x" * 10_000,
        "2411.18179\x00",
    ],
)
def test_paper_key_refuses_anything_else_saying_what_it_accepts(text: str) -> None:
    with pytest.raises(PaperRefError, match=r"is not an arXiv id \(2411\.18179\)"):
        paper_key(text)


def test_titles_fold_alike_whether_written_in_tex_or_unicode() -> None:
    assert fold_title("Schr\\\"odinger's {C}at") == fold_title("Schrödinger’s cat")
    assert fold_title('Lindel{\\"{o}}f spaces') == fold_title("Lindelöf Spaces")
    assert fold_title("Przemys{\\l}aw") == fold_title("Przemysław") == "przemyslaw"
    assert plain_title("\\textbf{R}easoning with $\\alpha$--stable") == (
        "Reasoning with alpha –stable"
    )
    assert plain_title("Vavry{\\v{c}}uk, V{\\'{a}}clav") == "Vavryčuk, Václav"
    assert title_key("{}$$") is None


# -- the sample exports ------------------------------------------------------------------------


def test_zotero_bibtex_export() -> None:
    library = read("zotero_export.bib")
    assert library.format == "bibtex"
    keys = found(library)
    assert keys["2411.17703"][1] == "10.48550/arxiv.2411.17703"
    assert keys["doi:10.1016/j.segan.2024.101477"][0] is None
    title = "title:almost sure well posedness and orbital stability for schrodinger equation"
    assert f"{title} with potential" in keys
    assert keys["1706.03762"][2] == "Attention Is All You Need"
    first = library.entries[0]
    assert first.abstract.startswith("Extended human presence")
    assert first.text.startswith(
        "Probabilistic Forecasting of Radiation Exposure for Spaceflight\n\n"
    )
    # One entry whose field never closes and one with nothing to find it by: skipped,
    # counted with their number and key; the others all read.
    assert [s.line() for s in library.skipped] == [
        "entry 6 (broken_entry_2024): line 57: not valid BibTeX",
        "entry 7: no arXiv id, DOI or title",
    ]
    assert library.summary() == (
        "BibTeX, 5 entries (2 by arXiv id, 1 by DOI, 2 by title only); 2 entries skipped"
    )


def test_mendeley_bibtex_export() -> None:
    library = read("mendeley_export.bib")
    assert library.format == "bibtex"
    assert list(found(library)) == [
        "2411.17775",  # arxivId
        "2411.17791",  # `journal = {arXiv preprint arXiv:2411.17791}`
        "doi:10.1109/cvpr.2016.90",
        "hep-th/9711200",
    ]
    assert library.entries[1].title == "Cardinal Sequences of Lindelöf scattered P-spaces"
    assert library.entries[0].doi == "10.1016/j.dark.2024.101730"
    assert library.skipped == ()


def test_ris_exports() -> None:
    zotero = read("zotero_export.ris")
    assert zotero.format == "ris"
    assert list(found(zotero)) == [
        "2411.17703",
        "doi:10.1016/j.segan.2024.101477",
        "title:the texbook",
    ]
    assert [s.line() for s in zotero.skipped] == ["entry 4: no arXiv id, DOI or title"]
    mendeley = read("mendeley_export.ris")
    assert list(found(mendeley)) == [
        "doi:10.1016/j.dark.2024.101730",
        "2411.17791",
        "doi:10.1109/cvpr.2016.90",
    ]
    assert mendeley.entries[0].abstract.startswith("Observations of galaxies")  # N2
    assert mendeley.entries[0].key == "Vavrycuk2024"


def test_csl_json_export() -> None:
    library = read("zotero_export.json")
    assert library.format == "csl-json"
    assert list(found(library))[:2] == ["2411.17703", "doi:10.1016/j.segan.2024.101477"]
    assert library.skipped[0].line() == (
        "entry 5 (http://zotero.org/users/1234567/items/STUV2345): no arXiv id, DOI or title"
    )


def test_format_is_told_by_content_not_by_name() -> None:
    data = (LIBRARY / "zotero_export.ris").read_bytes()
    assert read_library(data, name="library.bib").format == "ris"
    assert detect_format("% comment\n@article{x, title={y}}") == "bibtex"
    assert detect_format("  [ ]") == "csl-json"
    assert detect_format("just some text") is None
    with pytest.raises(LibraryError, match="not a BibTeX, RIS or CSL-JSON export"):
        read_library(b"just some text", name="notes.txt")


def test_encodings_a_library_comes_in() -> None:
    text = "@article{a, title={Lindelöf spaces}}"
    for data in (
        text.encode("utf-8-sig"),
        text.encode("utf-16"),
        text.encode("cp1252"),
    ):
        assert read_library(data).entries[0].title == "Lindelöf spaces"


# -- hostile files ---------------------------------------------------------------------------


def test_a_file_too_large_is_refused_saying_so() -> None:
    with pytest.raises(LibraryError, match="larger than 20 MB: export one collection"):
        read_library(b" " * (MAX_LIBRARY_BYTES + 1), name="huge.bib")


def test_entries_past_the_cap_are_left_out_and_counted() -> None:
    items = [{"id": str(i), "title": f"Paper {i}"} for i in range(MAX_ENTRIES + 3)]
    library = read_library(json.dumps(items).encode())
    assert len(library.entries) == MAX_ENTRIES
    assert library.left_out == 3
    assert "3 entries past the first 50,000 left out" in library.summary()


def test_a_large_bibtex_file_reads_in_reasonable_time() -> None:
    entry = (LIBRARY / "zotero_export.bib").read_text().split("@misc{broken")[0]
    copies = 2000
    text = "\n".join(entry.replace("{", "{", 1) for _ in range(copies))
    # CPU time of this process: a busy machine (or tests run in parallel) does not count.
    started = time.process_time()
    library = read_library(text.encode())
    took = time.process_time() - started
    assert len(library.entries) + len(library.skipped) == 5 * copies
    assert took < 30, f"{took:.1f}s for {len(text) / 1e6:.1f} MB"


@pytest.mark.parametrize(
    "data",
    [
        b"@article{a, title={" + b"{" * 100_000 + b"}}",
        b"@article{a, title={" + b"{" * 50_000 + b"x" + b"}" * 50_000 + b"}}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"items": 5}',
        b'[1, null, true, "x", [], {"title": 5, "DOI": [1], "id": {}}]',
        b"TY  - JOUR\nTI  - \x00\x00\nER  - \n" * 3,
        b"TY  - JOUR\n" + b"N1  - " + b"arXiv" * 100_000 + b"\n",
        b"@article{" + b"a" * 100_000,
        b"@@@@@@@@@@@@@@@@@article{x,}" * 1000,
        b"@article{x, note={" + b"arxiv:" * 100_000 + b"}}",
        "@article{x, title={\u202e\ufffe\U0010ffff\u0301}}".encode(),
    ],
)
def test_hostile_files_are_read_or_refused_never_anything_else(data: bytes) -> None:
    started = time.process_time()
    try:
        library = read_library(data)
    except LibraryError as exc:
        assert str(exc)
    else:
        for entry in library.entries:
            assert "\x00" not in entry.title + entry.abstract + entry.key
            assert entry.feedback_key
    assert time.process_time() - started < 20


PIECES = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=()), max_size=20),
    st.sampled_from(("\x00", "\x0b", "\ufffe", "\U0010ffff", "\u202e", "\u0301", "\\", '\\"')),
    st.sampled_from(("{" * 300, "}" * 300, "a" * 5000, "$", "@misc{", "TY  - ", "ER  - ")),
    st.sampled_from(("arXiv:2411.17703", "10.48550/arXiv.2411.17703", "doi:10.1/x", ",", "=")),
)
HOSTILE = st.lists(PIECES, max_size=8).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | HOSTILE,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE, inner, max_size=4),
    max_leaves=12,
)


@SETTINGS
@given(title=HOSTILE, note=HOSTILE, doi=HOSTILE)
@example(title="{" * 300, note="arXiv:2411.17703", doi="")
def test_fuzz_bibtex_a_good_entry_beside_a_hostile_one_is_kept(
    title: str, note: str, doi: str
) -> None:
    hostile = f"@article{{bad,\n title = {{{title}}},\n note = {{{note}}},\n doi = {{{doi}}}\n}}\n"
    good = "@article{good, title = {Good}, eprint = {2411.17775}, archivePrefix = {arXiv}}\n"
    library = read_library((hostile + good).encode("utf-8", "surrogatepass"))
    assert "2411.17775" in {e.arxiv for e in library.entries}
    for entry in library.entries:
        assert "\x00" not in entry.title + entry.abstract
        assert len(entry.title) <= 1000


@SETTINGS
@given(lines=st.lists(HOSTILE, max_size=6))
def test_fuzz_ris_a_good_record_beside_a_hostile_one_is_kept(lines: list[str]) -> None:
    hostile = "TY  - JOUR\n" + "\n".join(f"TI  - {line}" for line in lines) + "\nER  - \n"
    good = "TY  - JOUR\nTI  - Good\nUR  - https://arxiv.org/abs/2411.17775\nER  - \n"
    library = read_library((hostile + good).encode("utf-8", "surrogatepass"))
    assert "2411.17775" in {e.arxiv for e in library.entries}


@SETTINGS
@given(item=JSON_VALUES)
def test_fuzz_csl_json_an_item_of_any_type_beside_a_good_one(item: object) -> None:
    good = {"id": "good", "title": "Good", "URL": "http://arxiv.org/abs/2411.17775"}
    data = json.dumps([item, good]).encode("utf-8", "surrogatepass")
    library = read_library(data)
    assert "2411.17775" in {e.arxiv for e in library.entries}
    assert len(library.entries) + len(library.skipped) == 2


@SETTINGS
@given(data=st.binary(max_size=2000) | HOSTILE.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_fuzz_any_bytes_are_a_library_or_a_library_error(data: bytes) -> None:
    try:
        library = read_library(data)
    except LibraryError:
        return
    assert all(e.feedback_key for e in library.entries)


@SETTINGS
@given(text=HOSTILE)
def test_fuzz_paper_key_is_a_key_or_a_paper_ref_error(text: str) -> None:
    try:
        key = paper_key(text)
    except PaperRefError as exc:
        assert "is not an arXiv id" in str(exc)
        assert "\x00" not in str(exc)
    else:
        assert len(key) <= 255 and key.strip() == key


def test_an_empty_file_is_an_empty_library_and_other_json_is_refused() -> None:
    for data, name, form in (
        (b"", "library.bib", "bibtex"),
        (b"\n  \n% exported by JabRef\n", "library.bib", "bibtex"),
        (b"\xef\xbb\xbf\r\n", "my.ris", "ris"),
        (b"", "export.json", "csl-json"),
    ):
        library = read_library(data, name=name)
        assert (library.format, library.entries, library.skipped) == (form, (), ())
        assert library.summary() == "an empty file: 0 entries (nothing liked from it yet)"
    assert read_library(b"[]").summary().startswith("CSL-JSON, 0 entries")
    for data in (b'{"not": "a list"}', b'{"items": 5}', b"{}"):
        with pytest.raises(LibraryError, match=r"x\.json: not a CSL-JSON export: a JSON object"):
            read_library(data, name="x.json")
    # One item on its own (citeproc's export of one paper) is still a library of one.
    one = read_library(b'{"id": "a", "type": "article", "title": "Lindel\\u00f6f spaces"}')
    assert [e.title for e in one.entries] == ["Lindelöf spaces"]
