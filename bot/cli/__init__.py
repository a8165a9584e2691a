"""The command line: a thin shell that builds everything from the config and runs one stage.

`main` is the `paperbell` group (`bot.cli.shell`: logging, errors, exit codes) with every
command added: `setup` (init, demo), `reports` (check-config, status), `people` (subscribe,
unsubscribe, resume, list), `likes` (like, dislike, unlike, likes), `digests` (poll,
backfill, digest), `trial` (try), `texts` (summarize), `daemon` (run, serve), `db` (the schema:
current, upgrade) and `bounces` (bounce: what comes back to the bounce address).

Each command is added by where it is (`COMMANDS`) and imported only when it runs or its help
is asked for: `paperbell --help` and `--version` import no command. Each entry keeps the
first sentence of the command's help, which the group's --help lists. A command's module
imports at its top only what its options and help need (click, the shell, the pure layers,
the config); the store, the pipeline and their libraries are imported inside the commands
that use them, so that `paperbell COMMAND --help` starts at once too. tests/test_cli_startup.py
holds this: what each start imports, and each entry's help to the command's own.
"""

from __future__ import annotations

from bot.cli.lazy import LazyCommand
from bot.cli.shell import main

COMMANDS: dict[str, LazyCommand] = {
    "backfill": LazyCommand(
        "bot.cli.digests",
        "backfill",
        "Fill the store with the papers of a past period, so that `paperbell try` can test a "
        "rule on them: the arXiv sources through the arXiv API (one request every 3 seconds, "
        "day by day, at most 10,000 results a day, and a page the API repeats ends that day), "
        "Hugging Face day by day.",
    ),
    "bounce": LazyCommand(
        "bot.cli.bounces",
        "bounce",
        "Read one bounce (a DSN, a complaint, an auto-reply) on standard input and act on it: a"
        " hard bounce pauses that subscriber's email, soft ones after [delivery] bounce_limit "
        "in a row, a complaint stops it; anything else is recorded and changes nothing.",
    ),
    "check-config": LazyCommand(
        "bot.cli.reports",
        "check_config",
        "Validate the config file and report every problem at once; say which secrets' "
        "variables are not set, and which commands need them (the others run without), and what"
        " a subscriber asks for that the file cannot give yet (a note).",
    ),
    "db": LazyCommand(
        "bot.cli.db",
        "db",
        "The database's schema (which revision it is at, upgrading it), backups, and pruning "
        "what it no longer needs to keep.",
    ),
    "demo": LazyCommand(
        "bot.cli.setup",
        "demo",
        "Run the whole pipeline offline on bundled real data: no network, no account.",
    ),
    "digest": LazyCommand(
        "bot.cli.digests",
        "digest",
        "Build and send every subscriber's digest of papers they have not received yet.",
    ),
    "dislike": LazyCommand(
        "bot.cli.likes",
        "dislike",
        "Tell paperbell that NAME dislikes these papers: papers like them rank lower.",
    ),
    "init": LazyCommand(
        "bot.cli.setup",
        "init",
        "Write a commented config file to PATH (default ./config.toml, - for stdout); with "
        "--systemd, a systemd unit for the daemon on the config file -c CONFIG.",
    ),
    "like": LazyCommand(
        "bot.cli.likes",
        "like",
        "Tell paperbell that NAME likes these papers: digests then add papers like them.",
    ),
    "likes": LazyCommand(
        "bot.cli.likes",
        "likes",
        "List the papers NAME likes and dislikes, and where each verdict came from.",
    ),
    "list": LazyCommand(
        "bot.cli.people",
        "list_",
        "List subscribers (config file and database): where their digests go (Apprise URLs "
        "masked), their settings and numbered rules.",
    ),
    "poll": LazyCommand(
        "bot.cli.digests", "poll", "Fetch every configured source once and store the new papers."
    ),
    "resume": LazyCommand(
        "bot.cli.people",
        "resume",
        "Send digests to NAME again, after `unsubscribe`, a pause for a bouncing address, or a "
        "pause of one of its Apprise destinations that kept refusing.",
    ),
    "run": LazyCommand(
        "bot.cli.daemon",
        "run",
        "Run the daemon: poll the sources, send each digest at its subscriber's time.",
    ),
    "serve": LazyCommand(
        "bot.cli.daemon",
        "serve",
        "Serve the web app alone: the Slack slash command and the pages reached from emails (no"
        " polling, no scheduled digests).",
    ),
    "status": LazyCommand(
        "bot.cli.reports",
        "status",
        "Show the sources' polls, each subscriber's next digest and deliveries (a line per "
        "destination, with its retry or pause), the outbox, each email relay ([email]'s, or "
        "each of [[email.servers]] with its weight: its limits max_per_second, max_per_hour and"
        " max_per_day, what it took lately, a slow-down it asked for, being skipped as "
        "failing), how many email digests wait and when the next goes, and today's summaries "
        "and translations (requests, budget, failures, tokens).",
    ),
    "subscribe": LazyCommand(
        "bot.cli.people",
        "subscribe",
        "Subscribe NAME with one or more RULES (stored in the database), or everyone a CSV file"
        " lists (--from-file).",
    ),
    "summarize": LazyCommand(
        "bot.cli.texts",
        "summarize",
        "Show the summary (and, with --language, the translations) of stored papers by ID, as "
        "digests show them: written by the [llm] model, or read from the store when it already "
        "wrote them.",
    ),
    "try": LazyCommand(
        "bot.cli.trial",
        "try_",
        "Show which papers RULE matches, best first, with the hits highlighted, and how many "
        "per announcement day: tune a rule before subscribing with it.",
    ),
    "unlike": LazyCommand(
        "bot.cli.likes", "unlike", "Remove NAME's verdict (like or dislike) on these papers."
    ),
    "unsubscribe": LazyCommand(
        "bot.cli.people",
        "unsubscribe",
        "Stop sending digests to NAME (or remove one of its rules with --rule N, one of its "
        "Apprise destinations with --apprise URL).",
    ),
}

main.add_lazy_commands(COMMANDS)

__all__ = ["COMMANDS", "main"]
