"""The command line: a thin shell that builds everything from the config and runs one stage.

`main` is the `paperbell` group (`bot.cli.shell`: logging, errors, exit codes) with every
command added: `setup` (init, demo), `reports` (check-config, status), `people` (subscribe,
unsubscribe, resume, list), `likes` (like, dislike, unlike, likes), `digests` (poll,
backfill, digest), `trial` (try), `texts` (summarize), `daemon` (run, serve), `db` (the schema:
current, upgrade) and `bounces` (bounce: what comes back to the bounce address).
"""

from __future__ import annotations

from bot.cli import bounces, daemon, db, digests, likes, people, reports, setup, texts, trial
from bot.cli.shell import main

main.add_command(setup.init)
main.add_command(setup.demo)
main.add_command(reports.check_config)
main.add_command(reports.status)
main.add_command(people.subscribe)
main.add_command(people.unsubscribe)
main.add_command(people.resume)
main.add_command(people.list_)
main.add_command(likes.like)
main.add_command(likes.dislike)
main.add_command(likes.unlike)
main.add_command(likes.likes)
main.add_command(digests.poll)
main.add_command(digests.backfill)
main.add_command(digests.digest)
main.add_command(trial.try_)
main.add_command(texts.summarize)
main.add_command(daemon.run)
main.add_command(daemon.serve)
main.add_command(db.db)
main.add_command(bounces.bounce)

__all__ = ["main"]
