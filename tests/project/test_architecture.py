"""House rules that keep the pipeline's shape, checked by reading the imports with `ast`.

The layers are data (`LAYERS`): a module may import its own layer or a lower one, never a
higher one. Beside them: pure modules do no I/O, each I/O library stays in the modules
allowed to use it, only the CLI and the config read the environment, there is no import
cycle, and the rooms of `bot/` stand at most `MAX_FLOORS` floors high.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import bot

PACKAGE = Path(bot.__file__).resolve().parent

# Lowest first. A module belongs to the layer of the longest prefix that names it; `bot`
# itself (the version and User-Agent) is the ground. The stages stand in pipeline order:
# a stage may use an earlier stage's types, never config or the pipeline.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("bot", "bot.core")),
    ("rules", ("bot.rules",)),
    ("sources", ("bot.sources",)),
    ("store", ("bot.store",)),
    ("match", ("bot.match",)),
    ("similar", ("bot.similar",)),  # papers like these: library files, vectors, models, rankings
    ("texts", ("bot.texts",)),  # what models write about papers: summaries, translations
    ("render", ("bot.render",)),
    ("channels", ("bot.channels",)),
    ("bounces", ("bot.bounces",)),  # what comes back to the bounce address, read [pure]
    ("config", ("bot.config",)),
    ("pipeline", ("bot.pipeline",)),
    ("front ends", ("bot.manage", "bot.slack")),  # plain logic, no HTTP
    ("entry points", ("bot.web", "bot.slack.app", "bot.cli", "bot.demo")),
]
# Pairs inside one layer that must not meet: (importer prefix, imported prefix, why).
NEVER = [
    ("bot.web", "bot.slack", "the web app mounts the routes it is handed; it knows no Slack"),
    ("bot.manage", "bot.slack", "the pages' logic and Slack's are two front ends side by side"),
]
# The rooms of bot/ (each subpackage, each top-level module): the longest chain of imports
# between them. Fourteen floors before the layout step; the layers above allow eleven.
MAX_FLOORS = 9

IO_LIBRARIES = {
    "httpx",
    "aiosmtplib",
    "aiosmtpd",
    "smtplib",
    "slack_sdk",
    "sqlmodel",
    "sqlalchemy",
    "sqlite3",
    "alembic",
    "socket",
    "urllib.request",
    "psycopg",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "aiohttp",
    "openai",
    "apprise",
    "requests",
    "imaplib",
}
# Modules (or whole packages) that must stay pure: no I/O library, no environment, no clock.
PURE = [
    "bot.core",
    "bot.rules",
    "bot.match",
    "bot.render",
    "bot.sources.arxiv",
    "bot.sources.arxiv_api",
    "bot.sources.huggingface",
    "bot.sources.feed",
    "bot.sources.feedtext",
    "bot.texts.prompts",
    "bot.similar.text",
    "bot.similar.space",
    "bot.similar.model",
    "bot.similar.rank",
    "bot.texts.answers",
    "bot.similar.library",
    "bot.similar.refs",
    "bot.bounces.report",
    "bot.bounces.text",
    "bot.bounces.webhooks",
    "bot.bounces.sns",
    "bot.bounces.signatures",
]
# Pure data classes inside an I/O library that a pure module may still use.
PURE_EXCEPTIONS = {"bot.render.slack": "slack_sdk.models"}  # Block Kit models: no I/O
# Where each I/O library may be imported: modules, or packages (every module in them).
ALLOWED = {
    "httpx": {"bot.sources.http"},
    "urllib.request": {"bot.sources.http"},  # file:// paths of local sources
    "aiosmtplib": {"bot.channels.email"},  # the sender
    "smtplib": set(),  # aiosmtplib sends; nothing blocks the event loop on SMTP
    "aiosmtpd": {"bot.demo"},
    # http: to name a DNS failure (gaierror); the guard: a destination's host looked up
    "socket": {"bot.demo", "bot.sources.http", "bot.channels.guard"},
    "sqlmodel": {"bot.store"},
    "sqlalchemy": {"bot.store"},
    "sqlite3": {"bot.store"},  # SQLite's online backup (copies of the file); else SQLAlchemy
    "alembic": {"bot.store"},  # the migrations (bot/store/migrations/) and bot.store.schema
    "psycopg": set(),  # through SQLAlchemy only
    "starlette": {"bot.web", "bot.slack.app"},
    "uvicorn": {"bot.web.app"},
    "prometheus_client": {"bot.web.app"},
    # render/slack: only the Block Kit models (see PURE_EXCEPTIONS).
    "slack_sdk": {"bot.channels.slack", "bot.slack.app", "bot.demo", "bot.render.slack"},
    # the clients of OpenAI-compatible endpoints: chat (texts) and embeddings (similar)
    "openai": {"bot.texts.client", "bot.similar.endpoint"},
    # slack-sdk's async clients use it; the Slack channel reads its errors to tell a
    # connection never made (safe to retry at once) from one dropped after the request
    "aiohttp": {"bot.channels.slack"},
    # Apprise's plugins: URLs read offline (apprise_urls) and messages sent (apprise)
    "apprise": {"bot.channels.apprise", "bot.channels.apprise_urls"},
    "requests": set(),  # Apprise's plugins use it; paperbell does not
    "imaplib": {"bot.bounces.imap"},  # the bounce mailbox ([bounces] imap_url)
}
ENVIRONMENT_READERS = {"bot.cli", "bot.config"}


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def imports(name: str, path: Path, *, type_checking: bool = False) -> set[str]:
    """The modules `name` imports, relative imports resolved, nested ones included; the
    imports of `if TYPE_CHECKING:` blocks only when `type_checking` is set."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            # `from bot.sources import arxiv` imports the module bot.sources.arxiv.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def internal_imports(type_checking: bool = True) -> dict[str, set[str]]:
    """Each module of bot and the modules of bot it imports (type-only imports included:
    a type from a higher layer is a dependency on it too)."""
    files = module_files()
    return {
        name: {m for m in imports(name, path, type_checking=type_checking) if m in files} - {name}
        for name, path in files.items()
    }


