"""``ownloop run "question"``: the research task against the model the environment names.

The endpoint comes from ``OPENAI_API_KEY``, ``OPENAI_MODEL`` and ``OPENAI_BASE_URL`` (any
OpenAI-compatible server); ``OWNLOOP_API`` picks the wire API and ``OWNLOOP_COMPAT`` the
compatibility profile, and the flags override both. Every reply is capped at
``--max-output-tokens`` (``OWNLOOP_MAX_OUTPUT_TOKENS``, 1024 by default); ``--temperature``
(``OWNLOOP_TEMPERATURE``) sets the sampling temperature. The run uses the offline demo's corpus
tools and citation check, so only the model is real. Output is the demo's summary, or ``--json``;
``--trace FILE`` appends the trace as JSON lines for ``ownloop trace show|diagnose``.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ownloop.cli._demo import add_trace_option, print_summary, trace_sinks
from ownloop.cli._output import say_json
from ownloop.exceptions import ConfigurationError

if TYPE_CHECKING:
    from ownloop.contracts import ModelSettings

__all__ = ["INSTRUCTIONS", "register", "run_research", "run_settings"]

OUTPUT_VARIABLE = "OWNLOOP_MAX_OUTPUT_TOKENS"
TEMPERATURE_VARIABLE = "OWNLOOP_TEMPERATURE"
DEFAULT_OUTPUT_TOKENS = 1024

INSTRUCTIONS = (
    "You answer questions using only a small document corpus. First call search_documents with "
    "a few keywords, then read_document on the most relevant hits, then answer in a few "
    "sentences. Cite every document you rely on as [ID], for example [R-02]. If the corpus has "
    "nothing relevant, say so."
)
"""The system message of a real model's run (real models need the tool order spelled out)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` command.

    Args:
        commands: The ``ownloop`` command's subparsers.
    """
    run = commands.add_parser(
        "run",
        help="research a question with the model in the environment (OPENAI_API_KEY, "
        "OPENAI_MODEL, OPENAI_BASE_URL)",
    )
    run.add_argument(
        "question", nargs="?", default=None, help="what to research (default: the demo's question)"
    )
    run.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    add_trace_option(run)
    run.add_argument("--stream", action="store_true", help="stream the model's replies (SSE)")
    run.add_argument(
        "--api",
        choices=("chat", "responses", "react"),
        default=None,
        help="wire API (default: OWNLOOP_API, else chat)",
    )
    run.add_argument(
        "--compat", default=None, help="compatibility profile (default: OWNLOOP_COMPAT)"
    )
    run.add_argument("--max-steps", type=int, default=8, help="step budget (default 8)")
    run.add_argument(
        "--max-output-tokens",
        type=int,
        default=None,
        help=f"output cap of each reply (default: {OUTPUT_VARIABLE}, else {DEFAULT_OUTPUT_TOKENS})",
    )
    run.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"sampling temperature (default: {TEMPERATURE_VARIABLE}, else the server's)",
    )
    run.add_argument(
        "--deadline", type=float, default=180.0, help="wall-clock budget in seconds (default 180)"
    )
    run.set_defaults(handler=run_research)


def run_settings(max_output_tokens: int | None, temperature: float | None) -> ModelSettings:
    """Return the sampling settings of ``ownloop run``: the flags, else the environment.

    Every reply is capped (a server that generates until its context is full would otherwise
    run into the request timeout); the temperature is the server's unless one is given.

    Args:
        max_output_tokens: ``--max-output-tokens``, or ``None``.
        temperature: ``--temperature``, or ``None``.

    Returns:
        The settings.

    Raises:
        ConfigurationError: If a variable is not a number or is out of range.
    """
    from ownloop.contracts import ModelSettings

    try:
        cap = max_output_tokens or int(os.environ.get(OUTPUT_VARIABLE) or DEFAULT_OUTPUT_TOKENS)
        if temperature is None and os.environ.get(TEMPERATURE_VARIABLE, "").strip():
            temperature = float(os.environ[TEMPERATURE_VARIABLE])
        return ModelSettings(max_output_tokens=cap, temperature=temperature)
    except ValueError as error:
        raise ConfigurationError(
            f"invalid {OUTPUT_VARIABLE} or {TEMPERATURE_VARIABLE}: a positive integer and a "
            f"number from 0 to 2 ({type(error).__name__})"
        ) from None


def run_research(arguments: argparse.Namespace) -> int:
    """Run the research task as the parsed arguments say.

    Args:
        arguments: The parsed command line.

    Returns:
        0 when the run completed, 1 otherwise.

    Raises:
        ConfigurationError: If the environment does not name a usable endpoint (the message
            names the variable to set).
    """
    from ownloop.agent import Agent
    from ownloop.contracts import Limits
    from ownloop.demo.research import DEFAULT_QUESTION, build_registry
    from ownloop.models import from_env
    from ownloop.validators import citations_observed

    model = from_env(api=arguments.api, compat=arguments.compat)
    agent = Agent(
        model,
        build_registry(),
        limits=Limits(
            max_steps=arguments.max_steps,
            max_tool_calls=8,
            max_tool_attempts=10,
            deadline_s=arguments.deadline,
        ),
        validators=[citations_observed(min_citations=1)],
        instructions=INSTRUCTIONS,
        stream=arguments.stream,
        trace_sinks=trace_sinks(arguments),
        settings=run_settings(arguments.max_output_tokens, arguments.temperature),
    )
    result = agent.run_sync(arguments.question or DEFAULT_QUESTION)
    if arguments.json:
        say_json(result.model_dump(mode="json"))
    else:
        print(f"model:       {model!r}")
        print_summary(result)
    return 0 if result.status.value == "completed" else 1
