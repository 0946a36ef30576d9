"""The offline research demo: a synthetic corpus, two read tools and a deterministic model.

The model works only through the model port: it reads the observations in the conversation,
searches, reads the best hits and answers citing what it read (``[R-02]``). A citation validator
checks that every cited id was really returned by a tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from ownloop.agent import Agent
from ownloop.contracts import Limits, ModelRequest, ModelResponse, ToolCall, ToolMessage
from ownloop.models import AgentModel
from ownloop.tools import ToolRegistry
from ownloop.tracing import TraceSink
from ownloop.validators import citations_observed

__all__ = ["CORPUS", "DEFAULT_QUESTION", "ResearchModel", "build_agent", "build_registry"]

DEFAULT_QUESTION = "How should a safe AI agent be evaluated?"

CORPUS: dict[str, dict[str, str]] = {
    "R-01": {
        "title": "Bounded loops",
        "text": "An agent loop needs explicit budgets for steps, tool calls, tokens and wall-clock "
        "time, so that a confused model stops instead of spending without end.",
    },
    "R-02": {
        "title": "Evaluation before autonomy",
        "text": "A safe agent should be evaluated on held-out tasks with traced runs before it "
        "is given more autonomy; evaluation must check outcomes, not the model's claims.",
    },
    "R-03": {
        "title": "Approvals bound to arguments",
        "text": "Human approval of a risky action must be bound to the exact tool, arguments "
        "and state it was given for, and consumed by the call it admits.",
    },
    "R-04": {
        "title": "Unknown effects",
        "text": "A write whose outcome is unknown may have happened; it must be reconciled by an "
        "authoritative lookup before it is retried.",
    },
    "R-05": {
        "title": "Evidence and citations",
        "text": "Answers should cite evidence the agent actually observed; a safe agent is "
        "evaluated on whether its citations are real.",
    },
    "R-06": {
        "title": "Redacted traces",
        "text": "Traces explain every transition of a run while keeping secrets out of logs.",
    },
}
"""The synthetic corpus: document id -> title and text."""

_WORD = re.compile(r"[a-z]+")
_STOPWORDS = frozenset({"a", "an", "the", "be", "should", "how", "what", "is", "of", "to", "and"})


def _terms(text: str) -> set[str]:
    return {word for word in _WORD.findall(text.lower()) if word not in _STOPWORDS}


def build_registry() -> ToolRegistry:
    """Return a registry with the demo's two read tools.

    Returns:
        ``search_documents`` and ``read_document`` over `CORPUS`.
    """
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search_documents(
        query: str, max_results: Annotated[int, Field(ge=1, le=5)] = 3
    ) -> list[dict[str, str]]:
        """Search the corpus for documents matching the query.

        Args:
            query: Keywords to look for.
            max_results: How many hits to return (1-5).
        """
        wanted = _terms(query)
        scored = []
        for doc_id, doc in CORPUS.items():
            score = len(wanted & _terms(f"{doc['title']} {doc['text']}"))
            if score:
                scored.append((-score, doc_id))
        return [
            {"id": doc_id, "title": CORPUS[doc_id]["title"]}
            for _, doc_id in sorted(scored)[:max_results]
        ]

    @registry.tool(effect="read")
    def read_document(document_id: Annotated[str, Field(max_length=16)]) -> dict[str, str]:
        """Read one document of the corpus in full.

        Args:
            document_id: The document's id, as returned by search_documents (e.g. R-02).
        """
        doc = CORPUS.get(document_id)
        if doc is None:
            return {"error": f"no document {document_id!r}"}
        return {"id": document_id, **doc}

    return registry


class ResearchModel:
    """A deterministic model for the demo: search, read the top hits, answer with citations.

    Args:
        reads: How many search hits to read before answering.
    """

    model_name = "ownloop-research-demo"

    def __init__(self, reads: int = 2) -> None:
        self.reads = reads

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Propose the next action from the observations so far.

        Args:
            request: The conversation so far.

        Returns:
            A search, reads of the best hits, or the final answer.
        """
        observations = [m for m in request.messages if isinstance(m, ToolMessage)]
        question = next((m.content for m in request.messages if m.role == "user"), DEFAULT_QUESTION)
        if not observations:
            call = ToolCall(
                id="call-search-1",
                name="search_documents",
                arguments=json.dumps({"query": question, "max_results": 3}),
            )
            return ModelResponse(tool_calls=(call,), model=self.model_name)
        hits = _records(observations[0].content)
        documents = [record for m in observations[1:] for record in _records(m.content)]
        if not hits:
            return ModelResponse(stop_reason="INSUFFICIENT_EVIDENCE", model=self.model_name)
        if not documents:
            calls = tuple(
                ToolCall(
                    id=f"call-read-{index}",
                    name="read_document",
                    arguments=json.dumps({"document_id": hit.get("id")}),
                )
                for index, hit in enumerate(hits[: self.reads], start=1)
            )
            return ModelResponse(tool_calls=calls, model=self.model_name)
        sentences = [f"{doc.get('text')} [{doc['id']}]" for doc in documents if "id" in doc]
        return ModelResponse(final_output=" ".join(sentences), model=self.model_name)


def _records(content: str) -> list[dict[str, Any]]:
    """Return the JSON objects in an observation (one object, or a list of them)."""
    try:
        value = json.loads(content)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def build_agent(
    model: AgentModel | None = None,
    *,
    limits: Limits | None = None,
    trace_sinks: Sequence[TraceSink] = (),
) -> Agent:
    """Return the demo agent: the research tools, a citation check and small budgets.

    Args:
        model: The model port to use; the deterministic `ResearchModel` by default.
        limits: The budgets; ``max_steps=6`` and friends by default.
        trace_sinks: Where the trace goes besides the result (for example a `JsonlSink`).

    Returns:
        The agent.
    """
    return Agent(
        model if model is not None else ResearchModel(),
        build_registry(),
        limits=limits or Limits(max_steps=6, max_tool_calls=6, max_tool_attempts=8),
        validators=[citations_observed(min_citations=1)],
        instructions="Answer the question using only the corpus tools. Cite every document "
        "you rely on as [ID]. If the corpus has nothing relevant, stop.",
        trace_sinks=trace_sinks,
    )