def layer_of(name: str) -> int:
    best, index = -1, -1
    for number, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            hit = name == prefix if prefix == "bot" else within(name, prefix)
            if hit and len(prefix) > best:
                best, index = len(prefix), number
    return index


def layer_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import that runs up the layers or joins a pair that must never meet."""
    found = []
    for importer, targets in sorted(graph.items()):
        mine = layer_of(importer)
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs > mine:
                found.append(
                    f"{importer} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})"
                )
            for low, high, why in NEVER:
                if within(importer, low) and within(target, high):
                    found.append(f"{importer} imports {target}: {why}")
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles (strongly connected components of two or more modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the graph is small enough to recurse
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room(name: str) -> str:
    """The room of bot/ a module stands in: its subpackage, or itself at the top."""
    parts = name.split(".")
    return ".".join(parts[:2])


def floors(graph: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Each room's floor: 1 for a room that imports no other, else one above the highest
    room it imports (the graph between rooms must have no cycle)."""
    rooms: dict[str, set[str]] = {}
    for importer, targets in graph.items():
        rooms.setdefault(room(importer), set()).update(
            room(t) for t in targets if room(t) != room(importer)
        )
        for target in targets:
            rooms.setdefault(room(target), set())
    rooms.pop("bot", None)  # bot/__init__: the version, imported by anyone, importing none
    for targets in rooms.values():
        targets.discard("bot")
    floor: dict[str, int] = {}

    def height(name: str, seen: tuple[str, ...] = ()) -> int:
        if name in seen:
            raise AssertionError(f"rooms import each other: {' -> '.join([*seen, name])}")
        if name not in floor:
            floor[name] = 1 + max((height(t, (*seen, name)) for t in rooms[name]), default=0)
        return floor[name]

    for name in rooms:
        height(name)
    return floor


