"""`paperbell bounce`: one message that came back to the bounce address, read from standard
input (the mail server pipes it in: docs/bounces.md), acted on and recorded by
bot.pipeline.bounces; or, with `--imap`, every message of the [bounces] mailbox.

From standard input it always exits 0, whatever the message was and whatever went wrong:
a mail server retries (or bounces the bounce) on any other exit code, and a bounce that
cannot be used is no reason to try again. What it did, or why it could not, is on one line
of its output and in the log; what it recorded, in `paperbell status`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, BinaryIO

import click

from bot.cli.secrets import require_secrets
from bot.cli.shell import config_option, handle_errors, load_config, open_store
from bot.config import IMAP_PASSWORD, Config
from bot.core.errors import ConfigError, PaperbellError
from bot.core.plurals import plural

log = logging.getLogger(__name__)

MAX_INPUT = 10 * 1024 * 1024  # bytes of a message read; the rest is read and dropped
_CHUNK = 1024 * 1024


def read_capped(stream: BinaryIO, limit: int = MAX_INPUT) -> tuple[bytes, bool]:
    """At most `limit` bytes of `stream`, and whether there was more (read to its end and
    dropped, so that the mail server writing into the pipe is not cut off)."""
    data = stream.read(limit)
    more = False
    while stream.read(_CHUNK):
        more = True
    return data, more


@click.command()
@config_option
@click.option(
    "--imap",
    is_flag=True,
    help="Read the [bounces] mailbox over IMAP instead of one message on standard input: "
    "each message dealt with is moved to its processed_folder, the others left as they were "
    "(`paperbell run` reads it too, every [bounces] every_minutes).",
)
def bounce(config_path: Path, imap: bool) -> None:
    """Read one bounce (a DSN, a complaint, an auto-reply) on standard input and act on it:
    a hard bounce pauses that subscriber's email, soft ones after [delivery] bounce_limit in
    a row, a complaint stops it; anything else is recorded and changes nothing. Always
    exits 0, so the mail server never retries. For the mail server's aliases file:
    `bounces: "|paperbell bounce -c /etc/paperbell/config.toml"`. With --imap, reads the
    [bounces] mailbox instead (exit 1 when it cannot be read)."""
    from bot.pipeline.bounces import handle_bounce

    if imap:
        handle_errors(_read_imap)(config_path)
        return
    try:
        raw, cut = read_capped(sys.stdin.buffer)
        if cut:
            log.warning("bounce: a message over %d bytes; read its start only", MAX_INPUT)
        config = load_config(config_path)
        if config.email is not None and config.email.bounce_address and not config.web.secret_key:
            # Mail servers run pipes with a bare environment: say what is missing.
            click.echo(
                f"bounce: [web] secret_key_env names {config.web.secret_key_env}, which is not "
                "set: the VERP tokens cannot be checked, so the bounce is recorded and "
                "changes nothing",
                err=True,
            )
        outcome = handle_bounce(raw, store=open_store(config), **_acting(config))
        click.echo(f"bounce: {outcome.action}: {outcome.line}")
    except PaperbellError as exc:
        click.echo(f"bounce: not recorded: {exc}", err=True)
    except Exception as exc:  # never a non-zero exit: the mail server would retry
        log.exception("bounce: not recorded")
        click.echo(f"bounce: not recorded: {type(exc).__name__}: {exc}", err=True)
    sys.exit(0)


def _acting(config: Config) -> dict[str, Any]:
    """How bounces are acted on: the key that checks the VERP tokens (and the signed
    Message-IDs, when [email] bounces_by_message_id lets them act), [delivery]
    bounce_limit, and the time now."""
    from bot.pipeline.wiring import message_ids, verp
    from bot.store import utcnow

    return {
        "verp": verp(config),
        "message_ids": message_ids(config),
        "bounce_limit": config.delivery.bounce_limit,
        "now": utcnow(),
    }


def _read_imap(config_path: Path) -> None:
    """`bounce --imap`: every message of the [bounces] mailbox, once."""
    from bot.bounces.imap import BounceMailbox
    from bot.pipeline.bounces import UNTOUCHED, read_mailbox

    config = load_config(config_path)
    if config.bounces is None or config.bounces.imap_url is None:
        where = str(config.path or config_path)
        raise ConfigError(
            ["bounces: --imap reads the mailbox [bounces] imap_url names"], source=where
        )
    require_secrets(config, IMAP_PASSWORD)
    store = open_store(config)
    with BounceMailbox(config.bounces.imap()) as mailbox:
        outcomes = read_mailbox(mailbox, store=store, **_acting(config))
    for outcome in outcomes:
        click.echo(f"bounce: {outcome.action}: {outcome.line}")
    left = sum(o.action in UNTOUCHED for o in outcomes)
    moved = len(outcomes) - left
    click.echo(
        f"{plural(len(outcomes), 'message')} read: {moved} moved to "
        f"{config.bounces.processed_folder}, {left} left in the mailbox"
    )
