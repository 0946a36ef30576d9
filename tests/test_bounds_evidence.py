"""Evidence that means what it says: shown by a fact source, cited in a form that is read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ownloop import Actor, Agent, Limits
from ownloop.contracts import CompletionRejected, Evidence, RunResult
from ownloop.exceptions import ConfigurationError, UnknownEffectError
from ownloop.memory import SqliteMemoryStore, register_memory_tools
from ownloop.policy import allow_writes
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call
from ownloop.tools import Confirmed, ToolContext, ToolRegistry
from ownloop.validators import Accept, CompletionValidator, Reject, citations_observed

from .context_kit import markdown_python

ONE_TRY = Limits(max_completion_rejections=0)


def documents(*items: dict[str, Any]) -> ToolRegistry:
    """A registry whose ``search`` returns ``items``."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def search(query: str) -> list[dict[str, Any]]:
        """Search.

        Args:
            query: Keywords.
        """
        return list(items)

    return registry


def answer(
    registry: ToolRegistry,
    text: str,
    validator: CompletionValidator | None = None,
    limits: Limits = ONE_TRY,
    **options: Any,
) -> RunResult:
    """Search once, then answer ``text`` under ``validator`` (``citations_observed()``)."""
    model = ScriptedModel([tool_call("search", query="q"), final(text)])
    check = validator if validator is not None else citations_observed()
    return Agent(model, registry, validators=[check], limits=limits, **options).run_sync("ask")


def rejection(result: RunResult) -> str:
    """The reason of the run's last completion rejection."""
    return [e for e in result.trace if isinstance(e, CompletionRejected)][-1].reason


def test_every_id_of_a_citation_list_is_checked() -> None:
    """``[FAKE-9, FAKE-10]`` after a good ``[R-01]`` is read and rejected."""
    result = answer(documents({"id": "R-01"}), "Per [R-01] and [FAKE-9, FAKE-10].")
    assert result.status == "failed"
    assert "FAKE-9, FAKE-10" in rejection(result)
    good = answer(documents({"id": "R-01"}, {"id": "R-02"}), "Per [R-01; R-02] and [R-02].")
    assert good.status == "completed", good.detail


@pytest.mark.parametrize("cited", ["[ FAKE-9 ]", "[FAKE 9]", "【FAKE-9】", "\uff3bR-01\uff3d"])
def test_a_bracketed_id_that_cannot_be_read_rejects_the_answer(cited: str) -> None:
    """Padded, spaced or full-width bracketed ids are refused, not ignored."""
    result = answer(documents({"id": "R-01"}), f"Per [R-01] and {cited}.")
    assert result.status == "failed"
    assert "cannot be read" in rejection(result)


def test_brackets_that_are_not_citations_are_left_alone() -> None:
    """Markdown links and bracketed prose without digits are not citations."""
    text = "Per [R-01], see [the guide](https://example.test/7) and [as noted above]."
    assert answer(documents({"id": "R-01"}), text).status == "completed"


def test_an_id_cut_from_a_truncated_observation_is_not_evidence() -> None:
    """Only ids in the observation as the model received it count."""
    items = [{"id": f"DOC-{n:03}", "text": "x" * 40} for n in range(60)]
    limits = Limits(max_completion_rejections=0, max_observation_chars=400)
    seen = answer(documents(*items), "Per [DOC-000].", limits=limits)
    assert seen.status == "completed", seen.detail
    cut = answer(documents(*items), "Per [DOC-059].", limits=limits)
    assert cut.status == "failed"
    assert "DOC-059" in rejection(cut)
    assert "DOC-059" not in [item.id for item in seen.evidence]


def test_an_id_the_model_minted_with_remember_is_not_evidence(tmp_path: Any) -> None:
    """Memory is no fact source: citing the id ``remember`` just returned is refused."""
    registry = ToolRegistry()
    store = SqliteMemoryStore(tmp_path / "m.db")
    try:
        register_memory_tools(registry, store)

        def cite_own(request: Any) -> Any:
            if len(request.messages) == 1:
                return tool_call("remember", text="The sky is green.", tags=[])
            minted = json.loads(request.messages[-1].content)["id"]
            return final(f"The sky is green [{minted}].")

        agent = Agent(
            FunctionModel(cite_own),
            registry,
            validators=[citations_observed()],
            policy=allow_writes("remember"),
            limits=ONE_TRY,
        )
        result = agent.run_sync("remember", actor=Actor(id="alice"))
    finally:
        store.close()
    assert result.status == "failed"
    assert result.evidence == ()
    assert "memory tools are not fact sources" in rejection(result)


