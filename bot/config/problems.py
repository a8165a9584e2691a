"""How a validation failure reads: one line per problem, at its key
(`subscribers[0].email: ...`), in the words of the file rather than of pydantic.

Shared by loading the file and by checking one subscriber given elsewhere (the command
line, Slack, the web). Must not validate anything itself.
"""

from __future__ import annotations

from pydantic import ValidationError

from bot.config.fields import SECRET_KEYS


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


def validation_problems(error: ValidationError) -> list[str]:
    """The problems of a failed validation, one line each, at the key they are about."""
    problems = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if p not in ("function-after",))
        message = item["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        if item["type"] == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            message = (
                "a secret does not belong in the file: set it in an environment variable "
                f"and name that variable in {key}_env"
                if key in SECRET_KEYS
                else f"unknown key {key!r}"
            )
        elif item["type"] == "missing":
            message = "required key is missing"
        problems.append(f"{_format_loc(loc)}: {message}")
    return problems
