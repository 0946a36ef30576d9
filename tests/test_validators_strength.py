"""Completion checks at their exact semantics: composition order, context and staleness."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ownloop import ConfigurationError, Evidence, Receipt
from ownloop.evidence import DEFAULT_EVIDENCE_FIELDS, EvidenceRule
from ownloop.validators import (
    Accept,
    CompletionContext,
    CompletionValidator,
    Precondition,
    Reject,
    Verdict,
    accept_all,
    citations_observed,
    evidence_rule_of,
    reject_all,
    require_current_check,
    requires_check_before,
)

EVIDENCE = (Evidence(id="R-02", tool="read_document", call_ids=("c1",)),)
PASSING = Receipt(call_id="c1", tool="check", data={"passed": True}, revision="r1")
FAILING = Receipt(call_id="c2", tool="check", data={"passed": False}, revision="r1")
WRITE = Receipt(call_id="w1", tool="apply", effect="applied", revision="r2")
CURRENT = CompletionContext(receipts=(PASSING,), revision="r1")


def _named(reason: str, name: str) -> CompletionValidator:
    return CompletionValidator(lambda _output, _evidence: Reject(reason), name)


def test_and_returns_the_first_rejection_and_skips_the_second_check() -> None:
    """In a & b, a rejection by a wins and b is never consulted."""
    consulted: list[str] = []

    def second(output: str, evidence: Sequence[Evidence]) -> Verdict:
        consulted.append(output)
        return Reject("second")

    verdict = (_named("first", "a") & second)("x", EVIDENCE)
    assert verdict == Reject("first", "a")
    assert consulted == []


def test_and_returns_the_second_rejection_when_the_first_accepts() -> None:
    """In a & b with a accepting, b's rejection (named after b) is the verdict."""
    assert (accept_all() & _named("second", "b"))("x", EVIDENCE) == Reject("second", "b")


def test_or_rejection_names_the_composition_and_joins_both_reasons() -> None:
    """A rejecting a | b says both reasons in order and names the whole composition."""
    verdict = (_named("no a", "a") | _named("no b", "b"))("x", EVIDENCE)
    assert verdict == Reject("no a; no b", "(a | b)")


def test_or_accepts_on_the_second_check_and_skips_it_when_the_first_accepts() -> None:
    """The union a | b accepts as soon as one accepts, in order; b is skipped if a accepts."""
    consulted: list[str] = []

    def second(output: str, evidence: Sequence[Evidence]) -> Verdict:
        consulted.append(output)
        return Accept()

    assert (_named("no", "a") | second)("x", EVIDENCE) == Accept()
    assert consulted == ["x"]
    assert (accept_all() | second)("y", EVIDENCE) == Accept()
    assert consulted == ["x"]


def test_and_passes_the_context_to_checks_that_need_it() -> None:
    """A context-needing check inside & sees the context given to the composition."""
    check = accept_all() & require_current_check("check")
    assert check("done", (), CURRENT) == Accept()
    assert isinstance(check("done", ()), Reject)
    first = require_current_check("check") & accept_all()
    assert first("done", (), CURRENT) == Accept()


def test_or_passes_the_context_to_checks_that_need_it() -> None:
    """A context-needing check inside | sees the context given to the composition."""
    check = reject_all("never") | require_current_check("check")
    assert check("done", (), CURRENT) == Accept()
    first = require_current_check("check") | reject_all("never")
    assert first("done", (), CURRENT) == Accept()
    verdict = first("done", ())
    assert isinstance(verdict, Reject)
    assert verdict.reason == "no check has run yet; run it on the current state; never"


def test_a_verdict_already_naming_a_validator_keeps_that_name() -> None:
    """A rejection that names its validator is passed through, not renamed."""
    inner = CompletionValidator(lambda _o, _e: Reject("why", "inner"), "outer")
    assert inner("x", ()) == Reject("why", "inner")


def test_reject_all_default_reason_and_reprs_name_the_checks() -> None:
    """reject_all's default reason is stated; reprs of builders read as their calls."""
    assert reject_all()("x", ()) == Reject("no answer is accepted", "reject_all()")
    assert repr(accept_all()) == "accept_all()"
    assert repr(require_current_check("check")) == "require_current_check('check')"
    assert repr(citations_observed(min_citations=2)) == "citations_observed(min_citations=2)"


