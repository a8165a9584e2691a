"""House rules that keep the pipeline's shape, checked by reading the imports with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bot

PACKAGE = Path(bot.__file__).resolve().parent
IO_LIBRARIES = {
    "httpx",
    "aiosmtplib",
    "aiosmtpd",
    "smtplib",
    "slack_sdk",
    "sqlmodel",
    "sqlalchemy",
    "socket",
    "urllib.request",
    "psycopg",
    "apscheduler",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "aiohttp",
}
# Modules that must stay pure: no I/O library, no environment, no clock.
PURE = [
    "core/models",
    "core/errors",
    "rules",
    "match/matcher",
    "match/digest",
    "render/email",
    "render/text",
    "render/tex",
    "render/notice",
    "core/links",
    "core/redact",
    "render/terminal",
    "render/slack",
    "sources/arxiv",
    "sources/arxiv_api",
    "sources/huggingface",
    "sources/feed",
    "sources/feedtext",
    "core/merge",
    "core/calendar",
    "core/schedule",
]
# The store's modules: the only ones that speak to the database.
STORE = {
    f"store/{name}"
    for name in (
        "database",
        "tables",
        "papers",
        "sources",
        "subscribers",
        "rule_counts",
        "outbox",
        "slack_requests",
    )
}
# Where each I/O library may be imported.
ALLOWED = {
    "httpx": {"sources/http"},
    "aiosmtplib": {"channels/email"},
    "aiosmtpd": {"demo", "demo/slack_standin"},
    "sqlmodel": STORE,
    "sqlalchemy": STORE,
    "psycopg": set(),
    "socket": {"demo", "demo/slack_standin"},
    "apscheduler": {"pipeline/scheduler"},
    "starlette": {"web/app", "web/pages"},
    "uvicorn": {"web/app"},
    "prometheus_client": {"web/app"},
    # render/slack: only the Block Kit models (see PURE_EXCEPTIONS).
    "slack_sdk": {"channels/slack", "slack/app", "demo/slack_standin", "render/slack"},
    "aiohttp": set(),  # slack-sdk's async clients use it; paperbell does not
}


def module_files() -> dict[str, Path]:
    return {
        str(p.relative_to(PACKAGE).with_suffix("")).removesuffix("/__init__"): p
        for p in PACKAGE.rglob("*.py")
    }


def imports(path: Path) -> set[str]:
    """Top-level and nested imports of a module, TYPE_CHECKING blocks excluded."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def uses(path: Path, *names: str) -> bool:
    text = ast.unparse(ast.parse(path.read_text()))
    return any(name in text for name in names)


# Pure data classes inside an I/O library that a pure module may still use.
PURE_EXCEPTIONS = {"render/slack": "slack_sdk.models"}  # Block Kit models: no client, no I/O


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_do_no_io(name: str) -> None:
    path = module_files()[name]
    ok = PURE_EXCEPTIONS.get(name)
    found = {m for m in imports(path) if not (ok and (m == ok or m.startswith(ok + ".")))}
    bad = {m for m in found for lib in IO_LIBRARIES if m == lib or m.startswith(lib + ".")}
    assert not bad, f"bot/{name}.py imports {bad}"
    assert not uses(path, "os.environ", "getenv", ".now(", "utcnow(", "time.time("), name


@pytest.mark.parametrize(("library", "allowed"), sorted(ALLOWED.items()))
def test_io_libraries_stay_in_their_module(library: str, allowed: set[str]) -> None:
    users = {
        name
        for name, path in module_files().items()
        if any(m == library or m.startswith(library + ".") for m in imports(path))
    }
    assert users <= allowed, f"{library} imported by {users - allowed}"


def test_only_the_cli_and_config_read_the_environment() -> None:
    readers = {n for n, p in module_files().items() if uses(p, "os.environ", "getenv")}
    assert readers <= {"cli", "config"}, readers


def test_templates_and_data_ship_with_the_package() -> None:
    from bot.config import example_config_text
    from bot.demo import bundled_feed_bytes
    from bot.render import templates_dir

    assert (templates_dir() / "email" / "digest.html.j2").is_file()
    assert bundled_feed_bytes().startswith(b"<?xml")
    assert "version = 1" in example_config_text()
