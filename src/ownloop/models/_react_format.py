"""The text ReAct format: the prompt that teaches it, the transcript, and a strict parser.

A model without tool calling is asked to answer one step at a time as ``Thought`` / ``Action`` /
``Action Input`` (a JSON object) or ``Thought`` / ``Final Answer``; tool results come back as
``Observation`` lines. The parser accepts exactly one well-formed step: the first ``Action`` or
``Final Answer`` line decides (what follows an action was written without seeing its result),
and anything else is a format problem the model is asked to fix. Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ownloop.contracts import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from ownloop.models._normalize import arguments_text

__all__ = [
    "REPLY_ITEM",
    "STOP_SEQUENCE",
    "FormatProblem",
    "ReactAction",
    "ReactFinal",
    "format_feedback",
    "parse_react",
    "react_messages",
]

STOP_SEQUENCE = "Observation:"
"""Where the model must stop writing: the runtime, not the model, supplies observations."""

REPLY_ITEM = "react.reply"
"""The provider item type that keeps a reply verbatim, so the transcript replays it as written."""

_ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_INPUT = re.compile(r"^[ \t]*Action[ \t]+Input[ \t]*:[ \t]*", re.MULTILINE)
_FINAL = re.compile(r"^[ \t]*Final[ \t]+Answer[ \t]*:[ \t]*", re.MULTILINE)
_END_OF_INPUT = re.compile(r"^[ \t]*(?:Observation|Thought|Action|Final[ \t]+Answer)[ \t]*:", re.M)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_INSTRUCTIONS = """You can use these tools:

{tools}

Work one step per reply, in exactly this format:

Thought: what you need to do next and why
Action: the tool to use, one of [{names}]
Action Input: the tool's arguments as one JSON object

After each action the runtime replies with "Observation: <the tool's result>". Never write an
Observation yourself. When you have enough to answer, reply instead:

Thought: why you can answer now
Final Answer: your answer"""


@dataclass(frozen=True, slots=True)
class ReactAction:
    """A parsed action: the tool's name and its raw arguments text."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ReactFinal:
    """A parsed final answer."""

    answer: str


@dataclass(frozen=True, slots=True)
class FormatProblem:
    """Why a reply could not be parsed, in words the model can act on."""

    reason: str


def _describe_tool(spec: ToolSpec) -> str:
    schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
    description = " ".join(spec.description.split()) or "(no description)"
    return f"- {spec.name}: {description}\n  Action Input schema: {schema}"


def _system_prompt(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    rendered = "\n".join(_describe_tool(spec) for spec in tools) or "(no tools are available)"
    names = ", ".join(spec.name for spec in tools)
    parts = [m.content for m in messages if isinstance(m, SystemMessage)]
    parts.append(_INSTRUCTIONS.format(tools=rendered, names=names))
    return "\n\n".join(parts)


def _assistant_text(message: AssistantMessage) -> str:
    for item in message.provider_items:
        if isinstance(item, dict) and item.get("type") == REPLY_ITEM:
            text = item.get("text")
            if isinstance(text, str):
                return text
    steps = [
        f"Action: {call.name}\nAction Input: {arguments_text(call.arguments)}"
        for call in message.tool_calls
    ]
    if not steps and message.content is not None:
        steps.append(f"Final Answer: {message.content}")
    return "\n".join(steps)


def react_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Render the conversation as a ReAct transcript of plain chat messages.

    Args:
        messages: The conversation (system messages are folded into the one prompt).
        tools: The tools offered.

    Returns:
        Chat messages: the prompt, then user turns, the model's replies and observations.
    """
    wire: list[dict[str, Any]] = [{"role": "system", "content": _system_prompt(messages, tools)}]
    for message in messages:
        if isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            wire.append({"role": "assistant", "content": _assistant_text(message)})
        elif isinstance(message, ToolMessage):
            wire.append({"role": "user", "content": f"{STOP_SEQUENCE} {message.content}"})
    return wire


def _action_input(text: str) -> str:
    end = _END_OF_INPUT.search(text)
    raw = (text[: end.start()] if end else text).strip()
    fenced = _FENCE.match(raw)
    return fenced.group(1).strip() if fenced else raw


def parse_react(text: str) -> ReactAction | ReactFinal | FormatProblem:
    """Parse one reply strictly.

    Args:
        text: The model's reply.

    Returns:
        The action or the final answer, whichever line comes first, or the problem found.
    """
    action, final = _ACTION.search(text), _FINAL.search(text)
    if action is not None and (final is None or action.start() < final.start()):
        name = action.group(1).strip().strip("`'\"")
        if not _TOOL_NAME.match(name):
            return FormatProblem(f"the Action line must hold only a tool name, not {name[:80]!r}")
        given = _INPUT.search(text, action.end())
        if given is None:
            return FormatProblem("an Action needs an 'Action Input:' line with a JSON object")
        return ReactAction(name, _action_input(text[given.end() :]) or "{}")
    if final is not None:
        answer = text[final.end() :].strip()
        if answer:
            return ReactFinal(answer)
        return FormatProblem("the Final Answer is empty")
    return FormatProblem("the reply has neither an 'Action:' line nor a 'Final Answer:' line")


def format_feedback(problem: FormatProblem) -> str:
    """Return the observation that asks the model to rewrite its turn in the format."""
    return (
        f"{STOP_SEQUENCE} Your reply did not follow the format: {problem.reason}. Rewrite this "
        "turn in the format: either 'Thought:', 'Action:' and 'Action Input:' (a JSON object), "
        "or 'Thought:' and 'Final Answer:'."
    )