def test_a_nameless_callable_is_named_after_its_type() -> None:
    """A callable object without __name__ is named after its class."""

    class Strict:
        def __call__(self, output: str, evidence: Sequence[Evidence]) -> Verdict:
            return Reject("strict")

    verdict = (accept_all() & Strict())("x", ())
    assert verdict == Reject("strict", "Strict")


def test_requires_check_before_uses_the_passed_field_or_predicate() -> None:
    """requires_check_before(passed=...) decides what a passing check is."""
    ok_field = Receipt(call_id="c1", tool="check", data={"clean": True}, revision="r1")
    context = CompletionContext(receipts=(ok_field,), revision="r1")
    by_field = requires_check_before(tool="apply", check="check", passed="clean")
    assert by_field.problem("apply", context) is None
    default = requires_check_before(tool="apply", check="check")
    assert default.problem("apply", context) == (
        "apply needs a current passing check: the last check did not pass; fix the state and "
        "run it again"
    )
    by_predicate = requires_check_before(
        tool="apply", check="check", passed=lambda data: data == {"clean": True}
    )
    assert by_predicate.problem("apply", context) is None
    assert by_predicate.problem("other", CompletionContext()) is None
    assert repr(by_field) == "requires_check_before(tool='apply', check='check')"


def test_require_current_check_uses_the_passed_field_or_predicate() -> None:
    """require_current_check(passed=...) accepts a custom field, and a truthy predicate result."""
    receipt = Receipt(call_id="c1", tool="check", data={"clean": True, "errors": 0})
    context = CompletionContext(receipts=(receipt,))
    assert require_current_check("check", "clean")("d", (), context) == Accept()
    assert isinstance(require_current_check("check")("d", (), context), Reject)
    predicate = require_current_check("check", lambda data: data["errors"] == 0)  # type: ignore[index]
    assert predicate("d", (), context) == Accept()


def test_a_passed_field_must_be_exactly_true() -> None:
    """A passed field that is merely truthy, or data that is not a mapping, does not pass."""
    for data in ({"passed": 1}, {"passed": "yes"}, ["passed"], None):
        receipt = Receipt(call_id="c1", tool="check", data=data)
        verdict = require_current_check("check")("d", (), CompletionContext(receipts=(receipt,)))
        assert isinstance(verdict, Reject), data


def test_the_last_check_decides_and_failed_checks_are_named() -> None:
    """A failing check after a passing one makes the answer wait; the reason says it failed."""
    check = require_current_check("check")
    verdict = check("d", (), CompletionContext(receipts=(PASSING, FAILING), revision="r1"))
    assert verdict == Reject(
        "the last check did not pass; fix the state and run it again",
        "require_current_check('check')",
    )
    assert check("d", (), CompletionContext(receipts=(FAILING, PASSING), revision="r1")) == Accept()


def test_a_check_that_did_not_finish_ok_does_not_count() -> None:
    """Receipts of the check tool that are not ok (errors, unknown) never count as a check."""
    errored = Receipt(call_id="c3", tool="check", status="error", data={"passed": True})
    verdict = require_current_check("check")("d", (), CompletionContext(receipts=(errored,)))
    assert verdict == Reject(
        "no check has run yet; run it on the current state", "require_current_check('check')"
    )


def test_a_stale_revision_is_named_in_the_rejection() -> None:
    """With a tracked revision, the rejection names the check's revision and the current one."""
    verdict = require_current_check("check")(
        "d", (), CompletionContext(receipts=(PASSING,), revision="r2")
    )
    assert verdict == Reject(
        "the last passing check ran at revision r1, but the state is now at r2; run it again",
        "require_current_check('check')",
    )


def test_without_a_revision_only_applied_writes_make_a_check_stale() -> None:
    """With no revision, a write after the check makes it stale; a read after it does not."""
    read = Receipt(call_id="r1", tool="lookup")
    check = require_current_check("check")
    assert check("d", (), CompletionContext(receipts=(PASSING, read))) == Accept()
    verdict = check("d", (), CompletionContext(receipts=(PASSING, WRITE)))
    assert verdict == Reject(
        "the state was written after the last passing check; run it again",
        "require_current_check('check')",
    )


