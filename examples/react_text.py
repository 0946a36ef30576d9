"""A ReAct loop in plain text, for models without tool calling.

The seed's "text ReAct", on ownloop: `ReActTextModel` shows the model the tools in its prompt and
reads ``Thought`` / ``Action`` / ``Action Input`` or ``Final Answer`` from its reply text; a parsed
action is an ordinary tool call, validated against the tool's strict schema like a native one, and
a reply in the wrong format is sent back to be rewritten (bounded). Offline, the program starts a
stand-in chat server on 127.0.0.1 that writes ReAct text; with ``OPENAI_BASE_URL`` (and
``OPENAI_MODEL``) set, it talks to that server instead — any chat-completions endpoint::

    python examples/react_text.py
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ownloop import Agent, Limits, RunResult, ToolRegistry
from ownloop.models import ReActTextModel
from ownloop.tools import calculate

DOCUMENTS = {
    "ownloop": "ownloop is a typed Python SDK for bounded, auditable agent loops.",
    "react": "ReAct interleaves reasoning and acting: a thought, an action, an observation.",
}
QUESTION = "What is ReAct, and what is 17 * 23?"


def build_registry() -> ToolRegistry:
    """Two reads: a keyword search and ownloop's arithmetic."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search(keyword: str) -> str:
        """Search the notes for a keyword.

        Args:
            keyword: One word, such as react.
        """
        return DOCUMENTS.get(keyword.lower(), f"nothing found for {keyword}")

    registry.add(calculate, effect="read")
    return registry


def _stand_in_reply(messages: list[dict[str, Any]]) -> str:
    """What the stand-in model writes next, from the observations in the transcript."""
    transcript = "\n".join(
        str(message.get("content") or "") for message in messages if message["role"] != "system"
    )
    observations = re.findall(r"Observation: (.*)", transcript)
    if not observations:
        return (
            'Thought: I should look ReAct up.\nAction: search\nAction Input: {"keyword": "react"}'
        )
    if len(observations) == 1:
        return (
            "Thought: Now the arithmetic.\nAction: calculate\n"
            'Action Input: {"expression": "17 * 23"}'
        )
    return (
        f"Thought: I know both.\nFinal Answer: {observations[0].strip()} "
        f"And 17 * 23 = {observations[1].strip()}."
    )


class _StandIn(BaseHTTPRequestHandler):
    """A chat-completions endpoint whose replies are ReAct text."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = _stand_in_reply(body["messages"])
        reply = {
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "stand-in"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the example's output to what the agent does."""


@contextmanager
def stand_in_server() -> Iterator[str]:
    """Serve the stand-in on a free loopback port; yield its base URL (with /v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def ask(base_url: str | None = None) -> RunResult:
    """Answer `QUESTION` with the ReAct text adapter against ``base_url`` (or the environment)."""
    if base_url is None:
        model = ReActTextModel.from_env()
    else:
        model = ReActTextModel("stand-in", api_key="not-needed", base_url=base_url)
    return Agent(model, build_registry(), limits=Limits(max_steps=6)).run_sync(QUESTION)


def main() -> None:
    """Run against OPENAI_BASE_URL if set, else against the stand-in server."""
    if os.environ.get("OPENAI_BASE_URL"):
        result = ask()
    else:
        with stand_in_server() as base_url:
            result = ask(base_url)
    print(result)
    print(f"turns: {result.usage.steps}, tool calls: {result.usage.tool_calls}")


if __name__ == "__main__":
    main()
