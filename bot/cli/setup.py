"""The first steps: `init` writes a commented config file (or, with --systemd, the daemon's
systemd unit for a config: bot.cli.service), `demo` runs the whole pipeline offline on the
bundled listing (no config, no account).

The demo itself is `bot.demo`; it is imported when the command runs (it brings an SMTP
server and the Slack stand-in).
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import importlib.util
import pwd
import shlex
import sys
from pathlib import Path
from typing import NoReturn

import click

from bot.cli.service import (
    UNIT_NAME,
    Service,
    paperbell_executable,
    render_env_file,
    render_unit,
    unit_template,
)
from bot.cli.shell import EXIT_USAGE, config_option, handle_errors, load_config, stop_on_signals
from bot.config import Config, example_config_text
from bot.core.errors import PaperbellError


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("paperbell-demo"),
    show_default=True,
    help="Folder for the received messages and the demo database.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Then serve the pages the emails link to (manage, unsubscribe) until Ctrl-C.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8025,
    show_default=True,
    help="The port of those pages on localhost (the emails' links name it).",
)
@handle_errors
def demo(out_dir: Path, serve: bool, port: int) -> None:
    """Run the whole pipeline offline on bundled real data: no network, no account.

    Reads the real arXiv listing of 28 Nov 2024 (all of arXiv) and a real Hugging Face
    Daily Papers day (21 Aug 2026) shipped with paperbell, matches them against example
    subscribers, sends their digests over real SMTP to a server started on loopback, and
    saves each received message as .eml and .html in the output folder; a lab's digest
    also goes to its Slack channel, posted to a local stand-in of the Slack Web API (saved
    as slack/posted.json). Run it twice: the second run sends nothing, because everything
    was delivered. With --serve, the links in the emails work: manage a subscription,
    unsubscribe, 👍 / 👎.
    """
    if importlib.util.find_spec("aiosmtpd") is None:  # the demo's mail server: an extra
        raise PaperbellError(
            "the demo's mail server needs aiosmtpd, which is not installed",
            hint="install paperbell with its demo extra: pip install 'paperbell[demo]' "
            "(from a checkout: pip install '.[demo]')",
        )
    from bot.demo import run_demo  # an SMTP server, the Slack stand-in: `demo` only

    async def main() -> int:
        stop = stop_on_signals() if serve else None
        return await run_demo(out_dir, echo=click.echo, web_port=port, serve=stop)

    sys.exit(asyncio.run(main()))


@click.command()
@click.argument(
    "path", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True), required=False
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option(
    "--systemd",
    is_flag=True,
    help="Write a systemd unit that runs `paperbell run -c CONFIG` instead (PATH: default "
    "./paperbell.service, - for stdout), and paperbell.env beside CONFIG naming its secrets.",
)
@click.option(
    "--user", metavar="NAME", help="With --systemd: the account the service runs as (default: you)."
)
@config_option
@handle_errors
def init(
    path: Path | None, force: bool, systemd: bool, user: str | None, config_path: Path
) -> None:
    """Write a commented config file to PATH (default ./config.toml, - for stdout); with
    --systemd, a systemd unit for the daemon on the config file -c CONFIG."""
    if systemd:
        write_service(path or Path(UNIT_NAME), config_path, user=user, force=force)
        return
    path = path or Path("config.toml")
    if str(path) == "-":
        click.echo(example_config_text(), nl=False)
        return
    if path.exists() and not force:
        refuse_overwrite(path)
    path.write_text(example_config_text(), encoding="utf-8")
    click.echo(f"wrote {path}; edit it, then run: paperbell check-config -c {path}")


def write_service(path: Path, config_path: Path, *, user: str | None, force: bool) -> None:
    """Write the unit to `path` (- : stdout) and the environment file beside the config
    (kept if it exists: it may hold the secrets already)."""
    to_stdout = str(path) == "-"
    if not to_stdout and path.exists() and not force:
        refuse_overwrite(path)
    config = load_config(config_path)
    user = user or getpass.getuser()
    if user == "root":
        click.echo(
            "error: a service should not run as root: name its account with --user", err=True
        )
        sys.exit(EXIT_USAGE)
    service = Service.of(config, user=user, executable=paperbell_executable())
    unit = render_unit(unit_template(), service)
    say = functools.partial(click.echo, err=to_stdout)
    if service.env_file.exists():
        say(f"kept {service.env_file} (it exists){secret_names(config, ': check it names ')}")
    else:
        service.env_file.touch(mode=0o600)
        service.env_file.write_text(render_env_file(config), encoding="utf-8")
        say(f"wrote {service.env_file}{secret_names(config, ': fill in ')}")
    if to_stdout:
        click.echo(unit, nl=False)
    else:
        path.write_text(unit, encoding="utf-8")
        say(f"wrote {path}: {' '.join(service.command)}, as {user}")
    for step in next_steps(service, unit=None if to_stdout else path):
        say(step)


def next_steps(service: Service, *, unit: Path | None) -> list[str]:
    """What is left to do by hand, as commands (`unit` None: it went to stdout)."""
    user, env_file = service.user, shlex.quote(str(service.env_file))
    steps = []
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        uid = None
        steps.append(f"sudo useradd --system --no-create-home {user}")
    # systemd refuses to start a unit whose ReadWritePaths= folder is missing.
    for folder in service.written_dirs():
        if not folder.is_dir():
            steps.append(f"sudo install -d -o {user} -m 700 {shlex.quote(str(folder))}")
        elif folder.stat().st_uid != uid:
            steps.append(f"sudo chown -R {user} {shlex.quote(str(folder))}")
    steps.append(f"sudo chown root: {env_file} && sudo chmod 600 {env_file}")
    if unit is not None:
        steps.append(f"sudo cp {shlex.quote(str(unit))} /etc/systemd/system/{UNIT_NAME}")
    steps.append("sudo systemctl daemon-reload && sudo systemctl enable --now paperbell")
    notes = []
    if service.data_dir is not None and service.data_dir == service.env_file.parent:
        notes.append(
            "note: the database is in the config's folder, so the service may write there; "
            'better: [database] url = "sqlite:////var/lib/paperbell/paperbell.sqlite"'
        )
    if service.model_dir is not None and service.model_dir == service.env_file.parent:
        notes.append(
            "note: fastembed's model folder is the config's folder, so the service may write "
            "there; better: leave [embeddings] cache_dir unset"
        )
    return [*notes, "next:", *(f"  {step}" for step in steps)]


def secret_names(config: Config, lead: str) -> str:
    """`lead` and the variables of the config's secrets ("": it names none)."""
    names = [name for _, name in config.secret_variables()]
    return lead + ", ".join(names) if names else ""


def refuse_overwrite(path: Path) -> NoReturn:
    click.echo(f"error: {path} exists; use --force to overwrite it", err=True)
    sys.exit(EXIT_USAGE)
