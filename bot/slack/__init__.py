"""Slack as a front end: `commands` is the slash command as plain logic (text in, reply
out, no HTTP), with its `syntax`, the `messages` it takes and gives, the `subscriptions`
a command reaches and the per-user `limits` of costly ones; `app` adapts it to Slack's
signed HTTP requests and to Socket Mode."""
