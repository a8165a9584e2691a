"""The web app: `app` serves health, metrics and whatever routes it is handed; `pages` are
the manage, unsubscribe and confirmation pages, `signup` the sign-up page and the live rule
check, over what every page shares (`site`); `guards` are the body cap, the form, the CSRF
token and the throttle, which the Slack endpoint uses too. It never imports Slack: the Slack
routes are handed to it by the entry point."""
