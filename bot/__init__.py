"""paperbell: tells researchers about the new papers that matter to them.

The package is one pipeline: sources -> store -> matcher -> digest -> render -> channels.
The CLI, the scheduler and the web app only wire its stages together.
"""

__version__ = "0.1.0"

USER_AGENT = f"paperbell/{__version__} (+https://github.com/paperbell/paperbell)"
