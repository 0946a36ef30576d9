"""The filters and pages of ``ownloop runs list`` (beyond ``--state`` and ``--status``).

Times are ISO 8601 (``2026-11-30T12:00:00+00:00``; UTC when no zone is given) or an age
(``2d``: two days ago). A full page ends with the command that prints the next one.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from ownloop.cli._retain import parse_age
from ownloop.contracts import RunSummary, utc_now
from ownloop.exceptions import ConfigurationError
from ownloop.store import run_cursor

__all__ = ["add_filters", "filters", "next_page", "parse_time"]


def add_filters(parser: argparse.ArgumentParser) -> None:
    """Add the agent, actor, time and page options to ``runs list``.

    Args:
        parser: The ``runs list`` parser.
    """
    parser.add_argument("--agent", metavar="DIGEST", help="only runs of this agent configuration")
    parser.add_argument("--actor", metavar="ID", help="only runs acting for this actor")
    parser.add_argument("--since", metavar="TIME", help="only runs saved at or after (or an age)")
    parser.add_argument("--until", metavar="TIME", help="only runs saved before (or an age)")
    parser.add_argument("--after", metavar="CURSOR", help="the page after this cursor")


def parse_time(text: str) -> datetime:
    """Return the time an operator wrote: ISO 8601, or an age before now (``2d``).

    Args:
        text: The time.

    Raises:
        ConfigurationError: If it is neither.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            return utc_now() - parse_age(text)
        except ConfigurationError:
            raise ConfigurationError(
                f"a time is ISO 8601 (2026-11-30T12:00:00+00:00) or an age (2d), not {text!r}"
            ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def filters(arguments: argparse.Namespace) -> dict[str, Any]:
    """Return the `RunStore.list_runs` keywords of the options `add_filters` added.

    Args:
        arguments: The parsed command line.
    """
    return {
        "agent": arguments.agent,
        "actor": arguments.actor,
        "since": None if arguments.since is None else parse_time(arguments.since),
        "until": None if arguments.until is None else parse_time(arguments.until),
        "after": arguments.after,
    }


def next_page(lines: list[RunSummary], limit: int) -> str | None:
    """Return the line that tells how to print the next page, when this one is full.

    Args:
        lines: The page.
        limit: The page size asked for.
    """
    if not lines or len(lines) < limit:
        return None
    return f"next page: --after '{run_cursor(lines[-1])}'"
