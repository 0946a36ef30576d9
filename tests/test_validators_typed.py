"""`citations_observed` on typed answers: a declared field, or every text inside the answer."""

from __future__ import annotations

from dataclasses import dataclass

from typing_extensions import TypedDict

from ownloop import Evidence
from ownloop.validators import Accept, Reject, accept_all, citations_observed

SEEN = (
    Evidence(id="R-02", tool="read", call_ids=("c1",)),
    Evidence(id="R-03", tool="read", call_ids=("c2",)),
)


class Answer(TypedDict):
    """A TypedDict answer (a dict at run time)."""

    text: str
    sources: list[str]


@dataclass
class Report:
    """A dataclass answer with nested parts."""

    summary: str
    parts: list[dict[str, object]]
    count: int


def test_a_list_field_is_the_citations_stripped_and_deduplicated() -> None:
    """Ids in the field are stripped, empty ones dropped, repeats counted once."""
    check = citations_observed(citation_field="sources", min_citations=2)
    answer: Answer = {"text": "x", "sources": [" R-02 ", "R-02", "", "R-03"]}
    assert check(answer, SEEN) == Accept()
    once: Answer = {"text": "x", "sources": ["R-02", " R-02"]}
    assert isinstance(check(once, SEEN), Reject)


def test_a_field_of_a_dict_answer_is_read_by_key() -> None:
    """A TypedDict answer's field is looked up by key; an unseen id is rejected."""
    check = citations_observed(citation_field="sources")
    verdict = check({"text": "x", "sources": ["R-09"]}, SEEN)
    assert isinstance(verdict, Reject)
    assert "R-09" in verdict.reason


def test_a_text_field_is_read_with_the_pattern() -> None:
    """A string field is parsed like a text answer, unreadable citations included."""
    check = citations_observed(citation_field="text", min_citations=1)
    assert check({"text": "See [R-03].", "sources": []}, SEEN) == Accept()
    unreadable = check({"text": "See [ R-03 ].", "sources": []}, SEEN)
    assert isinstance(unreadable, Reject)
    assert "cannot be read" in unreadable.reason


def test_a_tuple_field_and_a_non_text_field() -> None:
    """A tuple lists citations like a list; a number field cites nothing."""
    check = citations_observed(citation_field="summary", min_citations=1)
    assert check(Report(summary="[R-02]", parts=[], count=1), SEEN) == Accept()
    by_tuple = citations_observed(citation_field="ids", min_citations=1)

    @dataclass
    class Tupled:
        ids: tuple[str, ...]

    assert by_tuple(Tupled(ids=("R-03",)), SEEN) == Accept()
    by_number = citations_observed(citation_field="count", min_citations=1)
    assert isinstance(by_number(Report(summary="", parts=[], count=3), SEEN), Reject)


def test_without_a_field_every_text_inside_is_read() -> None:
    """Texts in nested lists and dicts are read; numbers and keys are not."""
    check = citations_observed(min_citations=2)
    report = Report(
        summary="plain", parts=[{"note": "[R-02]", "n": 5}, {"more": ["[R-03]"]}], count=1
    )
    assert check(report, SEEN) == Accept()
    keys_only = Report(summary="plain", parts=[{"[R-02]": 1}], count=2)
    assert isinstance(check(keys_only, SEEN), Reject)


def test_texts_are_read_separately() -> None:
    """Two fields are not glued into one citation: '[R-0' and '2]' cite nothing."""
    check = citations_observed(min_citations=1)
    split = Report(summary="[R-0", parts=[{"tail": "2]"}], count=0)
    assert isinstance(check(split, SEEN), Reject)


def test_an_id_cited_in_two_texts_counts_once_and_bad_brackets_anywhere_reject() -> None:
    """Citations from several texts are deduplicated; an unreadable one in any text rejects."""
    check = citations_observed(min_citations=2)
    twice = Report(summary="[R-02]", parts=[{"note": "[R-02]"}], count=0)
    assert isinstance(check(twice, SEEN), Reject)
    both = Report(summary="[R-02]", parts=[{"note": "[R-03]"}], count=0)
    assert check(both, SEEN) == Accept()
    unreadable = Report(summary="[R-02] [R-03]", parts=[{"note": "see [ R-02 ]"}], count=0)
    verdict = check(unreadable, SEEN)
    assert isinstance(verdict, Reject)
    assert "cannot be read" in verdict.reason


def test_a_custom_pattern_applies_to_fields_and_inner_texts() -> None:
    """A custom citation pattern reads a text field and the texts of an answer alike."""
    pattern = r"\(source: ([^)]+)\)"
    by_field = citations_observed(pattern, citation_field="summary", min_citations=1)
    assert by_field(Report(summary="x (source: R-02)", parts=[], count=0), SEEN) == Accept()
    inner = citations_observed(pattern, min_citations=1)
    assert inner(Report(summary="y", parts=[{"n": "(source: R-03)"}], count=0), SEEN) == Accept()
    bracketed = Report(summary="[R-02]", parts=[], count=0)  # not the custom form
    assert isinstance(inner(bracketed, SEEN), Reject)


class Opaque:
    """A value JSON cannot encode, whose text cites an id."""

    def __str__(self) -> str:
        return "[R-02]"


def test_a_value_json_cannot_encode_is_read_as_its_text() -> None:
    """An object without a JSON form is read through str(), not refused."""
    check = citations_observed(min_citations=1)
    assert check({"parts": [Opaque()]}, SEEN) == Accept()


def test_a_composed_check_passes_the_typed_value_to_each_side() -> None:
    """`&` hands the answer itself to the left check: a made-up citation still rejects."""
    composed = citations_observed() & accept_all()
    verdict = composed(Report(summary="[R-09]", parts=[], count=0), SEEN)
    assert isinstance(verdict, Reject)
    assert "R-09" in verdict.reason
