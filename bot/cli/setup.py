"""The first steps: `init` writes a commented config file, `demo` runs the whole pipeline
offline on the bundled listing (no config, no account).

The demo itself is `bot.demo`; it is imported when the command runs (it brings an SMTP
server and the Slack stand-in).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from bot.cli.shell import EXIT_USAGE, handle_errors, stop_on_signals
from bot.config import example_config_text


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
    """Run the whole pipeline offline on a bundled real arXiv feed.

    Reads the real arXiv listing of 28 Nov 2024 shipped with paperbell, matches it against
    example subscribers, sends their digests over real SMTP to a server started on
    loopback, and saves each received message as .eml and .html in the output folder.
    Run it twice: the second run sends nothing, because everything was delivered.
    With --serve, the links in the emails work: manage a subscription, unsubscribe.
    """
    from bot.demo import run_demo  # an SMTP server, the Slack stand-in: `demo` only

    async def main() -> int:
        stop = stop_on_signals() if serve else None
        return await run_demo(out_dir, echo=click.echo, web_port=port, serve=stop)

    sys.exit(asyncio.run(main()))


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="config.toml")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@handle_errors
def init(path: Path, force: bool) -> None:
    """Write a commented config file to PATH (default ./config.toml)."""
    if path.exists() and not force:
        click.echo(f"error: {path} exists; use --force to overwrite it", err=True)
        sys.exit(EXIT_USAGE)
    path.write_text(example_config_text(), encoding="utf-8")
    click.echo(f"wrote {path}; edit it, then run: paperbell check-config -c {path}")
