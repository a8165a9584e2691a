"""The manual's generated parts, filled in as MkDocs reads each page (mkdocs.yml `hooks:`).

- `<!-- config-reference -->`: every section and key of config.example.toml, with its comment
  and the schema's default (bot.config), so the reference is never retyped.
- `{{ code.NAME }}`: a number the code holds (`VALUES`), so the prose states the code's.
- `<!-- changelog -->`: CHANGELOG.md.
- The CLI page must name every command of `paperbell --help` as `paperbell COMMAND`
  (mkdocs-click writes it from the click commands); a missing one fails the build.

The same functions serve tests/project/test_docs.py. This file must not import MkDocs at
its top: the tests import it without a build.
"""

from __future__ import annotations

import html
import json
import re
import tomllib
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.toml"
CHANGELOG = ROOT / "CHANGELOG.md"

CONFIG_MARK = "<!-- config-reference -->"
CHANGELOG_MARK = "<!-- changelog -->"
VALUE_RE = re.compile(r"\{\{ code\.([a-z_]+) \}\}")
CLI_PAGE = "cli.md"

_HEADING_RE = re.compile(r"^(\[\[?)([a-z_.]+)(\]\]?)$")
_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")

# -- config.example.toml, read as sections of commented keys ---------------------------------


@dataclass
class Block:
    """Keys written together under one comment, with their example values."""

    text: list[str] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Table:
    """A section of the file: `[name]`, `[[name]]`, or the top level (name "")."""

    name: str
    array: bool = False
    intro: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        """A `[[sources]]` table's kind, from its example."""
        for block in self.blocks:
            for key, value in block.keys:
                if key == "kind":
                    return str(tomllib.loads(f"v = {value}")["v"])
        return None


def _uncomment(line: str) -> tuple[int, str]:
    """How many `#` marks open the line, and what follows them."""
    depth = 0
    while line.startswith("#"):
        depth += 1
        line = line[1:]
        if line.startswith(" "):
            line = line[1:]
    return depth, line.rstrip()


def _balanced(value: str) -> bool:
    return value.count("[") <= value.count("]") and value.count("{") <= value.count("}")


def read_example(text: str) -> list[Table]:
    """The file's tables, each with its introduction and its blocks of keys, in order."""
    tables = [Table("")]
    prose: list[str] = []  # comment lines since the last key or heading
    last_was_key = False
    lines = iter(text.splitlines())
    for raw in lines:
        depth, content = _uncomment(raw)
        if not raw.strip():
            prose.append("")
            last_was_key = False
            continue
        heading = _HEADING_RE.match(content)
        if heading:
            intro = _paragraph_before(prose)
            tables.append(Table(heading.group(2), heading.group(1) == "[[", intro))
            prose, last_was_key = [], False
            continue
        key = _KEY_RE.match(content)
        if key and not content.startswith(" "):
            value = key.group(2)
            while not _balanced(value):  # a value over several lines (an array)
                value += " " + _uncomment(next(lines))[1].strip()
            table = tables[-1]
            if last_was_key and table.blocks:
                table.blocks[-1].keys.append((key.group(1), value))
            else:
                text_lines = prose
                if not table.blocks and table.name == "":  # the file's opening comment
                    text_lines = _paragraph_before(prose)
                    table.intro = _trim(prose[: len(_trim(prose)) - len(text_lines)])
                table.blocks.append(Block(_trim(text_lines), [(key.group(1), value)]))
            prose, last_was_key = [], True
            continue
        prose.append(content if depth else raw)
        last_was_key = False
    return [t for t in tables if t.blocks or t.intro]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _paragraph_before(prose: list[str]) -> list[str]:
    """The comment lines right above a heading (after the last blank line)."""
    lines = _trim(prose)
    if "" in lines:
        lines = lines[len(lines) - lines[::-1].index("") :]
    return _trim(lines)


# -- the schema: which model each table is, and its defaults ---------------------------------


