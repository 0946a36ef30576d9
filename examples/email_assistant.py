"""An email assistant whose reads run freely and whose reply waits for a person.

The seed's "agent with human confirmation", on ownloop: ``list_mails`` and ``read_mail`` are reads;
``send_reply`` is a write declared ``requires_approval=True``, so the run *pauses* before it, is
stored in a SQLite file, and continues in another process once someone approves — and the reply
is sent once, however many times the paused run is resumed. See docs/tutorial.md.

Offline (no key, no server), a stand-in model plays the assistant's part::

    python examples/email_assistant.py                 # pauses before the reply
    ownloop runs show email-1 --db email.db            # what it waits for
    ownloop approve email-1 REQUEST_ID --db email.db   # or: ownloop ui --db email.db
    ownloop resume email-1 --agent examples.email_assistant:agent --db email.db
    ownloop trace show email.jsonl

With ``OPENAI_BASE_URL`` (and ``OPENAI_MODEL``, ``OPENAI_API_KEY`` if the server needs one) set,
the same program asks that server instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ownloop import Agent, Limits, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage
from ownloop.models import OpenAIChatModel
from ownloop.store import SqliteRunStore
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.tools import ToolContext
from ownloop.tracing import JsonlSink

INBOX = [
    {"id": 1, "from": "Client A", "subject": "The quote has an error", "urgent": True},
    {
        "id": 2,
        "from": "Colleague B",
        "subject": "Weekly meeting moved to Thursday",
        "urgent": False,
    },
]
INSTRUCTIONS = (
    "You are an email assistant. List the inbox first, find the most urgent mail, read it, then "
    "reply. A reply is a write that a person approves; if it is denied, show the draft instead."
)
TASK = "Check the inbox and answer the most urgent mail: 'Received, I will handle it today.'"


def _folder() -> Path:
    """Where the store, the trace and the outbox live: $EMAIL_DIR, else the current folder."""
    return Path(os.environ.get("EMAIL_DIR", "."))


def build_registry(outbox: Path) -> ToolRegistry:
    """The assistant's tools: two reads, and the reply, a write that needs an approval."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def list_mails() -> list[dict[str, object]]:
        """List the inbox: every mail's id, sender, subject and urgency."""
        return INBOX

    @registry.tool(effect="read")
    def read_mail(mail_id: int) -> str:
        """Read one mail.

        Args:
            mail_id: The mail's id.
        """
        for mail in INBOX:
            if mail["id"] == mail_id:
                return f"From {mail['from']}: {mail['subject']}"
        return f"There is no mail {mail_id}."

    @registry.tool(effect="write", requires_approval=True)
    def send_reply(mail_id: int, content: str, ctx: ToolContext) -> str:
        """Send a reply to a mail: visible to its sender, so a person approves it first.

        Args:
            mail_id: The mail to answer.
            content: The reply's text.
            ctx: Injected by the runtime (the call's idempotency key).
        """
        line = {"mail_id": mail_id, "content": content, "key": ctx.idempotency_key}
        with outbox.open("a", encoding="utf-8") as sent:
            sent.write(json.dumps(line) + "\n")
        return f"Replied to mail {mail_id}."

    return registry


def stand_in(request: ModelRequest) -> ModelResponse:
    """The offline model: list, read the urgent mail, reply, then report what it did."""
    seen = {message.name for message in request.messages if isinstance(message, ToolMessage)}
    if "list_mails" not in seen:
        return tool_call("list_mails")
    if "read_mail" not in seen:
        return tool_call("read_mail", mail_id=1)
    if "send_reply" not in seen:
        return tool_call("send_reply", mail_id=1, content="Received, I will handle it today.")
    return final("Replied to Client A's urgent mail about the quote.")


def model() -> OpenAIChatModel | FunctionModel:
    """The server in OPENAI_BASE_URL (or OpenAI with OPENAI_API_KEY), else the stand-in."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIChatModel.from_env()
    return FunctionModel(stand_in, model_name="email-stand-in")


def agent() -> Agent:
    """The factory ``ownloop resume --agent examples.email_assistant:agent`` loads."""
    folder = _folder()
    return Agent(
        model(),
        build_registry(folder / "outbox.jsonl"),
        instructions=INSTRUCTIONS,
        limits=Limits(max_steps=8),
        store=SqliteRunStore(folder / "email.db"),
        trace_sinks=[JsonlSink(folder / "email.jsonl")],
    )


def main() -> int:
    """Start the run (it pauses before the reply) and say what to do next."""
    assistant = agent()
    result = assistant.run_sync(TASK, run_id=os.environ.get("EMAIL_RUN_ID", "email-1"))
    print(result)
    for request in result.approval_requests:
        print()
        print("next:")
        print(f"  ownloop runs show {result.run_id} --db email.db")
        print(f"  ownloop approve {result.run_id} {request.id} --db email.db")
        print(
            f"  ownloop resume {result.run_id} --agent examples.email_assistant:agent --db email.db"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
