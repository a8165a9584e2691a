"""paperbell: tells researchers about the new papers that matter to them.

The package is one pipeline, and its folders are the pipeline's stages:

    sources -> store -> match -> render -> channels

Layers, lowest first; a module imports its own layer or lower ones, never a higher one
(tests/project/test_architecture.py holds this order as data):

    core          models, calendar, schedule, links, merge, checks, errors, redact
    rules         the rule language
    sources       store       match       render      channels      (the stages, in order)
    config        the TOML file, validated
    pipeline      wiring (config -> parts), poll, deliver, backfill, scheduler
    manage        slack (commands)           (front ends: plain logic, no HTTP)
    web           slack.app   cli   demo     (entry points: they only wire)
"""

__version__ = "0.1.0"

USER_AGENT = f"paperbell/{__version__} (+https://github.com/paperbell/paperbell)"
