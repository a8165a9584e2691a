"""The README stays true: its commands are the ones CI runs, and it documents every command."""

from __future__ import annotations

import re

import pytest
from support.cli import invoke
from support.paths import ROOT

from bot.cli import main

README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(not README.exists(), reason="run from a source checkout")


def test_ci_runs_the_readme_test_command() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if line.endswith("pytest"))
    assert test_command in ci.splitlines()


def test_every_command_and_option_is_documented() -> None:
    readme = README.read_text()
    for name, command in main.commands.items():  # type: ignore[attr-defined]
        assert f"paperbell {name}" in readme, name
        for param in command.params:
            if getattr(param, "hidden", False):  # testing aids, not for users
                continue
            for opt in param.opts:
                if opt.startswith("--") and opt not in ("--help",):
                    assert opt in readme, f"{name} {opt}"
    assert invoke("--help").exit_code == 0


def test_readme_rule_examples_parse() -> None:
    from bot.rules import parse_rule

    readme = README.read_text()
    table = readme.split("## Rules", 1)[1].split("## Commands", 1)[0]
    examples = re.findall(r"^\| `([^`]+)`", table, re.M)
    examples += re.findall(r"^- `([^`]+)`:", table, re.M)
    assert len(examples) >= 8
    for example in examples:
        for rule in example.split("`, `"):
            # An exclusion is shown alone in the table; in a rule it goes beside a term.
            parse_rule(f"robot {rule}" if rule.startswith("-") else rule)


def test_the_ranking_s_numbers_are_the_ones_the_docs_give() -> None:
    """README and config.example.toml say how papers like these are ranked: the thresholds
    they give are the code's (bot.similar.rank), for the default ranking and embeddings."""
    from bot.similar.rank import (
        DROP_AFTER,
        DROP_COSINE,
        DROP_COSINE_EMBEDDED,
        SIMILAR_MIN,
        SIMILAR_MIN_EMBEDDED,
        SIMILAR_SHARE,
    )
    from bot.similar.space import HASHED

    readme = " ".join(README.read_text().split())
    example = " ".join((ROOT / "config.example.toml").read_text().replace("#", " ").split())
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    assert f"After {words[DROP_AFTER]} dislikes, a paper that is close to a disliked one" in readme
    assert (
        f"a cosine of at least {DROP_COSINE[HASHED]} in the ranking's view, "
        f"{DROP_COSINE_EMBEDDED} with `[embeddings]`"
    ) in readme
    floors = f"at least {SIMILAR_MIN[HASHED]}, or {SIMILAR_MIN_EMBEDDED} with"
    share = f"the day's best {SIMILAR_SHARE:.0%}"
    assert f"{share} and {floors} `[embeddings]`" in readme
    assert f"{share} and {floors} [embeddings]" in example
    assert f"cosine {DROP_COSINE[HASHED]}, {DROP_COSINE_EMBEDDED} with [embeddings]" in example
    # Every email has the links, whoever it is for: the docs say so.
    assert "the only change is the 👍 / 👎 links" in readme