def test_citations_reject_names_the_unknown_and_the_observed_ids() -> None:
    """A made-up citation is rejected with the unknown ids and the observed evidence, sorted."""
    evidence = (*EVIDENCE, Evidence(id="A-01", tool="read_document", call_ids=("c2",)))
    verdict = citations_observed()("[X-1] [R-02] [X-1] [Y-2]", evidence)
    assert verdict == Reject(
        "the answer cites X-1, Y-2, which no tool showed in this run (observed evidence: "
        "A-01, R-02). Evidence is what the model was shown from a fact-source tool: a "
        "fact-source tool returns an object (or a list of objects) with a string field among "
        "id, document_id, doc_id, url, source, and only ids in the observation as shown count "
        "(memory tools are not fact sources); cite only what you have read",
        "citations_observed(min_citations=0)",
    )
    none_seen = citations_observed()("[X-1]", ())
    assert isinstance(none_seen, Reject)
    assert "(observed evidence: none)" in none_seen.reason


def test_min_citations_counts_distinct_ids() -> None:
    """min_citations counts distinct cited ids, and exactly the minimum is enough."""
    evidence = (*EVIDENCE, Evidence(id="A-01", tool="read_document", call_ids=("c2",)))
    two = citations_observed(min_citations=2)
    assert two("[R-02] [A-01]", evidence) == Accept()
    verdict = two("[R-02] [R-02]", evidence)
    assert verdict == Reject(
        "the answer must cite at least 2 piece(s) of observed evidence in the form [ID] "
        "(observed evidence: A-01, R-02)",
        "citations_observed(min_citations=2)",
    )


def test_a_custom_pattern_and_its_errors_are_named() -> None:
    """A custom pattern's first group is the cited id; a bad pattern's error names the pattern."""
    check = citations_observed(r"\(see (\S+)\)")
    assert check("(see R-02)", EVIDENCE) == Accept()
    assert isinstance(check("(see R-99)", EVIDENCE), Reject)
    with pytest.raises(ConfigurationError, match=r"citation pattern '\(' is invalid: "):
        citations_observed("(")
    with pytest.raises(ConfigurationError, match=r"citation pattern 'x' needs a capturing group"):
        citations_observed("x")


def test_an_uncallable_check_error_names_the_value() -> None:
    """Composing with something that is not callable names it in the error."""
    with pytest.raises(ConfigurationError, match="must be callable, got 42"):
        accept_all() & 42  # type: ignore[operator]


@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_and_or_agree_with_boolean_logic(accepts: list[bool]) -> None:
    """A chain of & accepts iff all accept; a chain of | iff any does (with names in rejections)."""
    checks = [accept_all() if ok else _named(f"r{i}", f"v{i}") for i, ok in enumerate(accepts)]
    conj, disj = checks[0], checks[0]
    for check in checks[1:]:
        conj, disj = conj & check, disj | check
    assert isinstance(conj("x", ()), Accept) is all(accepts)
    assert isinstance(disj("x", ()), Accept) is any(accepts)
    if not all(accepts):
        first = accepts.index(False)
        assert conj("x", ()) == Reject(f"r{first}", f"v{first}")


def test_both_sides_of_a_composition_see_the_output_and_the_evidence() -> None:
    """Each side of & and | judges the same answer against the same evidence."""
    cites = citations_observed(min_citations=1)
    assert (accept_all() & cites)("[R-02]", EVIDENCE) == Accept()
    assert isinstance((accept_all() & cites)("[R-99]", EVIDENCE), Reject)
    assert (cites | reject_all())("[R-02]", EVIDENCE) == Accept()
    assert (reject_all() | cites)("[R-02]", EVIDENCE) == Accept()
    assert isinstance((cites | reject_all())("[R-02]", ()), Reject)


def test_an_or_composition_reads_like_its_expression() -> None:
    """The repr of a | b, nested in &, reads like the expression that built it."""
    combined = (_named("x", "a") | _named("y", "b")) & accept_all()
    assert repr(combined) == "((a | b) & accept_all())"


def test_a_precondition_built_directly_checks_the_passed_field() -> None:
    """Precondition(tool, check) without passed= looks for a passed field that is True."""
    guard = Precondition("apply", "check")
    assert guard.problem("apply", CURRENT) is None
    failing = CompletionContext(receipts=(FAILING,), revision="r1")
    assert guard.problem("apply", failing) is not None


