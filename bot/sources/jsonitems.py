"""A JSON array read item by item (`items_one_by_one`), for a body the JSON decoder cannot
read whole because one item is nested too deep: that item is left out (`TooDeep`), not the
whole body. Apart from the Hugging Face source that uses it: a small parser of its own,
fuzzed on its own. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any


class TooDeep:
    """An item of the array nested deeper than the JSON decoder goes (left out)."""


_JSON_SPACE_RE = re.compile(r"[ \t\n\r]*")
# A JSON string (skipped whole: brackets inside it do not count), or a bracket. A string
# never closed matches to the end (`closed` unset) instead of failing: a failed match would
# be retried from every later quote, quadratic on `"\\"\\"\\"…`.
_JSON_BRACKET_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?P<closed>")?|[\[\]{}]')


def items_one_by_one(text: str) -> list[Any]:
    """The top-level JSON array in `text`, each item decoded alone; an item too deep to
    decode becomes `TooDeep`. ValueError if `text` is not one array of JSON values."""
    decoder = json.JSONDecoder(parse_int=json_int)
    position = _JSON_SPACE_RE.match(text, 0).end()  # type: ignore[union-attr]
    if not text.startswith("[", position):
        raise ValueError("not an array")
    items: list[Any] = []
    position = _JSON_SPACE_RE.match(text, position + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", position):
        position += 1
    else:
        while True:
            try:
                item, position = decoder.raw_decode(text, position)
            except RecursionError:
                item, position = TooDeep(), _end_of_value(text, position)
            items.append(item)
            position = _JSON_SPACE_RE.match(text, position).end()  # type: ignore[union-attr]
            if text.startswith(",", position):
                position = _JSON_SPACE_RE.match(text, position + 1).end()  # type: ignore[union-attr]
                continue
            if text.startswith("]", position):
                position += 1
                break
            raise ValueError(f"expected ',' or ']' at {position}")
    if text[position:].strip(" \t\n\r"):
        raise ValueError(f"extra data at {position}")
    return items


def _end_of_value(text: str, start: int) -> int:
    """Where the array or object at `start` ends, its brackets matched with a list (no
    recursion). ValueError if they do not match."""
    if not text.startswith(("[", "{"), start):
        raise ValueError(f"expected an array or object at {start}")
    closing = {"[": "]", "{": "}"}
    expected: list[str] = []
    for token in _JSON_BRACKET_RE.finditer(text, start):
        bracket = token.group()
        if bracket.startswith('"'):
            if token.group("closed") is None:
                raise ValueError(f"a string that never ends at {token.start()}")
            continue
        if bracket in closing:
            expected.append(closing[bracket])
        elif bracket in "]}":
            if not expected or expected.pop() != bracket:
                raise ValueError(f"unbalanced {bracket!r} at {token.start()}")
            if not expected:
                return token.end()
    raise ValueError("the JSON ends inside an array or object")


def json_int(text: str) -> int | str:
    """A JSON integer; one too long to be a count stays text (Python refuses to convert
    more than 4300 digits, which would fail the whole body for one item)."""
    return int(text) if len(text) <= 18 else text
