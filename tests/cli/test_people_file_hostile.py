"""Hostile CSV files for `subscribe --from-file` (bot.config.people): whatever a file holds
(huge cells, NUL, odd Unicode, wrong columns, broken quoting, bytes that are no UTF-8),
`read_people` returns the rows it could check, each bad one named by its line, or refuses
the file with a ConfigError; never another exception. Every row it accepts is one the
config file would accept, and a file of good rows reads back as written."""

from __future__ import annotations

import csv
import io
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from bot.config import PeopleFile, read_people
from bot.config.fields import NAME_RE
from bot.config.people import COLUMNS, MAX_SHOWN, split_rules
from bot.core.checks import check_address, check_label
from bot.core.errors import ConfigError
from bot.rules import parse_rule

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PIECES = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    st.sampled_from(("\x00", "\x0b", "\r", "\n", "\u2028", "\ufeff", "\u202e", "\u0301" * 9)),
    st.sampled_from(('"', '""', "“", ";", ",", "\t", "|", "\\", "=cmd|' /C calc'!A0")),
    st.sampled_from(("a" * 200_000, "é" * 60_000, "robot; " * 400, "x@" + "a" * 300)),
    st.sampled_from(("ada@lab.example", "robot", '"diffusion policy"', "cs.RO", "weekly")),
)
CELL = st.lists(PIECES, max_size=5).map("".join)
HEADER = st.one_of(
    st.lists(  # wrong columns: unknown, missing, twice, hostile
        st.one_of(st.sampled_from(COLUMNS), st.sampled_from(("EMAIL", "Max papers", "rule")), CELL),
        max_size=6,
    ),
    st.lists(st.sampled_from(COLUMNS[3:]), unique=True, max_size=5).flatmap(
        lambda more: st.permutations(["email", "rules", "name", *more])
    ),
)


def check(found: PeopleFile, text: str) -> None:
    """What `read_people` gives is sound: lines in order and in the file, every accepted
    row valid by the schema's checks, every problem shown short."""
    lines = text.count("\n") + 1
    numbers = [p.line for p in found.people] + [b.line for b in found.bad]
    assert all(2 <= n <= lines for n in numbers)
    assert len(set(numbers)) == len(numbers)
    for person in found.people:
        check_address(person.email)
        assert person.name is None or NAME_RE.match(person.name)
        assert person.rules and len(set(person.rules)) == len(person.rules)
        for rule in person.rules:
            parse_rule(rule)
        for label in person.labels.values():
            assert check_label(label) == label
    for bad in found.bad:
        assert bad.problems
        for line in bad.lines():
            assert all(len(part) <= MAX_SHOWN + 40 for part in line.split("\n"))


def read(data: bytes) -> PeopleFile | None:
    try:
        return read_people(data, source="people.csv", max_rules=50)
    except ConfigError as exc:
        assert exc.problems
        return None


@SETTINGS
@given(st.binary(max_size=400))
@example(b"email,rules\n\x00,\x00\n")
@example(b"\xef\xbb\xbfemail;rules\r\nada@lab.example;robot\r\n")
@example(b'email,rules\n"ada@lab.example","robot""\n')
@example(b"email\trules\n" + b"a" * 200_000 + b"\trobot\n")
def test_any_bytes_are_people_or_a_clear_refusal(data: bytes) -> None:
    found = read(data)
    if found is not None:
        check(found, data.decode("utf-8-sig"))


@SETTINGS
@given(
    header=HEADER,
    rows=st.lists(st.lists(CELL, max_size=7), max_size=6),
    delimiter=st.sampled_from((",", ";", "\t")),
)
@example(header=["email", "rules"], rows=[["ada@lab.example", "a" * 200_000]], delimiter=",")
@example(header=["email", "rules", "name"], rows=[["a@b.example", "x", "\u202eada"]], delimiter=",")
@example(header=["email", "rules"], rows=[["ada@lab.example", "robot\x00"]], delimiter=";")
def test_any_rows_under_any_header(
    header: list[str], rows: list[list[str]], delimiter: str
) -> None:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    text = out.getvalue()
    found = read(text.encode("utf-8"))
    event("refused" if found is None else f"{bool(found.people)} people, {bool(found.bad)} bad")
    if found is not None:
        check(found, text)


NAMES = st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True)
RULES = st.lists(
    st.sampled_from(
        ("robot", '"diffusion policy"', 'marl OR "multi-agent; RL"', "cat:cs.RO", "-survey x")
    ),
    min_size=1,
    max_size=3,
    unique=True,
)


@st.composite
def good_files(draw: Any) -> tuple[str, list[dict[str, Any]]]:
    """A file of good rows (columns in any order and case, any delimiter) and its rows."""
    count = draw(st.integers(0, 8))
    names = draw(st.lists(NAMES, min_size=count, max_size=count, unique=True))
    people = []
    for number, name in enumerate(names):
        rules = draw(RULES)
        people.append(
            {
                "name": name if draw(st.booleans()) else "",
                "email": f"{name.replace('.', '')}{number}@lab.example",
                "rules": rules,
                "schedule": draw(st.sampled_from(("", "daily", "weekly"))),
            }
        )
    columns = draw(st.permutations(["name", "email", "rules", "schedule"]))
    shown = [draw(st.sampled_from((c, c.upper(), c.title()))) for c in columns]
    delimiter = draw(st.sampled_from((",", ";", "\t")))
    out = io.StringIO()
    writer = csv.writer(
        out, delimiter=delimiter, lineterminator=draw(st.sampled_from(("\n", "\r\n")))
    )
    writer.writerow(shown)
    for person in people:
        cells = {**person, "rules": draw(st.sampled_from(("; ", ";", "\n"))).join(person["rules"])}
        writer.writerow([cells[c] for c in columns])
    return out.getvalue(), people


@SETTINGS
@given(good_files())
def test_good_rows_read_back_as_written(file: tuple[str, list[dict[str, Any]]]) -> None:
    text, people = file
    found = read_people(text.encode("utf-8"), source="people.csv", max_rules=50)
    assert found.bad == ()
    assert [
        (p.name or "", p.email, list(p.rules), p.settings.get("schedule", "")) for p in found.people
    ] == [(p["name"], p["email"], p["rules"], p["schedule"]) for p in people]


def test_rules_split_outside_quotes_only() -> None:
    assert split_rules('robot; "a;b" x;;\n cat:cs.RO ;') == ["robot", '"a;b" x', "cat:cs.RO"]
    assert split_rules("“a;b”;c") == ["“a;b”", "c"]
    assert split_rules(" ; \n ") == []


def test_line_numbers_are_the_editor_s() -> None:
    """Lines end at LF or CRLF (a CR alone is in a line); a file of CRs alone (Excel's "CSV
    (Macintosh)") ends its lines there."""
    found = read_people(
        b'email,rules\r\n\r\nbob@lab.example,"a\r\nb"\r\ncy@lab.example,x\ry\n',
        source="people.csv",
        max_rules=50,
    )
    assert [p.line for p in found.people] == [3]
    assert found.bad[0].lines() == [
        "line 5: not CSV: a line break (CR) inside a cell that is not in quotes"
    ]
    mac = read_people(b"email,rules\rbob@lab.example,robot\r", source="p.csv", max_rules=50)
    assert [(p.line, p.email) for p in mac.people] == [(2, "bob@lab.example")]
