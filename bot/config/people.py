"""People listed in a CSV file (`paperbell subscribe --from-file`): read, each row checked by
the schema of `[[subscribers]]`, every bad row reported with its line and why.

The file: a header line naming the columns (any order, any case), then one subscriber a
row. `email` and `rules` are required; `name`, `labels`, `categories`, `include`,
`max_papers`, `schedule`, `day`, `time`, `timezone`, `notify_empty`, `summaries`,
`language`, `similar_max` and `similar_min` may be given (an empty cell: the default).
Several rules in one cell are separated by `;` (or line breaks in the cell); a `;`
inside a quoted phrase stays in the rule. `labels`, `categories` and `include` are lists
too: `;`-separated, the first label naming the first rule ('' for none). The cells are
separated by commas, semicolons or tabs, whichever the header line uses. A name and an
address appear once in a file.

Pure: bytes in, people and problems out. Must not read the store nor the environment: what
is stored already (a name taken, an address subscribed) is the caller's business.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bot.config.problems import nearest, validation_problems
from bot.config.subscribers import NO_LANGUAGE, SubscriberConfig, rule_entries, too_many_rules
from bot.core.errors import ConfigError
from bot.core.plurals import plural

REQUIRED = ("email", "rules")
LISTS = ("labels", "categories", "include")
# Settings of the subscriber, as the store keeps them (bot.store.subscribers.SETTINGS).
SETTINGS = (
    "max_papers",
    "schedule",
    "day",
    "time",
    "timezone",
    "notify_empty",
    "summaries",
    "language",
    "similar_max",
    "similar_min",
)
COLUMNS = ("name", *REQUIRED, *LISTS, *SETTINGS)
DELIMITERS = (",", ";", "\t")
MAX_PEOPLE_BYTES = 100_000_000  # ~500,000 people: more is no list of people
MAX_CELL = 50_000  # characters: 50 rules of 500 characters with their separators, and more
MAX_SHOWN = 300  # characters of a problem shown: a huge cell is not printed back whole
_QUOTES = '"“”„'  # as the rule language reads them
_INDEXED = (
    (re.compile(r"rules\[(\d+)\]\.label"), "label of rule {}"),
    (re.compile(r"rules\[(\d+)\]"), "rule {}"),
)
_LISTED = re.compile(r"\b(categories|include)\[\d+\]")


@dataclass(frozen=True)
class Person:
    """A row that is right: its values as the store keeps them (`settings`: the columns of
    SETTINGS given, checked and tidied). `name` None: none given (the caller makes one)."""

    line: int
    name: str | None
    email: str
    rules: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    categories: tuple[str, ...] = ()
    include: tuple[str, ...] | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BadRow:
    """A row left out, and why (one line per problem)."""

    line: int
    problems: tuple[str, ...]

    def lines(self) -> list[str]:
        """`line 7: email: ...`, one per problem; a long one cut short."""
        return [f"line {self.line}: {shorten(problem)}" for problem in self.problems]


@dataclass(frozen=True)
class PeopleFile:
    """The rows that are right, and those that are not, each in the file's order; `names`:
    every name the file gives, bad rows' too (no name made for a row without one may take
    it)."""

    people: tuple[Person, ...]
    bad: tuple[BadRow, ...]
    names: frozenset[str] = frozenset()


def read_people(data: bytes, *, source: str, max_rules: int) -> PeopleFile:
    """The people of a CSV file, every row checked (`max_rules`: [digest] max_rules). A file
    that cannot be read as one (not UTF-8, too big, no header, a column missing or unknown)
    is a ConfigError naming every problem, in `source`'s name."""
    if len(data) > MAX_PEOPLE_BYTES:
        raise ConfigError(
            [f"{len(data):,} bytes: more than the {MAX_PEOPLE_BYTES:,} a file may have"],
            source=source,
            hint="split it into several files",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            [f"line {line}: not UTF-8 (byte {exc.start + 1} is {data[exc.start]:#04x})"],
            source=source,
            hint="save the file as UTF-8 (a spreadsheet: CSV UTF-8)",
        ) from None
    rows = _rows(text)
    header = next(rows, None)
    if header is None:
        raise ConfigError(
            ["no header: the first line names the columns, e.g. name,email,rules"],
            source=source,
        )
    line, columns = header
    if isinstance(columns, str):
        raise ConfigError([f"line {line}: the header is no CSV: {columns}"], source=source)
    names = _column_names(columns, line=line, source=source)
    people: list[Person] = []
    bad: list[BadRow] = []
    names_seen: dict[str, int] = {}
    addresses_seen: dict[str, int] = {}
    for line, cells in rows:
        if isinstance(cells, str):
            bad.append(BadRow(line, (f"not CSV: {cells}",)))
            continue
        if not any(cell.strip() for cell in cells):
            continue  # an empty line
        problems = _shape_problems(cells, len(names))
        values = {name: cells[i].strip() for i, name in enumerate(names) if i < len(cells)}
        person, found = _person(line, values, max_rules=max_rules)
        problems += found
        for key, seen, what in (
            (values.get("name", ""), names_seen, "name"),
            (values.get("email", "").lower(), addresses_seen, "address"),
        ):
            if not key or len(key) > MAX_CELL:
                continue
            if key in seen:
                problems.append(
                    f"{'name' if what == 'name' else 'email'}: the {what} {key!r} is on line "
                    f"{seen[key]} already (one row a subscriber: several rules go in one "
                    "cell, separated by ;)"
                )
            else:
                seen[key] = line
        if problems:
            bad.append(BadRow(line, tuple(problems)))
        elif person is not None:
            people.append(person)
    return PeopleFile(tuple(people), tuple(bad), frozenset(names_seen))


