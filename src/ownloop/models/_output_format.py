"""How a request asks for a typed answer on the wire, per API and compatibility profile.

Chat Completions takes ``response_format: {type: json_schema, json_schema: {name, schema,
strict}}`` (OpenAI, vLLM, Ollama, Gemini), or ``{type: json_object, schema}`` on servers that
constrain output by a schema that way (llama-cpp-python); Responses takes ``text.format``. A
request asks for this only in ``native`` mode: in ``tool`` mode the answer is a final-result tool
and in ``prompted`` mode it is text the loop reads. Pure mapping, no I/O.
"""

from __future__ import annotations

from typing import Any

from ownloop.contracts import ModelRequest, OutputMode
from ownloop.models._compat import CompatProfile

__all__ = ["chat_response_format", "preferred_output_mode", "responses_text_format"]


def preferred_output_mode(profile: CompatProfile) -> OutputMode:
    """The strongest way a server of this profile gives a typed answer.

    Args:
        profile: The server's compatibility profile.

    Returns:
        ``native`` when it constrains the answer by a JSON schema, else ``tool``.
    """
    return "tool" if profile.response_format == "none" else "native"


def chat_response_format(request: ModelRequest, profile: CompatProfile) -> dict[str, Any] | None:
    """Return the Chat Completions ``response_format`` for a request, or ``None`` to send none.

    Args:
        request: ownloop's request.
        profile: What the server accepts.

    Returns:
        The ``response_format`` value, when the request asks for a typed answer natively.
    """
    output = request.output
    if output is None or output.mode != "native" or profile.response_format == "none":
        return None
    if profile.response_format == "json_object":
        return {"type": "json_object", "schema": output.json_schema}
    inner: dict[str, Any] = {"name": output.name, "schema": output.json_schema}
    if profile.strict_tools:
        inner["strict"] = True
    return {"type": "json_schema", "json_schema": inner}


def responses_text_format(request: ModelRequest, profile: CompatProfile) -> dict[str, Any] | None:
    """Return the Responses API ``text`` parameter for a request, or ``None`` to send none.

    Args:
        request: ownloop's request.
        profile: What the server accepts.

    Returns:
        ``{"format": {"type": "json_schema", ...}}``, when the request asks for a typed answer
        natively.
    """
    output = request.output
    if output is None or output.mode != "native":
        return None
    text_format: dict[str, Any] = {
        "type": "json_schema",
        "name": output.name,
        "schema": output.json_schema,
        "strict": profile.strict_tools,
    }
    return {"format": text_format}
