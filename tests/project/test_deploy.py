"""The container: the Dockerfile and compose.yaml say what paperbell does. The image's
HEALTHCHECK command, run as written, passes on a running daemon and fails on a stopped or
unhealthy one; its VOLUME is where the default database goes; it runs as no root, and any
uid in group 0 may write the volume; the commands its comments show run on what it
installs. The compose file starts a real command with PostgreSQL once healthy, its secrets
only in env files, as the manual says.

No Docker engine runs here: the files are checked against the code, not built. (The
systemd unit: test_systemd.py.)"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.cli import clean_env, start
from support.config import local_feed_config
from support.paths import ROOT, manual_text
from support.servers import web_server

from bot.cli import main
from bot.config import parse_config
from bot.config.sections import WebConfig
from bot.demo import free_port

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"

pytestmark = pytest.mark.skipif(not DOCKERFILE.exists(), reason="run from a source checkout")


# --- the Dockerfile ------------------------------------------------------------------


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (NAME, arguments), continuation lines joined."""
    found, pending = [], ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        name, _, rest = pending.strip().partition(" ")
        found.append((name.upper(), rest.strip()))
        pending = ""
    return found


def one(name: str) -> str:
    values = [rest for found, rest in instructions() if found == name]
    assert len(values) == 1, (name, values)
    return values[0]


def healthcheck_command() -> list[str]:
    options, _, command = one("HEALTHCHECK").partition("CMD ")
    assert "--interval=" in options and "--timeout=" in options
    return list(json.loads(command))


def healthcheck_on(port: int) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK, run as written (its python is this one) against `port`."""
    command = healthcheck_command()
    assert command[0] == "python"  # the slim image has no curl
    code = command[-1].replace(f":{WebConfig().port}/", f":{port}/")
    return subprocess.run(
        [sys.executable, *command[1:-1], code], capture_output=True, text=True, timeout=30
    )


def test_the_healthcheck_asks_healthz_of_the_daemon_on_its_default_port() -> None:
    code = healthcheck_command()[-1]
    url = re.search(r"'(http://[^']+)'", code)
    assert url is not None and url.group(1) == f"http://127.0.0.1:{WebConfig().port}/healthz"
    assert one("EXPOSE") == str(WebConfig().port)
    assert json.loads(one("ENTRYPOINT")) == ["paperbell"]


def test_the_healthcheck_passes_on_a_running_daemon_and_fails_on_a_stopped_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config("sqlite:///paperbell.sqlite"))
    daemon = start("run", "-c", str(config), "--port", str(port), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while (checked := healthcheck_on(port)).returncode != 0:
            assert daemon.poll() is None, daemon.communicate()
            assert time.monotonic() < deadline, checked.stderr
            time.sleep(0.5)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert healthcheck_on(port).returncode != 0  # nobody answers


def test_the_healthcheck_fails_when_healthz_says_503() -> None:
    def unhealthy(request: object) -> JSONResponse:
        return JSONResponse({"status": "stuck"}, status_code=503)

    with web_server(Starlette(routes=[Route("/healthz", unhealthy)])) as url:
        port = int(url.rsplit(":", 1)[1])
        checked = healthcheck_on(port)
    assert checked.returncode != 0 and "503" in checked.stderr


def test_the_volume_holds_the_config_and_the_default_database() -> None:
    (volume,) = json.loads(one("VOLUME"))
    env = dict(item.split("=", 1) for item in shlex.split(one("ENV")))
    config_path = Path(env["PAPERBELL_CONFIG"])
    assert config_path.parent == Path(volume) and Path(one("WORKDIR")) == Path(volume)
    # The config's default database, with the config where the image says it is:
    config = parse_config({"version": 1}, path=config_path)
    assert config.database_url() == f"sqlite:///{volume}/paperbell.sqlite"


def test_it_runs_as_no_root_and_any_uid_in_group_0_may_write_the_volume() -> None:
    user = one("USER")
    assert user.isdigit() and int(user) != 0
    (volume,) = json.loads(one("VOLUME"))
    made = re.search(rf"install -d -m (\d+) -o {user} -g 0 {re.escape(volume)}\b", one("RUN"))
    assert made is not None, one("RUN")
    assert int(made.group(1), 8) & 0o070 == 0o070  # group 0 reads, writes and enters it
    assert f"--uid {user} --gid 0" in one("RUN")


def test_no_secret_goes_into_the_image() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"*.env", "config.toml", "*.sqlite", ".venv"} <= set(ignored)
    assert one("COPY").startswith(". ")  # the build context, less what is ignored
    assert "*.env" in (ROOT / ".gitignore").read_text().split()


# What `docker run` takes a value for is every option but these.
DOCKER_RUN_FLAGS = {"--rm", "-d", "--detach", "-i", "-t", "-it", "--init", "--read-only"}
# A checkout's tools (tests, manual, linters): no `paperbell` command imports them.
DEVELOPERS_EXTRAS = {"test", "docs", "dev"}


def shown_commands() -> list[list[str]]:
    """The `paperbell` commands the Dockerfile's comments show: the words after the image's
    name in each `docker run` (continued lines joined)."""
    comments = [line[1:].strip() for line in DOCKERFILE.read_text().splitlines()]
    text = "\n".join(comments).replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if not line.startswith("docker run "):
            continue
        words = shlex.split(line)[2:]
        while words[0].startswith("-"):
            option = words.pop(0)
            if option not in DOCKER_RUN_FLAGS and "=" not in option:
                words.pop(0)  # its value
        image, *command = words
        assert image == "paperbell", line
        commands.append(command)
    return commands


def image_extras() -> set[str]:
    """The extras of paperbell the image's `pip install` names."""
    installed = re.search(r'"/src\[([\w,-]+)\]"', one("RUN"))
    assert installed is not None, one("RUN")
    return set(installed.group(1).split(","))


