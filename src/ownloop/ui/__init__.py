"""A browser view of runs and approvals (``ownloop ui``; install the ``ownloop[ui]`` extra).

A small ASGI app (starlette, server-rendered jinja2 templates, no JavaScript build) over a
`RunStore`: the runs list, a run's page (timeline, receipts, write journal, budgets) and the
pending approvals, where a named approver approves or denies one exact call. Pages update live
through server-sent events. Safe by default: it listens on 127.0.0.1, every request needs the
per-launch access token, forms carry a CSRF value, every value is escaped and redacted, and a
strict content security policy forbids inline scripts. Only this package imports the web stack.
"""

from ownloop.ui._app import UiApp, address, create_app, stop_resuming
from ownloop.ui._security import cookie_name, csrf_value, new_token
from ownloop.ui._server import is_loopback, serve

__all__ = [
    "UiApp",
    "address",
    "cookie_name",
    "create_app",
    "csrf_value",
    "is_loopback",
    "new_token",
    "serve",
    "stop_resuming",
]