def _rows(text: str) -> Iterator[tuple[int, list[str] | str]]:
    """Each record but empty lines, with the line it starts on; a record that is no CSV as
    its error. The delimiter is the one the first line (the header) uses most."""
    if "\n" not in text:  # classic Mac line ends (Excel's "CSV (Macintosh)"): CR alone
        text = text.replace("\r", "\n")
    first = text.lstrip("\r\n").split("\n", 1)[0]
    delimiter = max(DELIMITERS, key=first.count)
    # Lines end at LF (CRLF too), as editors number them: a CR alone is no line end.
    reader = csv.reader(io.StringIO(text, newline="\n"), delimiter=delimiter, strict=True)
    line = 1
    while True:
        start = line
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = reader.line_num + 1
            yield start, _csv_problem(exc)
            continue
        line = reader.line_num + 1
        if cells:
            yield start, cells


def _csv_problem(exc: csv.Error) -> str:
    """What the csv module found wrong, in the file's words."""
    text = str(exc)
    if "new-line character seen in unquoted field" in text:
        return "a line break (CR) inside a cell that is not in quotes"
    return text.replace("field", "cell")


def _column_names(columns: Sequence[str], *, line: int, source: str) -> list[str]:
    """The header's column names, checked: each known, once, the required ones there."""
    # Case, spaces, hyphens and underscores aside: `E-mail`, `Max papers` are known.
    known = {column.replace("_", ""): column for column in COLUMNS}
    names = [re.sub(r"[\s_-]+", "", c.lower()) for c in columns]
    names = [known.get(name, name) for name in names]
    problems = []
    for index, name in enumerate(names):
        if name not in COLUMNS:
            meant = nearest(name, COLUMNS)
            hint = f" (did you mean {meant!r}?)" if meant else ""
            shown = shorten(repr(columns[index]))
            problems.append(f"line {line}: unknown column {shown}{hint}")
        elif name in names[:index]:
            problems.append(f"line {line}: the column {name!r} is given twice")
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        problems.append(
            f"line {line}: the header lacks {' and '.join(repr(m) for m in missing)} (it has "
            f"{shorten(', '.join(repr(c) for c in columns)) or 'no column'})"
        )
    if problems:
        raise ConfigError(
            problems,
            source=source,
            hint=f"the first line names the columns: email and rules, and any of "
            f"{', '.join(c for c in COLUMNS if c not in REQUIRED)}",
        )
    return names