def modules_the_image_lacks() -> set[str]:
    """The top-level modules of the optional packages the image does not install (those
    this Python has: the others cannot be imported here either)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert image_extras() <= set(extras), image_extras()
    left_out = {
        distribution_name(requirement)
        for extra in set(extras) - image_extras() - DEVELOPERS_EXTRAS
        for requirement in extras[extra]
    }
    return {
        module
        for module, distributions in packages_distributions().items()
        if left_out & {distribution_name(d) for d in distributions}
    }


def distribution_name(requirement: str) -> str:
    """A requirement's distribution, normalised (PEP 503): `psycopg[binary]>=3` -> psycopg."""
    name = re.split(r"[^\w.-]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_commands_the_dockerfile_shows_run_on_what_the_image_installs(
    tmp_path: Path,
) -> None:
    """Each command its comments show takes those options, and a one-off command runs to
    its end in a Python without the extras the image leaves out (the daemon, `run`, is
    started by the health check's test)."""
    commands = shown_commands()
    assert {"demo", "run"} <= {command[0] for command in commands}
    for name, *args in commands:
        main.commands[name].make_context(name, list(args))  # type: ignore[attr-defined]
    (volume,) = json.loads(one("VOLUME"))
    hidden = sorted(modules_the_image_lacks())
    for name, *args in commands:
        if name == "run":
            continue
        # The volume is this test's folder, as `-v "$PWD:/data"` makes it the user's.
        args = [re.sub(rf"^{re.escape(volume)}(?=/|$)", str(tmp_path), arg) for arg in args]
        code = (
            "import sys\n"
            f"for module in {hidden!r}: sys.modules[module] = None\n"
            "from bot.cli import main\n"
            f"sys.argv = ['paperbell', {name!r}, *{args!r}]\n"
            "main()\n"
        )
        ran = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, (name, args, ran.stderr)


# --- compose.yaml ----------------------------------------------------------------------


def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_starts_paperbell_once_postgresql_is_healthy() -> None:
    services = compose()["services"]
    postgres, paperbell = services["postgres"], services["paperbell"]
    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert paperbell["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert paperbell["build"] == "." and "healthcheck" not in paperbell  # the image's
    # Its command is a real one, with options `run` takes:
    name, *args = paperbell["command"]
    command = main.commands[name]  # type: ignore[attr-defined]
    assert name == "run"
    context = command.make_context(name, list(args))
    assert context.params["host"] == "0.0.0.0"
    published = [p.rsplit(":", 1)[1] for p in paperbell["ports"]]
    assert published == [str(WebConfig().port)]


def test_compose_keeps_secrets_in_env_files_only() -> None:
    services = compose()["services"]
    for service in services.values():
        for name, value in (service.get("environment") or {}).items():
            assert "PASSWORD" not in name and "TOKEN" not in name, name
            assert "password" not in str(value).lower()
        env_files = service["env_file"]
        for file in [env_files] if isinstance(env_files, str) else env_files:
            assert file.endswith(".env") and not (ROOT / file).exists()


def test_compose_and_the_manual_agree() -> None:
    manual = manual_text()
    services = compose()["services"]
    postgres = services["postgres"]["environment"]
    # The database URL the manual tells the compose config to use reaches this postgres.
    url = f"postgresql://{postgres['POSTGRES_USER']}@postgres/{postgres['POSTGRES_DB']}"
    assert url in manual and url in COMPOSE.read_text()
    for variable in ("POSTGRES_PASSWORD", "PGPASSWORD", "PAPERBELL_CONFIG"):
        assert variable in manual, variable
    assert "docker compose up -d" in manual
    mounts = services["paperbell"]["volumes"]
    (volume,) = json.loads(one("VOLUME"))
    assert f"./config.toml:{volume}/config.toml:ro" in mounts
    assert any(m.endswith(f":{volume}") for m in mounts)


def test_compose_runs_workers_beside_paperbell_on_the_same_database() -> None:
    """More `paperbell run` processes (docs/workers.md): the same image, command, config
    and secrets as `paperbell`, started with it once PostgreSQL is healthy; no port
    published (one service publishes the web app); how many set by `--scale worker=N`."""
    manual = manual_text()
    services = compose()["services"]
    paperbell, worker = services["paperbell"], services["worker"]
    for key in ("build", "image", "command", "env_file", "depends_on", "restart"):
        assert worker[key] == paperbell[key], key
    assert "ports" not in worker
    assert worker["deploy"]["replicas"] >= 1
    config_mount = next(m for m in paperbell["volumes"] if m.startswith("./config.toml:"))
    assert config_mount in worker["volumes"]
    assert "--scale worker=N" in manual and "--scale worker=N" in COMPOSE.read_text()


def test_the_model_folder_of_a_postgresql_site_lies_in_the_volume() -> None:
    # A uid the image does not know has HOME=/, which it may not write: the cache goes to
    # the volume, where fastembed's model outlives the container (bot.pipeline.model_cache).
    (volume,) = json.loads(one("VOLUME"))
    env = dict(item.split("=", 1) for item in shlex.split(one("ENV")))
    assert Path(env["XDG_CACHE_HOME"]).is_relative_to(volume)  # where the model goes
