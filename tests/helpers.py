"""Shared builders for the loop tests: a small registry whose handlers count their calls."""

from __future__ import annotations

from collections import Counter

from ownloop import ToolCall
from ownloop.contracts import ModelResponse
from ownloop.tools import ToolRegistry

DOCS = {
    "doc-agent-1": "An agent chooses actions using observations.",
    "R-02": "Evaluation should precede increased autonomy.",
}


def research_registry(calls: Counter[str] | None = None) -> ToolRegistry:
    """Return a registry with a search and a read tool that count their executions."""
    counter = calls if calls is not None else Counter()
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search_documents(query: str, max_results: int = 3) -> list[dict[str, str]]:
        """Search the documents.

        Args:
            query: Keywords.
            max_results: How many hits.
        """
        counter["search_documents"] += 1
        hits = [
            {"id": key, "title": key} for key, text in DOCS.items() if query.lower() in text.lower()
        ]
        return hits[:max_results]

    @registry.tool(effect="read")
    def read_document(document_id: str) -> dict[str, str]:
        """Read one document.

        Args:
            document_id: The id.
        """
        counter["read_document"] += 1
        return {"id": document_id, "text": DOCS.get(document_id, "missing")}

    return registry


def calls(*pairs: tuple[str, dict[str, object]]) -> ModelResponse:
    """Return a response proposing the given (name, arguments) calls, with ids call-1, call-2..."""
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(id=f"call-{index}", name=name, arguments=dict(arguments))
            for index, (name, arguments) in enumerate(pairs, start=1)
        )
    )