def _shape_problems(cells: Sequence[str], columns: int) -> list[str]:
    extra = [cell for cell in cells[columns:] if cell.strip()]
    if extra:
        return [f"{plural(len(cells), 'cell')}, but the header names {plural(columns, 'column')}"]
    long = [len(cell) for cell in cells if len(cell) > MAX_CELL]
    if long:
        return [f"a cell of {long[0]:,} characters (at most {MAX_CELL:,})"]
    return []


def _person(
    line: int, values: dict[str, str], *, max_rules: int
) -> tuple[Person | None, list[str]]:
    """The row's person, checked by the schema of [[subscribers]], or its problems."""
    if any(len(value) > MAX_CELL for value in values.values()):
        return None, []  # said already
    problems = []
    rules = split_rules(values.get("rules", ""))
    if not rules:
        problems.append("rules: no rule (give one or more, separated by ;)")
    labels = [label.strip() for label in values.get("labels", "").split(";")]
    if len(labels) > max(len(rules), 1):
        problems.append(
            f"labels: {plural(len(labels), 'label')} for {plural(len(rules), 'rule')}: the "
            "first label names the first rule, the second the second"
        )
    labelled = {rule: label for rule, label in zip(rules, labels, strict=False) if label}
    email = values.get("email", "")
    if not email:
        problems.append("email: no address")
    data: dict[str, Any] = {
        "name": values.get("name") or "subscriber",
        "email": email or "unknown@example.org",
        "rules": rule_entries(rules or ["placeholder"], labelled),
    }
    for key in ("categories", "include"):
        if values.get(key):
            data[key] = [v for v in re.split(r"[;,\s]+", values[key]) if v]
    given: dict[str, str | None] = {key: values[key] for key in SETTINGS if values.get(key)}
    if (given.get("language") or "").lower() in NO_LANGUAGE:
        given["language"] = None
    data |= given
    try:
        checked = SubscriberConfig.model_validate(data)
    except ValidationError as exc:
        problems += [_in_file_words(p) for p in validation_problems(exc, model=SubscriberConfig)]
        return None, problems
    if too_many := too_many_rules(len(rules), max_rules):
        problems.append(f"rules: {too_many}")
    if problems:
        return None, problems
    person = Person(
        line=line,
        name=values.get("name") or None,
        email=checked.email or email,
        rules=checked.rule_texts,
        labels=checked.labels,
        categories=tuple(checked.categories),
        include=tuple(checked.include) if "include" in data else None,
        settings={key: getattr(checked, key) for key in given},
    )
    return person, []


def split_rules(cell: str) -> list[str]:
    """A cell's rules: separated by `;` or line breaks, outside quotes; blank ones dropped."""
    rules: list[str] = []
    current: list[str] = []
    quoted = False
    for char in cell:
        if char in _QUOTES:
            quoted = not quoted
        if char in ";\r\n" and not quoted:
            rules.append("".join(current))
            current = []
        else:
            current.append(char)
    rules.append("".join(current))
    return [rule.strip() for rule in rules if rule.strip()]


def _in_file_words(problem: str) -> str:
    """A schema problem in the file's words: `rules[1]` is rule 2, `categories[0]` the
    categories."""
    for pattern, words in _INDEXED:
        problem = pattern.sub(_numbered(words), problem)
    return _LISTED.sub(r"\1", problem)


def _numbered(words: str) -> Callable[[re.Match[str]], str]:
    """A replacement: `words` with the 0-based index matched as a 1-based number."""
    return lambda found: words.format(int(found.group(1)) + 1)


def shorten(text: str) -> str:
    """A problem as shown: its lines cut at MAX_SHOWN characters."""
    return "\n".join(
        part if len(part) <= MAX_SHOWN else part[:MAX_SHOWN] + "…" for part in text.split("\n")
    )