def test_a_write_confirmed_by_its_lookup_counts_like_a_direct_one() -> None:
    """A receipt confirmed through reconcile is evidence, as if the write had answered."""
    registry = ToolRegistry()

    def lookup(arguments: dict[str, Any], context: ToolContext) -> Confirmed:
        return Confirmed({"id": "TX-77", "status": "booked"})

    @registry.tool(effect="write", reconcile=lookup)
    def book(slot: str) -> dict[str, str]:
        """Book a slot.

        Args:
            slot: The slot.
        """
        raise UnknownEffectError("timed out after sending")

    model = ScriptedModel([tool_call("book", slot="9am"), final("Booked [TX-77].")])
    agent = Agent(
        model,
        registry,
        validators=[citations_observed()],
        policy=allow_writes("book"),
        limits=ONE_TRY,
    )
    result = agent.run_sync("book")
    assert result.status == "completed", result.detail
    assert [item.id for item in result.evidence] == ["TX-77"]


@pytest.mark.parametrize("field", ["document_id", "doc_id", "url", "source"])
def test_the_default_rule_reads_the_common_id_fields(field: str) -> None:
    """A tool returning ``{"document_id": "R-02"}`` (or doc_id/url/source) is evidence."""
    result = answer(documents({field: "R-02", "title": "t"}), "Per [R-02].")
    assert result.status == "completed", result.detail


def test_the_evidence_rule_is_configurable_by_fields_or_an_extractor() -> None:
    """``fields=`` and ``extract=`` decide what identifies an item; rejections say the rule."""
    registry = documents({"ref": "Q-1"}, {"id": "Z-9"})
    by_field = answer(registry, "Per [Q-1].", citations_observed(fields=("ref",)))
    assert by_field.status == "completed", by_field.detail
    refused = answer(registry, "Per [Z-9].", citations_observed(fields=("ref",)))
    assert "observed evidence: Q-1" in rejection(refused)
    assert "among ref" in rejection(refused)

    def refs(data: Any) -> list[str]:
        return [item["ref"] for item in data if "ref" in item]

    extracted = answer(registry, "Per [Q-1].", citations_observed(extract=refs))
    assert extracted.status == "completed", extracted.detail
    combined = citations_observed(extract=refs) & CompletionValidator(
        lambda output, evidence: Accept(), "anything"
    )
    assert answer(registry, "Per [Q-1].", combined).status == "completed"


def test_a_default_rejection_says_what_was_observed_and_how_evidence_is_made() -> None:
    """The message names the observed ids and the fields that make a tool output evidence."""
    result = answer(documents({"id": "R-01"}), "Per [R-99].")
    reason = rejection(result)
    assert "observed evidence: R-01" in reason
    assert "id, document_id, doc_id, url, source" in reason


def test_evidence_rule_options_are_checked() -> None:
    """Fields and extract together, or no field at all, are configuration errors."""
    with pytest.raises(ConfigurationError):
        citations_observed(fields=("id",), extract=lambda data: [])
    with pytest.raises(ConfigurationError):
        citations_observed(fields=())


def test_a_custom_pattern_reads_lists_too() -> None:
    """With a custom pattern, a captured comma list is split and every id checked."""
    check = citations_observed(r"\(see ([^)]+)\)")
    evidence = [Evidence(id="A-1", tool="t", call_ids=("c",))]
    assert isinstance(check("x (see A-1)", evidence), Accept)
    assert isinstance(check("x (see A-1, B-2)", evidence), Reject)


def test_the_evidence_example_in_the_tools_page_runs_as_written() -> None:
    """docs/tools.md's evidence example: a ``document_id`` result is cited and accepted."""
    namespace: dict[str, Any] = {"__name__": "docs"}
    exec(markdown_python("docs/tools.md")[-1], namespace)
    assert [item.id for item in namespace["result"].evidence] == ["P-7"]


def test_an_extractor_may_return_pairs_and_its_invalid_ids_are_ignored() -> None:
    """(id, title) pairs keep their title; ids that are not 1-128 character strings are skipped."""

    def pairs(data: Any) -> list[Any]:
        return [("K-1", "A title"), ("", "empty"), "x" * 200, "K-2"]

    registry = documents({"k": "K-1"}, {"k": "K-2"})
    result = answer(registry, "Per [K-1] and [K-2].", citations_observed(extract=pairs))
    assert result.status == "completed", result.detail
    assert [(item.id, item.title) for item in result.evidence] == [
        ("K-1", "A title"),
        ("K-2", None),
    ]
    refused = answer(registry, "Per [K-3].", citations_observed(extract=pairs))
    assert "the evidence extractor pairs" in rejection(refused)


def test_full_width_brackets_without_an_id_are_prose() -> None:
    """A full-width bracket around words (no digit, no hyphen) is not a citation."""
    text = "Per [R-01] \u3010note\u3011."
    assert answer(documents({"id": "R-01"}), text).status == "completed"
