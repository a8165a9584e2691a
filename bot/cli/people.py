"""The people commands: `subscribe` (one, or everyone a CSV file lists: bot.cli.people_file),
`unsubscribe`, `resume` and `list`, over the subscribers stored in the database and those
declared in the config file.

Shared: `subscriber_state` (also shown by `status`). Argument checks only; what a change
means for the outbox and the schedule is the store's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import click
from click.core import ParameterSource

from bot.cli.shell import RuleCommand, config_option, handle_errors, load_config, open_store
from bot.config import Config, subscriber_problems, subscriber_settings, too_many_rules
from bot.core.checks import check_label
from bot.core.errors import ConfigError, PaperbellError
from bot.core.models import Subscriber, target_label
from bot.core.plurals import plural
from bot.render.view import rule_name

if TYPE_CHECKING:
    from bot.channels.apprise_urls import Destination
    from bot.store import Store


@click.command(cls=RuleCommand)
@config_option
@click.argument("name", required=False)
@click.argument("rules", nargs=-1)
@click.option(
    "--email",
    help="The subscriber's email address, taken as confirmed; a new address its owner asked "
    "for (`/papers email`) and has not confirmed yet no longer waits.",
)
@click.option(
    "--slack-channel", metavar="CHANNEL", help="Post to this Slack channel (#name or id)."
)
@click.option("--slack-user", metavar="ID", help="Send as a Slack direct message (member id).")
@click.option(
    "--apprise",
    "apprise_urls",
    metavar="URL",
    multiple=True,
    help="Also send to this Apprise URL (ntfy://, discord://, json:// ...); refused if it "
    "carries a secret (a token, a password): a command line is kept in shell history, so "
    "give those with --apprise-env, or on the manage page.",
)
@click.option(
    "--apprise-env",
    metavar="NAME",
    help="Also send to the Apprise URLs (whitespace or comma separated) in the environment "
    "variable NAME of the process that sends (`paperbell run`); 'none' removes it.",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    help="A short name the digests show in place of a rule: the first --label names the "
    "first RULE, the second the second ('' for none). Given with a rule NAME has, it "
    "relabels it.",
)
@click.option("--category", "categories", multiple=True, help="Only papers in this category.")
@click.option("--max-papers", type=click.IntRange(1, 1000), help="At most this many per digest.")
@click.option(
    "--include",
    type=click.Choice(["new", "cross", "replace"]),
    multiple=True,
    help="Announcement types to take (default new and cross; replace = updated versions).",
)
@click.option(
    "--schedule", type=click.Choice(["daily", "weekly"]), help="How often. [default: [digest]]"
)
@click.option("--day", help="Weekly digests: the day (monday ... sunday).")
@click.option("--time", "at", metavar="HH:MM", help="When, on the subscriber's clock.")
@click.option("--timezone", metavar="ZONE", help="An IANA time zone, e.g. Europe/Berlin.")
@click.option(
    "--notify-empty/--no-notify-empty",
    default=None,
    help="On a digest day with nothing to send, send a short note that says why.",
)
@click.option(
    "--summaries/--no-summaries",
    default=None,
    help="A short summary in place of each abstract (written by the [llm] model).",
)
@click.option(
    "--language",
    metavar="TAG",
    help="Each title and abstract also in this language (a BCP 47 tag: zh, ja, de, pt-BR); "
    "`en` or `none`: English only.",
)
@click.option(
    "--similar-max",
    type=click.IntRange(0, 100),
    help="Papers like the ones NAME liked (`paperbell like`) added to a digest, at most "
    "(0: none). [default: 5]",
)
@click.option(
    "--similar-min",
    type=click.FloatRange(0, 1),
    help="The score (0 to 1) such a paper needs. [default: the ranking's own]",
)
@click.option(
    "--from-file",
    "from_file",
    type=click.File("rb"),
    metavar="FILE",
    help="Subscribe everyone a CSV file lists (`-`: standard input), in place of NAME and "
    "RULES: a header line naming the columns, email and rules, and any of name, labels, "
    "categories, include, max_papers, schedule, day, time, timezone, notify_empty, "
    "summaries, language, similar_max, similar_min; several rules in one cell separated "
    "by ';'. Every row is checked first; those stored already are left as they are.",
)
@click.option(
    "--skip-bad",
    is_flag=True,
    help="With --from-file: add the good rows even if some are bad (those are listed, exit "
    "code 1). Without it, one bad row and nothing is added (exit code 2).",
)
@click.option(
    "--dry-run", is_flag=True, help="With --from-file: check the file, say what it would add."
)
@handle_errors
def subscribe(
    config_path: Path,
    name: str,
    rules: tuple[str, ...],
    email: str | None,
    slack_channel: str | None,
    slack_user: str | None,
    apprise_urls: tuple[str, ...],
    apprise_env: str | None,
    labels: tuple[str, ...],
    categories: tuple[str, ...],
    max_papers: int | None,
    include: tuple[str, ...],
    schedule: str | None,
    day: str | None,
    at: str | None,
    timezone: str | None,
    notify_empty: bool | None,
    summaries: bool | None,
    language: str | None,
    similar_max: int | None,
    similar_min: float | None,
    from_file: BinaryIO | None,
    skip_bad: bool,
    dry_run: bool,
) -> None:
    """Subscribe NAME with one or more RULES (stored in the database), or everyone a CSV
    file lists (--from-file).

    Adds the rules to NAME if it exists (and subscribes it again); the options change its
    settings (given alone, they leave an unsubscribed NAME unsubscribed). Examples:

    \b
    paperbell subscribe ada --email ada@example.org '"diffusion policy"' 'multi-agent cat:cs.RO'
    paperbell subscribe ada 'marl OR "multi-agent reinforcement learning"' --label 'multi-agent RL'
    paperbell subscribe robot-lab --slack-channel '#robot-learning' 'manipulation cat:cs.RO'
    paperbell subscribe lab --apprise ntfy://ntfy.example/papers --apprise-env LAB_CHATS 'robot'
    paperbell subscribe ada --schedule weekly --day friday --time 16:00 --timezone Europe/Paris
    paperbell subscribe ada --summaries --language zh
    paperbell subscribe --from-file people.csv
    """
    from bot.cli.people_file import subscribe_from_file
    from bot.manage import reading_parts
    from bot.store import utcnow

    name = _one_way(name, rules, from_file, skip_bad=skip_bad, dry_run=dry_run)
    config = load_config(config_path)
    if from_file is not None:
        subscribe_from_file(config, from_file, dry_run=dry_run, skip_bad=skip_bad)
        return
    settings = {"schedule": schedule, "day": day, "time": at, "timezone": timezone}
    settings_given = {k: v for k, v in settings.items() if v is not None}
    slack = {"slack_channel": slack_channel, "slack_user": slack_user}
    slack_given = {k: v for k, v in slack.items() if v is not None}
    reading = {"summaries": summaries, "language": language}
    reading_given = {k: v for k, v in reading.items() if v is not None}
    named = {rule: label for rule, label in zip(rules, labels, strict=False) if label.strip()}
    problems = subscriber_problems(
        name=name,
        email=email,
        rules=rules or ["placeholder"],
        categories=categories,
        settings={**settings_given, **slack_given, **reading_given},
        labels=named,
    )
    if len(labels) > len(rules):
        problems.append(
            f"--label: {plural(len(labels), 'label')} for {plural(len(rules), 'RULE')}: the "
            "first --label names the first RULE, the second the second"
        )
    if slack_given and (config.slack is None or not config.slack.bot_token_env):
        problems.append("posting to Slack needs [slack] bot_token_env in the config")
    declared = name in {s.name for s in config.subscribers}
    if declared:
        problems.append(f"{name!r} is declared in the config file: change it there")
    env = (
        None if apprise_env is None or apprise_env.strip().lower() in ("none", "") else apprise_env
    )
    if env is not None:
        problems += [
            f"--apprise-env: {p.partition(': ')[2]}"
            for p in subscriber_problems(
                name=name, email=email, rules=["placeholder"], settings={"apprise_env": env}
            )
        ]
    places, url_problems = given_destinations(apprise_urls)
    problems += url_problems
    store = open_store(config)
    row = store.subscribers.get(name)
    if row is not None and row.origin == "config" and not declared:
        problems.append(
            f"{name!r} was a subscriber of the config file, which declares it no more: "
            f"`paperbell unsubscribe {name} --delete` removes it and its history first"
        )
    if row is None and not (email or slack_given or places or env):
        problems.append(
            "say where its digests go: --email, --slack-channel, --slack-user, --apprise or "
            "--apprise-env"
        )
    if row is None and not rules:
        problems.append("give at least one RULE for a new subscriber")
    have = store.subscribers.rule_texts(name)
    count = len(set(have) | set(rules))
    if count > len(have) and (too_many := too_many_rules(count, config.digest.max_rules)):
        problems.append(f"rules: {name} would have {too_many}")
    if problems:
        raise ConfigError(problems, source="subscribe")
    # An address given withdraws the one its owner asked for and has not confirmed yet.
    waiting = _waiting_email(store, row.id) if row is not None and email else None
    sub, created = store.subscribers.add(
        name,
        email=email,
        rules=rules,
        now=utcnow(),
        categories=categories,
        max_papers=max_papers,
        include=include or None,
        slack_channel=slack_channel,
        slack_user=slack_user,
        apprise_env=None if apprise_env is None else env or "",
        max_rules=config.digest.max_rules,
        labels={rule: check_label(label) for rule, label in named.items()},  # checked above
    )
    assert sub.id is not None
    for url, found in places:
        store.targets.add_destination(sub.id, found.channel, url, now=utcnow(), self_service=False)
    similar = {"similar_max": similar_max, "similar_min": similar_min}
    similar_given = {k: v for k, v in similar.items() if v is not None}
    if settings_given or notify_empty is not None or reading_given or similar_given:
        extra: dict[str, str | bool | int | float | None] = dict(similar_given)
        if notify_empty is not None:
            extra["notify_empty"] = notify_empty
        # Checked above: the values as stored (a language's standard tag, None for English).
        extra |= subscriber_settings(name, reading_given)[0]
        store.subscribers.set_schedule(name, **settings_given, **extra)
    (sub,) = store.subscribers.all(
        include_inactive=True, defaults=config.digest.defaults(), only=sub.id
    )
    # The slot already handled stays as it is: marking the new schedule's latest slot
    # handled would move the next digest's window past papers not sent yet. A new time or
    # day whose latest slot has passed sends at the next tick (only papers not sent yet).
    verb = "subscribed" if created else "updated"
    notes = ", with a note on empty days" if sub.notify_empty else ""
    notes += "".join(f", {part}" for part in reading_parts(sub))
    click.echo(f"{verb} {sub.name} {_where(config, sub)}: {sub.schedule.describe()}{notes}")
    if not sub.active:
        click.echo(
            f"note: {sub.name} stays {subscriber_state(store, sub)}: `paperbell resume "
            f"{sub.name}` sends its digests again"
        )
    if env is not None and env not in config.environ:
        click.echo(
            f"note: {env} is not set here: the process that sends (`paperbell run`) needs it"
        )
    if waiting and email and waiting.lower() != email.lower():
        click.echo(
            f"note: {sub.name}'s new address <{waiting}> no longer waits for confirmation: "
            "its link confirms nothing now"
        )
    click.echo(f"{plural(len(sub.rules), 'rule')}:")
    for number, text in enumerate(sub.rules, 1):
        click.echo(f"  {number}. {_rule(sub, text)}")


@click.command()
@config_option
@click.argument("name")
@click.option("--rule", "rule_number", type=int, metavar="N", help="Remove only rule N.")
@click.option(
    "--apprise",
    "apprise_place",
    metavar="URL",
    help="Remove only this Apprise destination: its URL, or its masked form as `list` shows "
    "it (ntfy://ntfy.example/papers, discord://1...4/a...z/).",
)
@click.option(
    "--delete",
    is_flag=True,
    help="Delete the subscriber and its history: one of the database, or one the config "
    "file declared and declares no more (renamed or removed there).",
)
@handle_errors
def unsubscribe(
    config_path: Path,
    name: str,
    rule_number: int | None,
    apprise_place: str | None,
    delete: bool,
) -> None:
    """Stop sending digests to NAME (or remove one of its rules with --rule N, one of its
    Apprise destinations with --apprise URL).

    Works for subscribers from the config file too: they stay unsubscribed until
    `paperbell subscribe`-d again (database) or renamed in the file."""
    from bot.channels.apprise_urls import destination_channel
    from bot.store import utcnow

    config = load_config(config_path)
    store = open_store(config)
    if apprise_place is not None:
        row = store.subscribers.get(name)
        if row is None or row.origin != "database":
            raise PaperbellError(
                f"no database subscriber named {name!r}",
                hint="a config file's subscriber's destinations are changed in the file",
            )
        channel = destination_channel(apprise_place)
        if not store.targets.remove_destination(row.id, channel):
            raise PaperbellError(
                f"{name} has no such Apprise destination given on the page or with --apprise",
                hint="see `paperbell list` (a variable's URLs are changed in the variable)",
            )
        click.echo(f"removed an Apprise destination of {name}")
        return
    if rule_number is not None:
        removed = store.subscribers.remove_rule(name, rule_number)
        click.echo(f"removed rule {rule_number} of {name}: {removed.text}")
    elif delete:
        gone = name not in {s.name for s in config.subscribers}  # a name the file dropped
        store.subscribers.delete(name, config_gone=gone)
        click.echo(f"deleted {name} and its delivery history")
    else:
        if name in {s.name for s in config.subscribers}:
            store.subscribers.sync_config(config.declared_subscribers(), now=utcnow())
        if not store.subscribers.set_active(name, False, now=utcnow()):
            raise PaperbellError(f"no subscriber named {name!r}", hint="see `paperbell list`")
        click.echo(f"unsubscribed {name}: no more digests")


@click.command()
@config_option
@click.argument("name")
@handle_errors
def resume(config_path: Path, name: str) -> None:
    """Send digests to NAME again, after `unsubscribe`, a pause for a bouncing address, or
    a pause of one of its Apprise destinations that kept refusing."""
    from bot.store import utcnow

    config = load_config(config_path)
    store = open_store(config)
    if name in {s.name for s in config.subscribers}:
        store.subscribers.sync_config(config.declared_subscribers(), now=utcnow())
    else:
        stored = store.subscribers.get(name)
        if stored is not None and stored.origin == "config":  # renamed or removed there
            raise PaperbellError(
                f"{name!r} is in the config file no more: nothing would be sent",
                hint=f"add it back to the file, or `paperbell unsubscribe {name} --delete` "
                "its history",
            )
    if not store.subscribers.set_active(name, True, now=utcnow()):
        raise PaperbellError(f"no subscriber named {name!r}", hint="see `paperbell list`")
    row = store.subscribers.get(name)
    targets_resumed = store.targets.resume(row.id) if row is not None else 0
    again = f" (and to {plural(targets_resumed, 'paused destination')})" if targets_resumed else ""
    click.echo(f"resumed {name}: digests will be sent again{again}")
    if row is not None and row.email and not row.email_confirmed:  # a complaint, or Slack
        click.echo(
            f"note: {name}'s address <{row.email}> is not confirmed: no email goes to it "
            f"until it is confirmed again; `paperbell subscribe {name} --email {row.email}` "
            "confirms it, if its owner asked you to"
        )


@click.command("list")
@config_option
@handle_errors
def list_(config_path: Path) -> None:
    """List subscribers (config file and database): where their digests go (Apprise URLs
    masked), their settings and numbered rules."""
    from bot.manage import reading_parts
    from bot.pipeline.bounces import pause_line

    config = load_config(config_path)
    store = open_store(config, create=False)
    subscribers = store.subscribers.all(
        config.declared_subscribers(), include_inactive=True, defaults=config.digest.defaults()
    )
    counts = store.outbox.delivery_counts()
    pauses = store.targets.paused()
    if not subscribers:
        click.echo("no subscribers")
    for sub in subscribers:
        got, last = counts.get(sub.id or -1, (0, None))
        status = subscriber_state(store, sub)
        when = f", last {last:%Y-%m-%d %H:%M} UTC" if last else ""
        sent = plural(got, "paper")
        click.echo(f"{sub.name} {_where(config, sub)} [{sub.origin}, {status}] {sent} sent{when}")
        email = pauses.get((sub.id or -1, "email"))
        if email is not None:
            click.echo(f"    {pause_line(email)} (`paperbell resume {sub.name}`)")
        extra = []
        if sub.categories:
            extra.append("categories " + ", ".join(sub.categories))
        extra.append("include " + ", ".join(sorted(sub.include)))
        extra.append(f"max {sub.max_papers}")
        extra.append(
            sub.schedule.describe() + (", notes on empty days" if sub.notify_empty else "")
        )
        extra.extend(reading_parts(sub))
        click.echo("    " + "; ".join(extra))
        for number, text in enumerate(sub.rules, 1):
            click.echo(f"    {number}. {_rule(sub, text)}")


def _one_way(
    name: str | None,
    rules: Sequence[str],
    from_file: BinaryIO | None,
    *,
    skip_bad: bool,
    dry_run: bool,
) -> str:
    """NAME (and RULES, options) or --from-file, not both; the options of a file with it."""
    if from_file is None:
        if skip_bad or dry_run:
            raise click.UsageError("--skip-bad and --dry-run go with --from-file")
        if name is None:
            raise click.UsageError("Missing argument 'NAME'.")
        return name
    ctx = click.get_current_context()
    alone = {"config_path", "from_file", "skip_bad", "dry_run", "name", "rules"}
    given = [
        param.opts[-1]
        for param in ctx.command.params
        if param.name not in alone
        and param.name is not None
        and ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE
    ]
    if name is not None or rules or given:
        arguments = [*(["NAME"] if name is not None else []), *(["RULES"] if rules else [])]
        what = ", ".join([*arguments, *given])
        raise click.UsageError(
            f"--from-file takes each subscriber from the file's columns; give no {what} with it"
        )
    return ""


def _rule(sub: Subscriber, text: str) -> str:
    """A rule as listed: itself, after its label when it has one (`multi-agent RL: marl OR
    ...`); never in quotes, which in a rule mean a phrase."""
    return rule_name(text, sub.labels).both


def given_destinations(
    urls: Sequence[str],
) -> tuple[list[tuple[str, Destination]], list[str]]:
    """Apprise URLs given on the command line: each read (offline), and the problems (one
    Apprise cannot read, one with a secret: a command line is kept in shell history)."""
    from bot.channels.apprise_urls import Unreadable, destination

    places: list[tuple[str, Destination]] = []
    problems: list[str] = []
    for url in urls:
        try:
            found = destination(url)
        except Unreadable as exc:
            problems.append(f"--apprise: {exc}")
            continue
        if found.secret:
            problems.append(
                f"--apprise: {found.label} carries a secret (shown masked): a command line is "
                "kept in shell history; give it in a variable named with --apprise-env, or on "
                "the manage page"
            )
            continue
        places.append((url.strip(), found))
    return places, problems


def _where(config: Config, sub: Subscriber) -> str:
    """Where a subscriber's digests go: `<ada@lab.example>`, `slack #robots`, both; an
    address that waits for its owner's confirmation is shown, marked."""
    from bot.pipeline.wiring import targets

    places = [target.label for target in targets(config, sub)]
    if sub.email and not sub.email_confirmed:
        places.insert(0, f"{target_label('email', sub.email)} (unconfirmed)")
    if sub.pending_email:
        places.append(f"{target_label('email', sub.pending_email)} (waits for confirmation)")
    return " + ".join(places) or "(nowhere)"


def subscriber_state(store: Store, sub: Subscriber) -> str:
    """ "active", "paused: <why>" (a bouncing address, ...) or "unsubscribed"."""
    if sub.active:
        return "active"
    row = store.subscribers.get(sub.name)
    if row is not None and row.paused_reason:
        return f"paused: {row.paused_reason}"
    return "unsubscribed"


def _waiting_email(store: Store, subscriber_id: int) -> str | None:
    """The address the subscriber asked for (`/papers email`) and has not confirmed yet."""
    found = store.subscribers.all(include_inactive=True, only=subscriber_id)
    return found[0].pending_email if found else None