def test_unreadable_citations_are_named_ten_at_most_with_how_to_cite() -> None:
    """An unreadable citation is rejected naming the first ten such brackets and the right form."""
    check = citations_observed()
    how = "cite as [ID] or [ID1, ID2], with each id exactly as a tool showed it"
    assert check("[ A1 ] and [B 2]", EVIDENCE) == Reject(
        f"the answer has citation(s) that cannot be read: [ A1 ], [B 2]; {how}",
        "citations_observed(min_citations=0)",
    )
    eleven = check(" ".join(f"[ A{i} ]" for i in range(11)), EVIDENCE)
    shown = ", ".join(f"[ A{i} ]" for i in range(10))
    assert eleven == Reject(
        f"the answer has citation(s) that cannot be read: {shown}; {how}",
        "citations_observed(min_citations=0)",
    )


def test_more_than_twenty_unknown_ids_are_counted_not_listed() -> None:
    """Up to twenty unknown ids are listed; past twenty the rest are counted as "and N more"."""
    check = citations_observed()
    twenty = [f"X-{i:02}" for i in range(20)]
    exactly = check(" ".join(f"[{i}]" for i in twenty), ())
    assert isinstance(exactly, Reject)
    assert exactly.reason.startswith(f"the answer cites {', '.join(twenty)}, which no tool")
    over = check(" ".join(f"[{i}]" for i in [*twenty, "X-20", "X-21"]), ())
    assert isinstance(over, Reject)
    assert over.reason.startswith(f"the answer cites {', '.join(twenty)} and 2 more, which")


def test_a_custom_pattern_reads_lists_split_by_commas_or_semicolons() -> None:
    """With a custom pattern, a captured "A, B" or "A; B" cites each id, and each is checked."""
    check = citations_observed(r"<([^>]+)>")
    assert check("<R-02; R-02>", EVIDENCE) == Accept()
    verdict = check("<R-02; X-9, Y-8>", EVIDENCE)
    assert isinstance(verdict, Reject)
    assert verdict.reason.startswith("the answer cites X-9, Y-8, which no tool showed")


def test_citations_set_an_evidence_rule_only_when_told_how_to_find_ids() -> None:
    """The default check leaves the run's default evidence rule; fields= or extract= set one."""
    assert citations_observed().evidence_rule is None
    by_field = citations_observed(fields=("doc",))
    assert by_field.evidence_rule == EvidenceRule(("doc",), None)

    def ids(result: object) -> list[str]:
        return []

    assert citations_observed(extract=ids).evidence_rule == EvidenceRule(
        DEFAULT_EVIDENCE_FIELDS, ids
    )


def test_an_or_composition_takes_the_first_evidence_rule_its_parts_set() -> None:
    """The composition a | b records evidence with a's rule, or b's when a sets none."""
    by_doc = citations_observed(fields=("doc",))
    by_url = citations_observed(fields=("url",))
    assert (by_doc | accept_all()).evidence_rule == by_doc.evidence_rule
    assert (accept_all() | by_url).evidence_rule == by_url.evidence_rule
    assert (by_doc | by_url).evidence_rule == by_doc.evidence_rule
    assert (accept_all() | reject_all()).evidence_rule is None


def test_citation_options_that_contradict_are_refused_with_the_reason() -> None:
    """fields= with extract=, or an empty fields=, is refused naming what is wrong."""
    with pytest.raises(ConfigurationError) as both:
        citations_observed(fields=("id",), extract=lambda result: [])
    assert str(both.value) == "citations_observed takes fields= or extract=, not both"
    with pytest.raises(ConfigurationError) as empty:
        citations_observed(fields=())
    assert str(empty.value) == "citations_observed(fields=...) needs at least one field name"


def test_a_run_without_a_rule_records_evidence_with_the_default_rule() -> None:
    """evidence_rule_of gives the validator's rule, or the default one when it sets none."""
    assert evidence_rule_of(None) == EvidenceRule()
    assert evidence_rule_of(accept_all()) == EvidenceRule()
    by_doc = citations_observed(fields=("doc",))
    assert evidence_rule_of(by_doc) == EvidenceRule(("doc",), None)
