"""The docs stay true to the code, checked as facts, never as sentences: the README's test
command is the one CI runs and the README stays a front door; the manual builds strictly
(no broken link or anchor); its CLI reference names every command and option, its
configuration reference every key of the schema; its rule examples parse; and the numbers
it and config.example.toml state are the code's. Reword any page freely."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest
from support.paths import DOCS, ROOT, manual_text

from bot.cli import main

README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
EXAMPLE = ROOT / "config.example.toml"

pytestmark = pytest.mark.skipif(
    not (README.exists() and MKDOCS.exists()), reason="run from a source checkout"
)


def _hooks() -> ModuleType:
    """docs/hooks/reference.py, the functions the manual's build runs."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    return _hooks()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manual, built as .ci/run builds it (`mkdocs build --strict`), into a folder of
    this test's own."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _page_text(site: Path, page: str) -> str:
    """A built page's words, tags dropped, spaces collapsed."""
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


# -- the README ------------------------------------------------------------------------------


def test_ci_runs_the_readme_test_command() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if line.endswith("pytest"))
    assert test_command in ci.splitlines()


def test_the_readme_is_a_front_door_whose_links_lead_somewhere() -> None:
    readme = README.read_text()
    assert len(readme.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)]+)\)", readme) + re.findall(r'src="([^"]+)"', readme)
    local = [t.split("#")[0] for t in targets if "://" not in t]
    assert local, "the README links into the manual"
    for target in local:
        assert (ROOT / target).exists(), target


def test_the_readme_s_config_is_valid() -> None:
    """The minimal config the README shows is one paperbell takes."""
    import tomllib

    from bot.config import parse_config

    readme = README.read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", readme, re.S)
    config = parse_config(tomllib.loads(example), environ={})
    assert config.sources and config.subscribers and config.email is not None


# -- the manual's build and its generated references -----------------------------------------


def _commands() -> list[tuple[str, click.Command]]:
    """Every command `paperbell --help` lists, with a group's own (`paperbell db backup`)."""
    found: list[tuple[str, click.Command]] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name in group.commands:
            command = group.commands[name]
            found.append((f"{prefix} {name}", command))
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")

    walk(main, "paperbell")
    return found


def test_the_cli_reference_names_every_command_and_option(site: Path) -> None:
    text = _page_text(site, "cli")
    commands = _commands()
    assert len(commands) >= 20
    for name, command in commands:
        assert name in text, name
        for param in command.params:
            if getattr(param, "hidden", False):  # testing aids, not for users
                continue
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in text, f"{name} {opt}"


def test_the_configuration_reference_holds_every_key_of_the_schema(
    hooks: ModuleType, site: Path
) -> None:
    tables = hooks.read_example(EXAMPLE.read_text(encoding="utf-8"))
    schema, shown = hooks.schema_keys(), hooks.example_keys(tables)
    assert schema - shown == set(), "keys config.example.toml does not show"
    assert shown - schema == set(), "keys config.example.toml shows that the schema lacks"
    text = _page_text(site, "configuration")
    for key in sorted(schema):
        assert key.rsplit(".", 1)[-1] in text, key
    # A labelled rule's own keys, inside the `rules` array's example.
    subscribers = next(t for t in tables if t.name == "subscribers")
    rules = dict(kv for block in subscribers.blocks for kv in block.keys)["rules"]
    assert "rule =" in rules and "label =" in rules


def test_every_value_the_pages_take_from_the_code_exists(hooks: ModuleType, site: Path) -> None:
    table = hooks.values()
    for page in sorted(DOCS.rglob("*.md")):
        hooks.fill_values(page.read_text(encoding="utf-8"), page.name, table)  # raises if not
    for built in site.rglob("*.html"):
        assert not hooks.VALUE_RE.search(built.read_text(encoding="utf-8")), built


# -- facts the pages state -------------------------------------------------------------------


def test_the_rule_examples_parse() -> None:
    from bot.rules import parse_rule

    rules = (DOCS / "rules.md").read_text()
    examples = re.findall(r"^\| `([^`]+)`", rules, re.M)
    examples += re.findall(r"^- `([^`]+)`:", rules, re.M)
    assert len(examples) >= 8
    for example in examples:
        for rule in example.split("`, `"):
            # An exclusion is shown alone in the table; in a rule it goes beside a term.
            parse_rule(f"robot {rule}" if rule.startswith("-") else rule)


def test_the_ranking_s_numbers_are_the_code_s(hooks: ModuleType, site: Path) -> None:
    """How papers like these are ranked: the manual takes the thresholds from the code, and
    config.example.toml's comment on them states the same numbers (bot.similar.rank)."""
    from bot.similar.rank import (
        DROP_AFTER,
        DROP_COSINE,
        DROP_COSINE_EMBEDDED,
        SIMILAR_MIN,
        SIMILAR_MIN_EMBEDDED,
        SIMILAR_SHARE,
    )
    from bot.similar.space import HASHED

    numbers = [
        f"{SIMILAR_SHARE:.0%}",
        f"{SIMILAR_MIN[HASHED]:g}",
        f"{SIMILAR_MIN_EMBEDDED:g}",
        f"{DROP_COSINE[HASHED]:g}",
        f"{DROP_COSINE_EMBEDDED:g}",
    ]
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    page = _page_text(site, "similar")
    tables = hooks.read_example(EXAMPLE.read_text(encoding="utf-8"))
    subscribers = next(t for t in tables if t.name == "subscribers")
    comment = " ".join(
        " ".join(block.text)
        for block in subscribers.blocks
        if any(key == "similar_min" for key, _ in block.keys)
    )
    for text in (page, comment):
        for number in numbers:
            assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d%])", text), number
        assert re.search(rf"\b{words[DROP_AFTER]} dislikes\b", text, re.I)


def test_the_manual_names_every_source_kind_and_subscriber_key() -> None:
    from bot.config.sections import SOURCE_KINDS, load_builtin_sources
    from bot.config.subscribers import SubscriberConfig

    load_builtin_sources()
    manual = manual_text()
    for kind in SOURCE_KINDS:
        assert f"`{kind}`" in manual, kind
    for key in SubscriberConfig.model_fields:
        assert key in manual, key