# --- the layers ----------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    assert [name for name in module_files() if layer_of(name) < 0] == []


def test_imports_point_down_the_layers() -> None:
    assert layer_violations(internal_imports()) == []


def test_no_import_cycle() -> None:
    assert cycles(internal_imports(type_checking=False)) == []


def test_the_house_is_at_most_nine_floors_high() -> None:
    heights = floors(internal_imports())
    assert max(heights.values()) <= MAX_FLOORS, sorted(heights.items(), key=lambda i: -i[1])


def test_the_layer_check_sees_an_import_that_runs_up() -> None:
    # A test of the test: lower layers importing higher ones, relative imports among them.
    graph = {
        "bot.core.models": {"bot.pipeline.wiring"},
        "bot.sources.arxiv": {"bot.store"},
        "bot.render.email": {"bot.config"},
        "bot.web.app": {"bot.slack.app"},
        "bot.cli": {"bot.core.models", "bot.pipeline"},
    }
    assert layer_violations(graph) == [
        "bot.core.models (core) imports bot.pipeline.wiring (pipeline)",
        "bot.render.email (render) imports bot.config (config)",
        "bot.sources.arxiv (sources) imports bot.store (store)",
        "bot.web.app imports bot.slack.app: the web app mounts the routes it is handed; "
        "it knows no Slack",
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert floors({"bot.cli": {"bot.web.app"}, "bot.web.app": {"bot.core.models"}}) == {
        "bot.cli": 3,
        "bot.web": 2,
        "bot.core": 1,
    }


def test_relative_imports_are_read(tmp_path: Path) -> None:
    source = tmp_path / "digest.py"
    source.write_text("from ..pipeline import wiring\nfrom .matcher import Matcher\n")
    assert imports("bot.match.digest", source) == {
        "bot.pipeline",
        "bot.pipeline.wiring",
        "bot.match.matcher",
        "bot.match.matcher.Matcher",
    }


# --- I/O, the environment, the clock -------------------------------------------------


def pure_modules() -> list[str]:
    return [n for n in module_files() if any(within(n, p) for p in PURE)]


def uses(path: Path, *names: str) -> bool:
    text = ast.unparse(ast.parse(path.read_text(encoding="utf-8")))
    return any(name in text for name in names)


@pytest.mark.parametrize("name", pure_modules())
def test_pure_modules_do_no_io(name: str) -> None:
    path = module_files()[name]
    ok = PURE_EXCEPTIONS.get(name)
    found = {m for m in imports(name, path) if not (ok and within(m, ok))}
    bad = {m for m in found for lib in IO_LIBRARIES if within(m, lib)}
    assert not bad, f"{name} imports {bad}"
    assert not uses(path, "os.environ", "getenv", ".now(", "utcnow(", "time.time("), name


@pytest.mark.parametrize(("library", "allowed"), sorted(ALLOWED.items()))
def test_io_libraries_stay_in_their_module(library: str, allowed: set[str]) -> None:
    users = {
        name
        for name, path in module_files().items()
        if any(within(m, library) for m in imports(name, path))
    }
    assert {u for u in users if not any(within(u, a) for a in allowed)} == set()


def test_every_io_library_has_its_rule() -> None:
    assert set(ALLOWED) == IO_LIBRARIES


def test_only_the_cli_and_config_read_the_environment() -> None:
    readers = {n for n, p in module_files().items() if uses(p, "os.environ", "getenv")}
    assert {r for r in readers if not any(within(r, e) for e in ENVIRONMENT_READERS)} == set()


def test_templates_and_data_ship_with_the_package() -> None:
    from bot.config import example_config_text
    from bot.demo import bundled_feed_bytes
    from bot.render import templates_dir

    assert (templates_dir() / "email" / "digest.html.j2").is_file()
    assert bundled_feed_bytes().startswith(b"<?xml")
    assert "version = 1" in example_config_text()