def _section_models() -> dict[str, Any]:
    """Each table name of the file -> its pydantic model (bot.config)."""
    from bot.config.schema import Config
    from bot.config.servers import EmailServerConfig

    models: dict[str, Any] = {"": Config, "email.servers": EmailServerConfig}
    for name, info in Config.model_fields.items():
        if info.exclude:
            continue
        annotation = info.annotation
        if typing.get_origin(annotation) is list:
            annotation = typing.get_args(annotation)[0]
        candidates = [a for a in typing.get_args(annotation) if a is not type(None)]
        model = candidates[0] if candidates else annotation
        if hasattr(model, "model_fields"):
            models[name] = model
    return models


def _source_options() -> dict[str, Any]:
    """Each source kind -> the model of its options."""
    from bot.config.sections import SOURCE_KINDS, load_builtin_sources

    load_builtin_sources()
    return {kind: cls.Options for kind, cls in SOURCE_KINDS.items() if hasattr(cls, "Options")}


def _common_source_keys() -> set[str]:
    """The options every source kind takes (bot.sources.base.SourceOptions)."""
    from bot.sources.base import SourceOptions

    return set(SourceOptions.model_fields)


def _fields(model: Any) -> dict[str, Any]:
    """A model's keys as a file spells them (aliases: `from`), but those filled at load."""
    return {
        (info.alias or name): info for name, info in model.model_fields.items() if not info.exclude
    }


def table_fields(table: Table) -> dict[str, Any]:
    """The keys a table of the file may hold, with the schema's field for each."""
    models = _section_models()
    if table.name == "sources":
        found = _fields(models["sources"])
        options = _source_options()
        kind = table.kind
        for name, model in options.items():
            if kind is None or name == kind:
                found.update(_fields(model))
        return found
    found = _fields(models[table.name])
    if table.name == "":  # the top level holds only `version`; the rest are sections
        found = {k: v for k, v in found.items() if k not in models}
    return found


def schema_keys() -> set[str]:
    """Every key the schema reads, as `section.key` (`sources.arxiv.categories` for a
    source kind's own options; `subscribers.rules` for the rules)."""
    models = _section_models()
    keys: set[str] = set()
    for section, model in models.items():
        for key in _fields(model):
            if section == "" and key in models:
                continue
            keys.add(f"{section}.{key}" if section else key)
    common = _common_source_keys()
    keys.update(f"sources.{key}" for key in common)
    for kind, model in _source_options().items():
        keys.update(f"sources.{kind}.{key}" for key in _fields(model) if key not in common)
    return keys


def example_keys(tables: list[Table]) -> set[str]:
    """Every key config.example.toml shows, named as `schema_keys` names them."""
    common = _common_source_keys() | {"kind", "name"}
    found: set[str] = set()
    for table in tables:
        if "." in table.name:  # [[email.servers]]: the key `servers` of [email]
            found.add(table.name)
        for block in table.blocks:
            for key, _ in block.keys:
                if table.name == "sources" and key not in common:
                    found.add(f"sources.{table.kind}.{key}")
                else:
                    found.add(f"{table.name}.{key}" if table.name else key)
    return found


def _toml(value: Any) -> str:
    """A default as the file would write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(info: Any) -> tuple[bool, Any]:
    """(whether the key is required, its default)."""
    from pydantic_core import PydanticUndefined

    if info.default_factory is not None:
        return False, info.default_factory()
    if info.default is PydanticUndefined:
        return True, None
    return False, info.default


def _same(example: str, default: Any) -> bool:
    try:
        value = tomllib.loads(f"v = {example}")["v"]
    except tomllib.TOMLDecodeError:
        return False
    return bool(value == default)


# -- the reference, as Markdown --------------------------------------------------------------


def _inline(text: str) -> str:
    """Comment prose as Markdown text: backticked parts kept, the rest escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
        else:
            part = html.escape(part, quote=False)
            part = re.sub(r"([*_\[\]\\])", r"\\\1", part)
            # The file points at the manual's pages by path: a link here.
            out.append(re.sub(r"docs/([a-z-]+)\.md", r"[docs/\1.md](\1.md)", part))
    return "".join(out)


