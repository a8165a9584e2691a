"""`python -m bot.cli`: the `paperbell` command."""

from bot.cli import main

if __name__ == "__main__":  # not in a worker process, which imports this module again
    main()
