"""The stages joined: the config's parts built, papers polled in, digests delivered out.

Wiring only: every decision lives in the stage modules (sources, store, match, render,
channels). The clock, the store, the HTTP fetcher and the channels are passed in, so the
CLI, the daemon, the Slack command, the pages, the demo and the tests share all of it.

    Config --wiring--> sources, fetcher; Parts: channels, settings, signer, retry policy

    poll:     source --harvest--> papers (tagged, dated) --> store      (one report each)

    deliver:  store --plan_delivery--> who is due, their rules, what they match
                    --build_digests--> digest per channel kind
                    --write_texts--> summaries, translations (texts)
                    --queue--> outbox, each digest a job
                    --send--> each job claimed, rendered (jobs), sent, recorded
                                                                        (one report each)
              (dry run, to files: rendered here; no queue, nothing recorded)

Modules: `wiring` (config -> parts), `poll`, `deliver` (with `texts`, the summaries and
translations of the papers going out, `dispatch`, the queue and send steps and their
reports, `jobs`, the digest queued as a job and rendered by the worker that claims it, and
`activity`, the rule counts the manage page shows), `scheduler` (the daemon:
when to poll and deliver, with `planning`, whose digest is due) and `backfill` (past days
into the store), the last three imported from their modules.
"""

from bot.pipeline.activity import refresh_rule_counts
from bot.pipeline.deliver import DeliveryReport, DeliveryRequest, deliver
from bot.pipeline.poll import PollReport, poll, poll_source
from bot.pipeline.texts import TextsRun
from bot.pipeline.wiring import (
    NOTICE_CHANNEL,
    Parts,
    build_channels,
    build_fetcher,
    build_sources,
    email_settings,
    listing_checks,
    retry_policy,
    slack_settings,
    smtp_settings,
    wire,
    wire_daemon,
)

__all__ = [
    "NOTICE_CHANNEL",
    "DeliveryReport",
    "DeliveryRequest",
    "Parts",
    "PollReport",
    "TextsRun",
    "build_channels",
    "build_fetcher",
    "build_sources",
    "deliver",
    "email_settings",
    "listing_checks",
    "poll",
    "poll_source",
    "refresh_rule_counts",
    "retry_policy",
    "slack_settings",
    "smtp_settings",
    "wire",
    "wire_daemon",
]
