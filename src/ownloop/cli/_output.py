"""What every command prints passes through one redactor: the agent's rules, else the built-in.

Commands print values read from a store or returned by a run (a task, an answer, a detail, a
decision's reason, a tool's arguments), errors and the log records of a long-running command; the
trace was redacted before it was stored, these were not all. `CLI_REDACTOR` is the built-in rules
with room for deeply nested records; `agent_redactor` adds an agent's own rules and the names of
its tools' ``Sensitive()`` parameters.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ownloop.redaction import Bounds, Redactor

if TYPE_CHECKING:
    from ownloop.agent import Agent

__all__ = [
    "CLI_REDACTOR",
    "RedactingLogFilter",
    "agent_redactor",
    "redact_logs_to_stderr",
    "say",
    "say_json",
]

CLI_REDACTOR = Redactor().with_bounds(Bounds(max_depth=100))
"""The built-in rules, for commands that have no agent to take rules from."""


def agent_redactor(agent: Agent | None) -> Redactor:
    """The agent's redaction rules, with its tools' sensitive parameters; else the built-in.

    Args:
        agent: The agent a command loaded, if any.

    Returns:
        The redactor for what the command prints.
    """
    if agent is None:
        return CLI_REDACTOR
    names = sorted({name for spec in agent.tools.specs() for name in spec.sensitive})
    return agent.redactor.with_keys(*names) if names else agent.redactor


def say(text: str, redactor: Redactor = CLI_REDACTOR, *, file: TextIO | None = None) -> None:
    """Print one line of a command's output, redacted.

    Args:
        text: The line.
        redactor: The rules; the built-in ones by default.
        file: Where to (standard output by default).
    """
    print(redactor.redact_text(text), file=file if file is not None else sys.stdout)


def say_json(value: Any, redactor: Redactor = CLI_REDACTOR, *, indent: int | None = 2) -> None:
    """Print a JSON-shaped value, redacted value by value (so the output stays valid JSON).

    Args:
        value: The value.
        redactor: The rules; the built-in ones by default.
        indent: JSON indentation (``None``: one line).
    """
    print(json.dumps(redactor.redact(value), indent=indent, ensure_ascii=False))


class RedactingLogFilter(logging.Filter):
    """A logging filter that redacts each record's message and traceback before it is written.

    Args:
        redactor: The rules.
    """

    def __init__(self, redactor: Redactor = CLI_REDACTOR) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place; never drop it.

        Args:
            record: The record.

        Returns:
            ``True``.
        """
        record.msg = self._redactor.redact_text(record.getMessage())
        record.args = None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self._redactor.redact_text(text)
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self._redactor.redact_text(record.stack_info)
        return True


def redact_logs_to_stderr(redactor: Redactor = CLI_REDACTOR) -> logging.Handler:
    """Send warnings and errors of every logger to standard error, redacted.

    Args:
        redactor: The rules.

    Returns:
        The handler, added to the root logger.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.addFilter(RedactingLogFilter(redactor))
    logging.getLogger().addHandler(handler)
    return handler
