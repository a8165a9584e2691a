"""How a validation failure reads: one line per problem, at its key
(`subscribers[0].email: ...`), in the words of the file rather than of pydantic.

Shared by loading the file and by checking one subscriber given elsewhere (the command
line, Slack, the web). Must not validate anything itself.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from bot.config.fields import SECRET_KEYS

# Parts of pydantic's location that are no key of the file: a validator's, and the tags of
# a rule's two forms (a string, a table: `bot.config.subscribers.RuleEntry`).
_NOT_KEYS = ("function-after", "rule-string", "rule-table")


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "from_":
            out += ".from"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def known_keys(model: type[BaseModel], loc: Sequence[int | str], raw: Any) -> list[str]:
    """The keys the table at `loc` (a path into the data: `("sources", 0)`) may hold, by
    the schema `model`; `raw` is the data, for a table whose keys depend on one of its
    values (a source's `kind`: the model's `keys_for(table)`). Secrets filled from the
    environment are no key of the file."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            raw = raw[part] if isinstance(raw, list) and 0 <= part < len(raw) else None
            continue
        fields = {f.alias or name: f for name, f in current.model_fields.items()}
        field = fields.get(part) or current.model_fields.get(part)
        current = _model_in(field.annotation) if field is not None else None
        if current is None:
            return []
        raw = raw.get(part) if isinstance(raw, dict) else None
    keys_for = getattr(current, "keys_for", None)
    if keys_for is not None:
        return list(keys_for(raw))
    return [f.alias or name for name, f in current.model_fields.items() if not f.exclude]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: itself, or inside `X | None`, `list[X]`, `dict[str, X]`."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def nearest(key: str, known: Sequence[str]) -> str | None:
    """The known key `key` was most likely meant to be (`deamon` -> `daemon`), if any."""
    by_case = {k.lower(): k for k in known}
    found = difflib.get_close_matches(key.lower(), list(by_case), n=1, cutoff=0.6)
    return by_case[found[0]] if found else None


# Keys that earlier versions read, by name: what to do instead (an upgraded config meets a
# plain instruction, not a guess at the nearest key).
RETIRED_KEYS = {
    "render_processes": "no longer read: each digest is rendered where it is sent; remove the line",
}


def validation_problems(
    error: ValidationError,
    *,
    model: type[BaseModel] | None = None,
    data: Any = None,
) -> list[str]:
    """The problems of a failed validation, one line each, at the key they are about; an
    unknown key with the nearest known one of its table (by `model`, read over `data`)."""
    problems = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if p not in _NOT_KEYS)
        message = item["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        if item["type"] == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            message = (
                "a secret does not belong in the file: set it in an environment variable "
                f"and name that variable in {key}_env"
                if key in SECRET_KEYS
                else f"{key!r} is {RETIRED_KEYS[key]}"
                if key in RETIRED_KEYS
                else f"unknown key {key!r}"
            )
            known = known_keys(model, loc[:-1], data) if model is not None else []
            plain = key not in SECRET_KEYS and key not in RETIRED_KEYS
            if plain and (meant := nearest(key, known)):
                message += f" (did you mean {meant!r}?)"
        elif item["type"] == "missing":
            message = "required key is missing"
        problems.append(f"{_format_loc(loc)}: {message}")
    return problems
