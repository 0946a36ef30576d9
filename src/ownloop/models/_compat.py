"""Compatibility profiles: what an OpenAI-compatible server accepts, as plain data.

Servers that speak "the OpenAI API" differ in the details: some reject ``strict`` tools, ``store``,
``stream_options``, a ``null`` assistant ``content`` or ``max_completion_tokens``; some write tool
calls as JSON or XML inside the text. A `CompatProfile` names those choices so the adapters send
only what a server takes. Profiles are chosen by name (``OWNLOOP_COMPAT`` or the adapters'
``compat`` argument) or built directly. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from ownloop.exceptions import ConfigurationError

__all__ = [
    "PROFILES",
    "CompatProfile",
    "avoidance_hint",
    "rejection_hint",
    "resolve_profile",
]


@dataclass(frozen=True, slots=True)
class CompatProfile:
    """The request features one family of servers accepts, and the reply quirks to expect.

    Attributes:
        name: The profile's name, shown in error hints and in ``repr`` of the adapters.
        strict_tools: Send ``strict: true`` on function tools whose schema is strict.
        store: Send ``store: false`` (and ask for encrypted reasoning) on the Responses API.
        stream_usage: Send ``stream_options: {"include_usage": true}`` when streaming chat.
        null_assistant_content: Send ``content: null`` on an assistant turn that only calls
            tools; when ``False`` an empty string is sent instead.
        max_tokens_field: The chat field that carries ``ModelSettings.max_output_tokens``.
        system_role: The role system messages are sent with.
        parallel_tool_calls: Send ``parallel_tool_calls`` when the settings set it.
        stop_sequences: Send ``stop`` sequences (the text ReAct adapter asks for one).
        text_tool_calls: Recognise tool calls written as JSON or XML inside the reply text
            (Qwen, Ollama and vLLM set-ups whose server-side tool parser is missing).
        replay_vendor_fields: Keep the vendor fields a server needs back within a tool loop
            (DeepSeek ``reasoning_content``, Gemini ``extra_content``) and send them again.
        explicit_tool_choice: The server leaves the tools out of the prompt unless
            ``tool_choice`` is sent (llama-cpp-python's function-calling handler): send
            ``auto`` whenever tools are offered and the settings choose nothing.
        required_tool_choice: The server accepts ``tool_choice: "required"``; when ``False``
            ``auto`` is sent instead.
        fold_tool_results: The server's chat template drops ``tool`` messages: when the
            conversation ends with tool results, send them (and the calls) as one user turn of
            facts, without tools, so the model answers from them. The cost: the model cannot
            call a second tool after the first results.
        stream_with_tools: The server can stream a reply while tools are offered; when
            ``False`` such a request is sent whole and its text replayed to stream listeners.
        response_format: How the server constrains a typed answer (``Agent(output_type=...)``):
            ``json_schema`` (OpenAI's structured output), ``json_object`` (a ``schema`` beside
            ``type: json_object``, as llama-cpp-python takes it), or ``none`` (neither: typed
            answers use a final-result tool unless ``output_mode`` says otherwise).
    """

    name: str
    strict_tools: bool = True
    store: bool = True
    stream_usage: bool = True
    null_assistant_content: bool = True
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    system_role: Literal["system", "developer"] = "system"
    parallel_tool_calls: bool = True
    stop_sequences: bool = True
    text_tool_calls: bool = False
    replay_vendor_fields: bool = False
    explicit_tool_choice: bool = False
    required_tool_choice: bool = True
    fold_tool_results: bool = False
    stream_with_tools: bool = True
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"

    def __repr__(self) -> str:
        return f"CompatProfile({self.name!r})"


_OPENAI = CompatProfile("openai")
_COMPATIBLE = CompatProfile(
    "compatible",
    strict_tools=False,
    store=False,
    stream_usage=False,
    null_assistant_content=False,
    max_tokens_field="max_tokens",
    parallel_tool_calls=False,
    response_format="none",
)

PROFILES: dict[str, CompatProfile] = {
    "openai": _OPENAI,
    "compatible": _COMPATIBLE,
    "ollama": dataclasses.replace(
        _COMPATIBLE, name="ollama", text_tool_calls=True, response_format="json_schema"
    ),
    "vllm": dataclasses.replace(
        _COMPATIBLE, name="vllm", text_tool_calls=True, response_format="json_schema"
    ),
    "deepseek": dataclasses.replace(_COMPATIBLE, name="deepseek", replay_vendor_fields=True),
    "gemini": dataclasses.replace(
        _COMPATIBLE, name="gemini", replay_vendor_fields=True, response_format="json_schema"
    ),
    "llamacpp": dataclasses.replace(
        _COMPATIBLE,
        name="llamacpp",
        explicit_tool_choice=True,
        required_tool_choice=False,
        fold_tool_results=True,
        stream_with_tools=False,
        response_format="json_object",
    ),
}
"""The named profiles: ``openai`` (the default) sends everything OpenAI documents; ``compatible``
sends only what nearly every OpenAI-compatible server accepts; the others add one family's needs
(``llamacpp``: llama-cpp-python's server with ``--chat_format chatml-function-calling``)."""


def resolve_profile(profile: str | CompatProfile | None) -> CompatProfile:
    """Return the profile for a name, a profile, or ``None`` (the ``openai`` profile).

    Args:
        profile: A profile name (case-insensitive), a `CompatProfile`, or ``None``.

    Returns:
        The profile.

    Raises:
        ConfigurationError: If the name is not a known profile.
    """
    if isinstance(profile, CompatProfile):
        return profile
    if profile is None or not profile.strip():
        return _OPENAI
    found = PROFILES.get(profile.strip().lower())
    if found is None:
        raise ConfigurationError(
            f"unknown compatibility profile {profile!r}; choose one of {', '.join(PROFILES)} "
            "(OWNLOOP_COMPAT or the adapter's compat argument)"
        )
    return found


# Each rule: what the server objected to (a pattern over the parameter path), the profile field
# that decides whether ownloop sends it, and the value of that field that avoids it.
_AVOIDABLE: tuple[tuple[re.Pattern[str], str, object], ...] = (
    (re.compile(r"(^|\.)strict$"), "strict_tools", False),
    (re.compile(r"^store$"), "store", False),
    (re.compile(r"^stream_options"), "stream_usage", False),
    (re.compile(r"^max_completion_tokens$"), "max_tokens_field", "max_tokens"),
    (re.compile(r"^max_tokens$"), "max_tokens_field", "max_completion_tokens"),
    (re.compile(r"^parallel_tool_calls$"), "parallel_tool_calls", False),
    (re.compile(r"^stop$"), "stop_sequences", False),
    (re.compile(r"^messages\[\d+\]\.content$"), "null_assistant_content", False),
    (re.compile(r"^(messages|input)\[\d+\]\.role$"), "system_role", "system"),
)
_OTHER_HINTS = {
    "response_format": "the server does not take a JSON-schema response_format: pass "
    "output_mode='tool' (or 'prompted') to the Agent, or use a profile whose response_format "
    "is 'none'",
    "temperature": "leave ModelSettings.temperature unset for this model",
    "max_output_tokens": "leave ModelSettings.max_output_tokens unset for this model",
    "include": "the model returns no encrypted reasoning: pass reasoning=False to "
    "OpenAIResponsesModel",
}


def avoidance_hint(parameter: str | None, current: CompatProfile) -> str | None:
    """Explain how to stop sending a parameter a server rejected.

    Args:
        parameter: The parameter path the server named (for example ``max_tokens``).
        current: The profile the request was sent with.

    Returns:
        A sentence naming the profile (or setting) that avoids the parameter, or ``None`` when
        no choice of ownloop's avoids it.
    """
    if not parameter:
        return None
    for pattern, field, value in _AVOIDABLE:
        if not pattern.search(parameter):
            continue
        names = [name for name, p in PROFILES.items() if getattr(p, field) == value]
        if not names:
            return None
        if getattr(current, field) == value:
            return f"the {current.name!r} profile already avoids {field}; the server needs more"
        return (
            f"the {names[0]!r} compatibility profile does not send it: set OWNLOOP_COMPAT="
            f"{names[0]} or pass compat={names[0]!r} (the {current.name!r} profile sends it)"
        )
    return _OTHER_HINTS.get(parameter)


def rejection_hint(current: CompatProfile) -> str:
    """Explain what to try when a server rejected the request's shape without naming a parameter.

    Args:
        current: The profile the request was sent with.

    Returns:
        A sentence suggesting the profiles that send less.
    """
    if current.name == "llamacpp":
        return "the 'llamacpp' profile was in use: the server needs something it does not cover"
    return (
        f"the server rejected the request's shape (the {current.name!r} profile was used): for "
        "llama-cpp-python set OWNLOOP_COMPAT=llamacpp, for other servers OWNLOOP_COMPAT=compatible"
    )
