"""A real IMAP server on loopback for the bounce mailbox's tests: Debian's dovecot-imapd
(tests/system-packages.sh installs it), started by the test with a configuration of its own
(one user, a Maildir in a folder of its own, plain IMAP on a free loopback port) and
stopped after it. Skipped, saying why, where dovecot is not installed or the tests do not
run as root (dovecot switches to its own users)."""

from __future__ import annotations

import imaplib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.demo import free_port
from support.bounces import ENV, write_config
from support.cli import invoke

DOVECOT = "/usr/sbin/dovecot"
USER, PASSWORD = "bounces", "imap-Pass-0123"


@dataclass(frozen=True)
class ImapServer:
    port: int
    user: str
    password: str

    def client(self) -> imaplib.IMAP4:
        imap = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        imap.login(self.user, self.password)
        return imap

    def append(self, raw: bytes, mailbox: str = "INBOX") -> None:
        imap = self.client()
        try:
            imap.create(mailbox)
            kind, data = imap.append(
                mailbox, None, None, raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            )
            assert kind == "OK", data
        finally:
            imap.logout()

    def messages(self, mailbox: str) -> list[tuple[bytes, bytes]]:
        """(flags, raw) of each message in `mailbox` (none if it does not exist)."""
        imap = self.client()
        try:
            kind, _ = imap.select(f'"{mailbox}"', readonly=True)
            if kind != "OK":
                return []
            _, data = imap.uid("SEARCH", None, "ALL")
            found = []
            for uid in (data[0] or b"").split():
                _, parts = imap.uid("FETCH", uid, "(FLAGS BODY.PEEK[])")
                head, raw = next(p for p in parts if isinstance(p, tuple))
                flags = head.split(b"FLAGS (", 1)[1].split(b")", 1)[0]
                found.append((flags, raw))
            return found
        finally:
            imap.logout()


@contextmanager
def dovecot() -> Iterator[ImapServer]:
    if not Path(DOVECOT).exists():
        pytest.skip("dovecot-imapd is not installed (tests/system-packages.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("dovecot needs root to start with users of its own")
    owner = pwd.getpwnam("dovecot")
    folder = Path(tempfile.mkdtemp(prefix="paperbell-imap-"))
    folder.chmod(0o755)  # dovecot's own users read the users file, write the Maildir
    try:
        mail = folder / "mail"
        mail.mkdir()
        os.chown(mail, owner.pw_uid, owner.pw_gid)
        (folder / "users").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::\n")
        port = free_port()
        (folder / "dovecot.conf").write_text(
            f"""base_dir = {folder}/run
state_dir = {folder}/state
instance_name = paperbell-test-{port}
listen = 127.0.0.1
protocols = imap
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = {folder}/dovecot.log
mail_location = maildir:{mail}/%u
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {folder}/users
}}
userdb {{
  driver = static
  args = uid=dovecot gid=dovecot home={mail}/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
"""
        )
        process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(folder / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            server = ImapServer(port, USER, PASSWORD)
            for _ in range(100):
                try:
                    server.client().logout()
                    break
                except (OSError, imaplib.IMAP4.error):
                    if process.poll() is not None:
                        log = (folder / "dovecot.log").read_text(errors="replace")
                        raise RuntimeError(f"dovecot did not start: {log[-2000:]}") from None
                    time.sleep(0.05)
            yield server
        finally:
            process.terminate()
            process.wait(timeout=10)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def mailbox_config(
    folder: Path, database_url: str, port: int, server: ImapServer
) -> tuple[Path, dict[str, str]]:
    """test_bounce_cli's config, with the dovecot mailbox of `server`, and its environment."""
    config = write_config(folder, database_url, port)
    return config, with_mailbox(config, server)


def send_digests(config: Path, env: dict[str, str], sink: Any) -> dict[str, tuple[str, bytes]]:
    """Poll and send the digests to `sink`: recipient -> (envelope sender, message)."""
    assert invoke("poll", config=config, env=env).exit_code == 0
    assert invoke("digest", "--since", "2024-11-28", config=config, env=env).exit_code == 0
    return {
        to[0]: (mail_from, raw)
        for (mail_from, to), raw in zip(sink.envelopes, sink.raw, strict=True)
    }


def with_mailbox(config: Path, server: ImapServer) -> dict[str, str]:
    with config.open("a") as file:
        file.write(
            f"""[bounces]
imap_url = "imap://{server.user}@127.0.0.1:{server.port}/INBOX"
password_env = "PB_IMAP_PASSWORD"
"""
        )
    return {**ENV, "PB_IMAP_PASSWORD": server.password}
