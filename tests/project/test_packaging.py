"""Packaging as Python users expect it: dependencies declared as used and bounded, a license
file that says what the metadata says, a changelog for the version, a wheel that holds what
the demo and the migrations need and no test stand-ins, and the demo's mail server an extra
whose absence is explained, not a traceback."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.paths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]

# Declared without an upper bound, and why.
UNBOUNDED = {"tzdata": "zone data: the newest release is always the right one"}
# Imported by `bot` but deliberately not a core dependency: the extra that brings it, and the
# one module allowed to import it (which must say what to install when it is missing).
OPTIONAL = {
    "aiosmtpd": ("demo", "bot.demo.smtp"),
    "fastembed": ("fastembed", "bot.similar.endpoint"),
}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503), without extras or bounds."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(1)).lower()


def _imports() -> dict[str, set[str]]:
    """Every top-level module `bot` imports that is neither the standard library nor `bot`,
    with the modules importing it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "bot").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "bot" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(module)
    return found


def test_every_imported_library_is_declared() -> None:
    declared = {_name(r) for r in PROJECT["dependencies"]}
    extras = {
        extra: {_name(r) for r in requirements}
        for extra, requirements in PROJECT["optional-dependencies"].items()
    }
    providers = importlib.metadata.packages_distributions()
    missing = []
    for top, modules in sorted(_imports().items()):
        distributions = {_name(d) for d in providers.get(top, [top])}
        if top in OPTIONAL:
            extra, owner = OPTIONAL[top]
            assert distributions & extras[extra], f"{top} is not in the {extra!r} extra"
            assert modules == {owner}, f"{top} imported outside {owner}: {sorted(modules)}"
            continue
        if not distributions & declared:
            missing.append(f"{top} ({', '.join(sorted(modules))})")
    assert not missing, "imported but not declared in [project] dependencies: " + "; ".join(missing)


def test_every_dependency_is_bounded() -> None:
    for requirement in PROJECT["dependencies"]:
        name = _name(requirement)
        assert ">=" in requirement, f"{requirement}: no lower bound"
        if name not in UNBOUNDED:
            assert "<" in requirement, f"{requirement}: no upper bound (the next major)"
    for extra, requirements in PROJECT["optional-dependencies"].items():
        for requirement in requirements:
            if _name(requirement) != "paperbell":  # the test extra names the others
                assert ">=" in requirement, f"[{extra}] {requirement}: no lower bound"


def test_license_changelog_and_urls() -> None:
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(PROJECT['version'])}\]", changelog, re.M), (
        f"CHANGELOG.md has no section for version {PROJECT['version']}"
    )
    urls = PROJECT["urls"]
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())


def _installed_files() -> list[str] | None:
    """The installed paperbell's files, when it is installed from a wheel (as CI does);
    None for an editable install, whose files are the checkout's."""
    try:
        distribution = importlib.metadata.distribution("paperbell")
    except importlib.metadata.PackageNotFoundError:
        return None
    direct = distribution.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        return None
    return [str(path) for path in distribution.files or ()]


def test_the_wheel_holds_what_the_demo_and_migrations_need_and_no_test_stand_ins() -> None:
    files = _installed_files()
    if files is None:
        pytest.skip("paperbell is installed editable here; CI installs the wheel (.ci/run)")
    needed = [
        "bot/templates/email/digest.html.j2",
        "bot/config.example.toml",
        "bot/slack-app-manifest.yml",
        "bot/deploy/paperbell.service",
        "bot/store/migrations/env.py",
        "bot/data/arxiv_holidays.toml",
        "bot/data/arxiv_categories.toml",
        # the catalogs of paperbell's words, read and compiled when first needed
        "bot/locales/zh_Hans/LC_MESSAGES/messages.po",
    ]
    for path in needed:
        assert path in files, f"the wheel lacks {path}"
    assert any(p.startswith("bot/data/demo/") for p in files), "no bundled demo data"
    assert any(p.startswith("bot/store/migrations/versions/") for p in files)
    assert any(p.endswith("licenses/LICENSE") for p in files)
    assert not [p for p in files if p.startswith(("tests/", "bench/", "bot/tests"))]
    assert not [p for p in files if "conftest" in p or "/support/" in p]


def _run_without_aiosmtpd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`paperbell ARGS` in a Python where aiosmtpd cannot be imported (as after a plain
    `pip install paperbell`)."""
    code = (
        "import sys; sys.modules['aiosmtpd'] = None\n"
        "from bot.cli import main\n"
        f"sys.argv = ['paperbell', *{list(args)!r}]\n"
        "main()\n"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PAPERBELL_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_demo_without_its_extra_says_what_to_install(tmp_path: Path) -> None:
    result = _run_without_aiosmtpd("demo", "--out", str(tmp_path / "demo"), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "pip install 'paperbell[demo]'" in result.stderr
    assert result.stderr.startswith("error: ")  # as every other message says it
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "demo").exists()  # nothing half-made


def test_try_demo_needs_no_mail_server(tmp_path: Path) -> None:
    result = _run_without_aiosmtpd("try", "diffusion", "--demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
