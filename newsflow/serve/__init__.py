"""``newsflow serve``: the live desk, a web page of the current stories, digests and feed health.

:mod:`newsflow.serve.store` holds the state (pure), :mod:`newsflow.serve.sources` feeds it from
a replay's output directory or from the topics, :mod:`newsflow.serve.app` serves it (Starlette,
Jinja2 templates, server-sent events). ``docs/desk.md`` describes the pages.
"""
