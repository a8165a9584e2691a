"""`python -m bot.cli`: the `paperbell` command."""

from bot.cli import main

main()
