"""The demo's mail server: SMTP on loopback (aiosmtpd) that saves every message it receives
as .eml, and its HTML part as .html, for the demo's reader to open.

A stand-in for a real mail server, for the demo only: it accepts everything, relays nothing.
"""

from __future__ import annotations

import re
import socket
from datetime import date
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

from aiosmtpd.controller import Controller

from bot.channels.email import html_part


class SavingHandler:
    """An aiosmtpd handler that saves each message as .eml, and its HTML part as .html."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.saved: dict[str, list[Path]] = {}

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content: bytes = envelope.original_content or envelope.content
        message = cast(EmailMessage, message_from_bytes(content, policy=policy.default))
        recipient = envelope.rcpt_tos[0]
        local = re.sub(r"[^A-Za-z0-9_.-]", "_", recipient.split("@")[0])
        msgid = str(message.get("Message-ID", "")).strip("<>").split("@")[0]
        digest = msgid.rsplit(".", 1)[-1][:10] or str(len(self.saved))
        day = date.today().isoformat()
        stem = self.folder / f"{local}-{day}-{digest}"
        self.folder.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".eml").write_bytes(content)
        if (html := html_part(message)) is not None:
            stem.with_suffix(".html").write_text(html, encoding="utf-8")
        self.saved.setdefault(recipient, []).append(stem.with_suffix(".eml"))
        return "250 Message accepted for delivery"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mail_server(folder: Path) -> tuple[Controller, SavingHandler]:
    """An SMTP server on a free loopback port (`.port`), not started yet, that saves what it
    receives into `folder`; its handler says what was saved."""
    handler = SavingHandler(folder)
    return Controller(handler, hostname="127.0.0.1", port=free_port()), handler
