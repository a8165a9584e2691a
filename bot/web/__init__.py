"""The web app: `app` serves health, metrics and whatever routes it is handed; `pages` are
the manage, unsubscribe and confirmation pages. It never imports Slack: the Slack routes are
handed to it by the entry point."""
