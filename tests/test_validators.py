"""Completion validators: verdicts, composition and the citation check."""

from __future__ import annotations

import pytest

from ownloop import ConfigurationError, Evidence, Receipt
from ownloop.validators import (
    Accept,
    CompletionContext,
    Reject,
    accept_all,
    as_validator,
    citations_observed,
    reject_all,
    require_current_check,
)

EVIDENCE = (Evidence(id="R-02", tool="read_document", call_ids=("c1",)),)


def test_citations_must_name_observed_evidence() -> None:
    """Cited ids must be in the evidence ledger; unknown ones are named in the rejection."""
    check = citations_observed()
    assert check("Yes [R-02].", EVIDENCE) == Accept()
    verdict = check("Yes [R-02] and [R-99].", EVIDENCE)
    assert isinstance(verdict, Reject)
    assert "R-99" in verdict.reason
    assert verdict.validator.startswith("citations_observed")


def test_minimum_citations_are_required_when_asked() -> None:
    """min_citations rejects an answer citing nothing."""
    assert isinstance(citations_observed(min_citations=1)("No citations.", EVIDENCE), Reject)
    assert citations_observed()("No citations.", EVIDENCE) == Accept()


def test_composition_and_neutral_elements() -> None:
    """& needs both, | needs either; accept_all and reject_all are neutral and reprs read well."""
    cites = citations_observed()
    both = cites & accept_all()
    either = reject_all("never") | cites
    assert both("[R-02]", EVIDENCE) == Accept()
    assert either("[R-02]", EVIDENCE) == Accept()
    assert isinstance((cites & reject_all("no"))("[R-02]", EVIDENCE), Reject)
    combined = (reject_all("a") | reject_all("b"))("x", EVIDENCE)
    assert isinstance(combined, Reject)
    assert combined.reason == "a; b"
    assert repr(both) == "(citations_observed(min_citations=0) & accept_all())"


def test_plain_functions_become_named_validators() -> None:
    """A plain function is wrapped and its name fills the rejection's validator field."""

    def no_shouting(output: str, evidence: object) -> Accept | Reject:
        return Reject("too loud") if output.isupper() else Accept()

    wrapped = as_validator(no_shouting)
    verdict = wrapped("HELLO", EVIDENCE)
    assert verdict == Reject("too loud", "no_shouting")
    assert as_validator(wrapped) is wrapped
    with pytest.raises(ConfigurationError):
        as_validator("not callable")  # type: ignore[arg-type]


def test_invalid_citation_patterns_are_configuration_errors() -> None:
    """A pattern that does not compile or has no group is refused."""
    with pytest.raises(ConfigurationError, match="invalid"):
        citations_observed("[")
    with pytest.raises(ConfigurationError, match="capturing group"):
        citations_observed(r"\[\w+\]")


CHECK = Receipt(call_id="c1", tool="check_config", data={"passed": True}, revision="rev-2")
EXPORT = Receipt(call_id="e1", tool="queue_export", effect="applied", revision="rev-2")


def test_with_a_revision_the_revision_alone_decides_staleness() -> None:
    """A write that left the tracked revision unchanged does not make the check stale."""
    check = require_current_check("check_config")
    same = CompletionContext(receipts=(CHECK, EXPORT), revision="rev-2")
    moved = CompletionContext(receipts=(CHECK, EXPORT), revision="rev-3")
    assert check("Done.", (), same) == Accept()
    verdict = check("Done.", (), moved)
    assert isinstance(verdict, Reject)
    assert "rev-3" in verdict.reason


def test_without_a_revision_a_check_after_the_last_write_is_current() -> None:
    """With no revision tracked, a passing check that follows every write is accepted."""
    check = require_current_check("check_config")
    assert check("Done.", (), CompletionContext(receipts=(EXPORT, CHECK))) == Accept()
    stale = check("Done.", (), CompletionContext(receipts=(CHECK, EXPORT)))
    assert isinstance(stale, Reject)
    assert "written after" in stale.reason