def _prose(lines: list[str], indent: str = "") -> list[str]:
    """Comment lines as paragraphs; indented lines (a grammar, a list) as a code block."""
    out: list[str] = []
    paragraph: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(indent + _inline(" ".join(p.strip() for p in paragraph)))
            out.append("")
            paragraph.clear()
        if code:
            out.extend([indent + "```text", *(indent + c for c in code), indent + "```", ""])
            code.clear()

    for line in lines:
        if not line.strip():
            flush()
        elif line.startswith("  "):
            if paragraph:
                flush()
            code.append(line.rstrip())
        else:
            if code:
                flush()
            paragraph.append(line)
    flush()
    return out


def _anchor(table: Table, seen: set[str]) -> str:
    base = table.name.replace(".", "-") or "top-level"
    if table.name == "sources" and table.kind:
        base = f"sources-{table.kind}"
    anchor, n = base, 2
    while anchor in seen:
        anchor, n = f"{base}-{n}", n + 1
    seen.add(anchor)
    return anchor


def _title(table: Table) -> str:
    if not table.name:
        return "The top level"
    brackets = ("[[", "]]") if table.array else ("[", "]")
    title = f"`{brackets[0]}{table.name}{brackets[1]}`"
    if table.name == "sources" and table.kind:
        title += f': `kind = "{table.kind}"`'
    return title


def _term(key: str, example: str, info: Any | None) -> str:
    shown = example if len(example) <= 80 else example[:77] + "..."
    if info is None:
        raise ValueError(f"config.example.toml: {key} is no key of the schema")
    required, default = _default(info)
    if required:
        return f"`{key}` (required; for example `{shown}`)"
    if default is None or default == "":
        return f"`{key}` (unset by default; for example `{shown}`)"
    if _same(example, default):
        return f"`{key} = {_toml(default)}`"
    return f"`{key} = {_toml(default)}` (for example `{shown}`)"


def render_config_reference(text: str) -> str:
    """config.example.toml as a reference: a heading per table, then each key with its
    default (from the schema) and what the file's comment says about it."""
    out: list[str] = []
    seen: set[str] = set()
    titles: set[str] = set()
    described: set[tuple[str, str]] = set()
    for table in read_example(text):
        fields = table_fields(table)
        blocks = [
            block
            for block in table.blocks
            if block.text or any((table.name, k) not in described for k, _ in block.keys)
        ]  # a second example of keys described above adds nothing
        if not blocks and not table.intro:
            continue
        title = _title(table)
        again = " (another example)" if title in titles else ""
        titles.add(title)
        out += [f"## {title}{again} {{#{_anchor(table, seen)}}}", ""]
        if table.name:  # the file's opening comment is the page's to say
            out += _prose(table.intro)
        for block in blocks:
            terms = [_term(key, value, fields.get(key)) for key, value in block.keys]
            described.update((table.name, key) for key, _ in block.keys)
            body = _prose(block.text, indent="    ")
            if not body:  # keys the section's introduction describes
                out += [f"- {term}" for term in terms] + [""]
                continue
            body[0] = ":   " + body[0][4:]
            out += terms + body
    return "\n".join(out).rstrip() + "\n"


# -- numbers the prose takes from the code ---------------------------------------------------

