"""Short-term and long-term memory are two things: a thread, and the memory store.

The seed tutorial's memory lesson, on ownloop. *Short-term* memory decides whether this turn
follows on from the last: it is the conversation, kept as a stored thread
(``agent.run(task, thread_id=...)``) so a follow-up sees the earlier turns and may cite what they
observed. *Long-term* memory decides whether the agent still knows you in another conversation:
facts written with the ``remember`` tool and found again with ``recall`` (``ownloop.memory``),
scoped to the trusted actor. Mixing the two into one list is the classic design accident.

Offline (no key, no server), a stand-in model plays the assistant's part::

    python examples/memory_lesson.py
    ownloop runs list --thread city-chat --db memory_lesson.db

Files go to $OWNLOOP_EXAMPLE_DIR (the current folder by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ownloop import Actor, Agent, RunResult, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse, ToolMessage, UserMessage
from ownloop.memory import SqliteMemoryStore, register_memory_tools
from ownloop.policy import allow_writes
from ownloop.store import SqliteRunStore
from ownloop.testing import FunctionModel, final, tool_call
from ownloop.validators import citations_observed

POPULATION = {"Hangzhou": 1252, "Nanjing": 954}
"""Residents, in 10,000 people."""
USER = Actor(id="user-1", tenant="demo")


def build_registry(memory: SqliteMemoryStore) -> ToolRegistry:
    """A fact source (city populations) and the long-term memory tools."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def city_population(city: str) -> dict[str, Any]:
        """Look up a city's residents, in 10,000 people.

        Args:
            city: The city.
        """
        return {"id": f"pop-{city}", "city": city, "residents": POPULATION[city]}

    register_memory_tools(registry, memory)
    return registry


def _last_user(request: ModelRequest) -> str:
    return next(m.content for m in reversed(request.messages) if isinstance(m, UserMessage))


def _observed(request: ModelRequest) -> dict[str, int]:
    """Every population an observation of this conversation showed, by city."""
    found = {}
    for message in request.messages:
        if isinstance(message, ToolMessage):
            for city, residents in re.findall(r'"city":"(\w+)","residents":(\d+)', message.content):
                found[city] = int(residents)
    return found


def assistant(request: ModelRequest) -> ModelResponse:
    """Stands in for a model: it knows only what the request carries."""
    asked, seen = _last_user(request), _observed(request)
    last = request.messages[-1]
    if "What do I follow" in asked:
        if not isinstance(last, ToolMessage):
            return tool_call("recall", query="follows", k=3)
        text = re.search(r'"text":"([^"]+)"', last.content)
        return final(f"From long-term memory: {text.group(1) if text else 'nothing'}")
    city = next(name for name in POPULATION if name in asked)
    if city not in seen:
        return tool_call("city_population", f"call-{city}", city=city)
    if "Hangzhou" in asked and isinstance(last, ToolMessage) and "remember" not in last.name:
        return tool_call(
            "remember", text="This user follows Yangtze River Delta city data.", tags=["preference"]
        )
    if city == "Hangzhou":
        return final(f"Hangzhou has {seen['Hangzhou']} x 10,000 residents [pop-Hangzhou].")
    fewer = seen["Hangzhou"] - seen[city]  # Hangzhou's number comes from the earlier turn
    return final(
        f"{city} has {seen[city]} x 10,000 residents, {fewer} x 10,000 fewer than Hangzhou "
        f"[pop-{city}, pop-Hangzhou]."
    )


def main() -> None:
    """Two turns in one thread, then a new conversation that only long-term memory connects."""
    folder = Path(os.environ.get("OWNLOOP_EXAMPLE_DIR", "."))
    store = SqliteRunStore(folder / "memory_lesson.db")
    memory = SqliteMemoryStore(folder / "memory_lesson_memories.db")
    agent = Agent(
        FunctionModel(assistant, model_name="stand-in"),
        build_registry(memory),
        store=store,
        policy=allow_writes("remember"),
        validators=[citations_observed()],
    )
    turns: list[RunResult] = []
    for task in ("How many people live in Hangzhou?", "And Nanjing, compared with it?"):
        turns.append(agent.run_sync(task, thread_id="city-chat", actor=USER))
        print(f"turn {len(turns)} (thread city-chat): {turns[-1].output}")
    earlier = [item.id for item in turns[1].evidence if item.from_run == turns[0].run_id]
    conversation = turns[1].conversation
    assert conversation is not None
    print(
        f"  short-term: turn 2 started from {conversation.earlier_messages} earlier messages "
        f"and cited earlier evidence {', '.join(earlier)}"
    )
    other = agent.run_sync("What do I follow?", thread_id="other-chat", actor=USER)
    print(f"new thread (other-chat): {other.output}")
    print("  long-term: the new conversation started from no earlier turns; memory connected it")
    print("see the thread: ownloop runs list --thread city-chat --db memory_lesson.db")


if __name__ == "__main__":
    main()