_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def values() -> dict[str, str]:
    """The numbers `{{ code.NAME }}` stands for, read from the code."""
    from bot.config.sections import DigestConfig
    from bot.match.digest import ABSTRACT_WEIGHT, EXTRA_RULE_BONUS, PHRASE_BONUS, TITLE_WEIGHT
    from bot.rules.parser import MAX_RULE_LENGTH, MAX_TERMS
    from bot.rules.tree import MAX_TOP
    from bot.similar.rank import (
        CENTROID,
        DISLIKED,
        DROP_AFTER,
        DROP_COSINE,
        DROP_COSINE_EMBEDDED,
        SIMILAR_MIN,
        SIMILAR_MIN_EMBEDDED,
        SIMILAR_SHARE,
    )
    from bot.similar.space import HASHED

    def number(value: float) -> str:
        return f"{value:g}"

    return {
        "similar_share": f"{SIMILAR_SHARE:.0%}",
        "similar_min": number(SIMILAR_MIN[HASHED]),
        "similar_min_embedded": number(SIMILAR_MIN_EMBEDDED),
        "drop_after": _WORDS.get(DROP_AFTER, str(DROP_AFTER)),
        "drop_cosine": number(DROP_COSINE[HASHED]),
        "drop_cosine_embedded": number(DROP_COSINE_EMBEDDED),
        "centroid_share": number(CENTROID),
        "model_share": number(round(1 - CENTROID, 6)),
        "disliked_weight": number(DISLIKED),
        "title_weight": number(TITLE_WEIGHT),
        "abstract_weight": number(ABSTRACT_WEIGHT),
        "phrase_factor": number(1 + PHRASE_BONUS),
        "extra_rule_bonus": number(EXTRA_RULE_BONUS),
        "max_rule_length": number(MAX_RULE_LENGTH),
        "max_terms": number(MAX_TERMS),
        "max_top": number(MAX_TOP),
        "max_rules": number(DigestConfig.model_fields["max_rules"].default),
    }


def fill_values(markdown: str, where: str, table: dict[str, str] | None = None) -> str:
    """Each `{{ code.NAME }}` replaced by its value; an unknown NAME is an error."""
    table = values() if table is None else table

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in table:
            raise ValueError(f"{where}: no value named code.{name} (docs/hooks/reference.py)")
        return table[name]

    return VALUE_RE.sub(one, markdown)


# -- the CLI reference's commands ------------------------------------------------------------


def command_names() -> list[str]:
    """Every command `paperbell --help` lists, and every subcommand of a group (`db
    backup`), as `paperbell NAME`."""
    import click

    from bot.cli import main

    names: list[str] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name in group.commands:
            command = group.commands[name]
            if command.hidden:
                continue
            names.append(f"{prefix} {name}")
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")

    walk(main, "paperbell")
    return names


def missing_commands(page_html: str) -> list[str]:
    """The commands a rendered CLI page does not name."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", page_html))
    text = " ".join(text.split())
    return [name for name in command_names() if name not in text]


# -- MkDocs' hooks ---------------------------------------------------------------------------


def _fill(markdown: str, src: str) -> str:
    if CONFIG_MARK in markdown:
        reference = render_config_reference(EXAMPLE.read_text(encoding="utf-8"))
        markdown = markdown.replace(CONFIG_MARK, reference)
    if CHANGELOG_MARK in markdown:
        changelog = CHANGELOG.read_text(encoding="utf-8")
        changelog = re.sub(r"\A# [^\n]*\n", "", changelog)  # the page has its own title
        changelog = changelog.replace("](docs/", "](")  # its links into the manual, from docs/
        markdown = markdown.replace(CHANGELOG_MARK, changelog)
    return fill_values(markdown, src)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return _fill(markdown, page.file.src_uri)
    except ValueError as error:
        raise PluginError(str(error)) from error


def on_page_content(content: str, page: Any, **_: Any) -> str:
    from mkdocs.exceptions import PluginError

    if page.file.src_uri == CLI_PAGE:
        missing = missing_commands(content)
        if missing:
            raise PluginError(f"{CLI_PAGE} does not name: {', '.join(missing)}")
    return content


def pages(docs: Path | None = None) -> Iterator[Path]:
    """The manual's Markdown pages."""
    yield from sorted((docs or ROOT / "docs").rglob("*.md"))
