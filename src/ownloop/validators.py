"""Completion checks: a final answer is accepted only when validators say so.

A validator is a callable ``(output, evidence) -> Accept | Reject``; ``output`` is the final
answer as the run produces it: text, or the value of the agent's ``output_type``. Validators
built with `CompletionValidator(..., uses_context=True)` also receive a `CompletionContext` (the
receipts, the current state revision and the run's ``deps``), which is how
`require_current_check` tells a current check from a stale one. Wrapped in
`CompletionValidator` it composes: ``a & b`` accepts when both accept (the first rejection wins),
``a | b`` when either does; `accept_all` and `reject_all` are the neutral elements. The repr of a
composition reads like the expression that built it, because it appears in traces.

Validators see the evidence ledger, never the model's claims about it: a citation is only good if a
tool really returned the item it names in this run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from ownloop.contracts import Evidence, Receipt
from ownloop.evidence import (
    DEFAULT_EVIDENCE_FIELDS,
    EvidenceExtractor,
    EvidenceRule,
    parse_citations,
)
from ownloop.exceptions import ConfigurationError

__all__ = [
    "Accept",
    "CheckPassed",
    "CompletionContext",
    "CompletionValidator",
    "Precondition",
    "Reject",
    "Verdict",
    "accept_all",
    "as_validator",
    "citations_observed",
    "evidence_rule_of",
    "reject_all",
    "require_current_check",
    "requires_check_before",
]


@dataclass(frozen=True, slots=True)
class Accept:
    """The answer passes this check."""


@dataclass(frozen=True, slots=True)
class Reject:
    """The answer fails this check.

    Attributes:
        reason: What is wrong, phrased so the model can fix it.
        validator: The name of the check that rejected it (filled in by `CompletionValidator`).
    """

    reason: str
    validator: str = ""


Verdict = Accept | Reject
"""What a validator returns."""

CheckFunction = Callable[[Any, Sequence[Evidence]], Verdict]


@dataclass(frozen=True, slots=True)
class CompletionContext:
    """Trusted records a completion check may consult beyond the evidence.

    Attributes:
        receipts: Every tool execution's receipt, in execution order.
        revision: The current state revision, when the application tracks one.
        deps: The run's application objects (``agent.run(task, deps=...)``), or ``None``.
    """

    receipts: Sequence[Receipt] = ()
    revision: str | None = None
    deps: Any = None


_NO_CONTEXT = CompletionContext()


class CompletionValidator:
    """A named, composable completion check.

    Args:
        check: The function deciding the verdict: ``(output, evidence)``, or
            ``(output, evidence, context)`` when ``uses_context`` is set.
        name: How the check is shown in traces and reprs.
        uses_context: Whether ``check`` takes the `CompletionContext` as a third argument.
        evidence_rule: How tool results become the evidence this check reads, when it needs a
            rule other than the default (a composition takes its parts' first rule).

    Attributes:
        evidence_rule: The rule the run records evidence with for this check, if it sets one.
    """

    def __init__(
        self,
        check: Callable[..., Verdict],
        name: str,
        *,
        uses_context: bool = False,
        evidence_rule: EvidenceRule | None = None,
    ) -> None:
        self._check = check
        self.name = name
        self._uses_context = uses_context
        self.evidence_rule = evidence_rule

    def __call__(
        self,
        output: Any,
        evidence: Sequence[Evidence],
        context: CompletionContext = _NO_CONTEXT,
    ) -> Verdict:
        """Judge a final answer.

        Args:
            output: The final answer: text, or the value of the agent's ``output_type``.
            evidence: What tools returned in this run.
            context: Receipts and the current revision.

        Returns:
            `Accept`, or `Reject` naming this validator when the check did not name one.
        """
        if self._uses_context:
            verdict = self._check(output, evidence, context)
        else:
            verdict = self._check(output, evidence)
        if isinstance(verdict, Reject) and not verdict.validator:
            return Reject(verdict.reason, self.name)
        return verdict

    def __and__(self, other: CheckFunction) -> CompletionValidator:
        right = as_validator(other)

        def both(output: Any, evidence: Sequence[Evidence], context: CompletionContext) -> Verdict:
            first = self(output, evidence, context)
            return first if isinstance(first, Reject) else right(output, evidence, context)

        return CompletionValidator(
            both,
            f"({self.name} & {right.name})",
            uses_context=True,
            evidence_rule=self.evidence_rule or right.evidence_rule,
        )

    def __or__(self, other: CheckFunction) -> CompletionValidator:
        right = as_validator(other)

        def either(
            output: Any, evidence: Sequence[Evidence], context: CompletionContext
        ) -> Verdict:
            first = self(output, evidence, context)
            if isinstance(first, Accept):
                return first
            second = right(output, evidence, context)
            if isinstance(second, Accept):
                return second
            return Reject(f"{first.reason}; {second.reason}", f"({self.name} | {right.name})")

        return CompletionValidator(
            either,
            f"({self.name} | {right.name})",
            uses_context=True,
            evidence_rule=self.evidence_rule or right.evidence_rule,
        )

    def __repr__(self) -> str:
        return self.name


def as_validator(check: CheckFunction) -> CompletionValidator:
    """Wrap a plain ``(output, evidence) -> verdict`` function as a `CompletionValidator`.

    Args:
        check: A validator or a plain function.

    Returns:
        The validator itself, or a wrapper named after the function.

    Raises:
        ConfigurationError: If ``check`` is not callable.
    """
    if isinstance(check, CompletionValidator):
        return check
    if not callable(check):
        raise ConfigurationError(f"a completion validator must be callable, got {check!r}")
    return CompletionValidator(check, getattr(check, "__name__", type(check).__name__))


def accept_all() -> CompletionValidator:
    """Return the validator that accepts everything (the neutral element of ``&``)."""
    return CompletionValidator(lambda _output, _evidence: Accept(), "accept_all()")


def reject_all(reason: str = "no answer is accepted") -> CompletionValidator:
    """Return the validator that rejects everything (the neutral element of ``|``).

    Args:
        reason: The rejection reason.
    """
    return CompletionValidator(lambda _output, _evidence: Reject(reason), "reject_all()")


DEFAULT_CITATION_PATTERN = r"\[([A-Za-z0-9][A-Za-z0-9_.:/-]{0,127})\]"
"""The simple form of a citation; the default check reads lists and refuses unreadable ones too."""

_MAX_LISTED = 20


def evidence_rule_of(validator: CompletionValidator | None) -> EvidenceRule:
    """Return the rule a run records evidence with: its validator's, or the default one.

    Args:
        validator: The run's completion check, if any.

    Returns:
        The rule.
    """
    rule = validator.evidence_rule if validator is not None else None
    return rule if rule is not None else EvidenceRule()


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_MAX_LISTED]) or "none"
    return f"{shown} and {len(ids) - _MAX_LISTED} more" if len(ids) > _MAX_LISTED else shown


def _cited(pattern: re.Pattern[str] | None, output: str) -> tuple[list[str], list[str]]:
    if pattern is None:
        return parse_citations(output)
    cited = [
        part.strip()
        for match in pattern.finditer(output)
        for part in re.split(r"[,;]", match.group(1))
        if part.strip()
    ]
    return list(dict.fromkeys(cited)), []


def _citations_of(
    output: Any, pattern: re.Pattern[str] | None, field: str | None
) -> tuple[list[str], list[str]]:
    """The ids an answer cites: from its text, its citation field, or every text inside it."""
    if isinstance(output, str):
        return _cited(pattern, output)
    if field is not None:
        value = output.get(field) if isinstance(output, dict) else getattr(output, field, None)
        if isinstance(value, str):
            return _cited(pattern, value)
        if isinstance(value, list | tuple):
            return list(dict.fromkeys(str(item).strip() for item in value if str(item).strip())), []
        return [], []
    cited: list[str] = []
    unreadable: list[str] = []
    for text in _texts(to_jsonable_python(output, fallback=str)):  # each text on its own
        found, bad = _cited(pattern, text)
        cited.extend(found)
        unreadable.extend(bad)
    return list(dict.fromkeys(cited)), unreadable


def _texts(value: Any) -> list[str]:
    """Every text inside a JSON-ready value, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def citations_observed(
    pattern: str = DEFAULT_CITATION_PATTERN,
    *,
    min_citations: int = 0,
    fields: Sequence[str] | None = None,
    extract: EvidenceExtractor | None = None,
    citation_field: str | None = None,
    earlier: bool = True,
) -> CompletionValidator:
    """Require every id cited in the answer to name evidence the model was shown in this run.

    A typed answer (an agent's ``output_type``) is read from ``citation_field`` when given: a
    list of ids is taken as the citations, a text is read with ``pattern``; without it, the
    answer's JSON text is read with ``pattern`` (so ``[ID]`` inside any text field counts).

    Evidence is what the model was shown from a fact-source tool (see `ownloop.evidence`): an
    item identified by one of ``fields`` (or found by ``extract``) whose id appears in the
    observation the model received. With the default pattern, ``[ID]`` and lists ``[ID1, ID2]``
    are read (every id checked), and a bracket that looks like a citation but cannot be read
    (``[ R-02 ]``, ``[R 02]``, ``【R-02】``) rejects the answer.

    Args:
        pattern: A regular expression whose first group captures a cited id (or a comma list
            of ids); by default ids in square brackets, like ``[R-02]``.
        min_citations: How many distinct citations the answer must make at least.
        fields: The result fields that identify an evidence item, first present wins
            (default: ``id``, ``document_id``, ``doc_id``, ``url``, ``source``).
        extract: A function ``(result) -> ids`` (or ``(id, title)`` pairs) used instead of
            ``fields``.
        citation_field: For typed answers, the attribute (or key) holding the citations.
        earlier: Whether evidence an earlier run of the conversation observed counts (carried
            over by ``agent.run(task, history=...)``, marked with ``Evidence.from_run``); with
            ``False`` only what a tool returned in this run may be cited.

    Returns:
        The validator; the run records evidence with its rule. A made-up or unreadable citation
        is rejected with what was observed and how a tool's output becomes evidence.

    Raises:
        ConfigurationError: If the pattern does not compile or has no capturing group, or both
            ``fields`` and ``extract`` are given, or ``fields`` is empty.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ConfigurationError(f"citation pattern {pattern!r} is invalid: {error}") from None
    if compiled.groups < 1:
        raise ConfigurationError(f"citation pattern {pattern!r} needs a capturing group")
    if fields is not None and extract is not None:
        raise ConfigurationError("citations_observed takes fields= or extract=, not both")
    if fields is not None and (not fields or not all(isinstance(f, str) for f in fields)):
        raise ConfigurationError("citations_observed(fields=...) needs at least one field name")
    rule = EvidenceRule(tuple(fields) if fields else DEFAULT_EVIDENCE_FIELDS, extract)
    custom = None if pattern == DEFAULT_CITATION_PATTERN else compiled

    def check(output: Any, evidence: Sequence[Evidence]) -> Verdict:
        cited, unreadable = _citations_of(output, custom, citation_field)
        if unreadable:
            return Reject(
                f"the answer has citation(s) that cannot be read: {', '.join(unreadable[:10])}; "
                "cite as [ID] or [ID1, ID2], with each id exactly as a tool showed it"
            )
        known = sorted({item.id for item in evidence if earlier or item.from_run is None})
        unknown = [item for item in cited if item not in set(known)]
        old = {item.id: item.from_run for item in evidence if item.from_run is not None}
        if unknown and not earlier and set(unknown) <= set(old):
            return Reject(
                f"the answer cites {_listed(unknown)}, which only an earlier run of the "
                f"conversation observed (run {old[unknown[0]]}); look it up again in this run "
                f"before citing it (observed in this run: {_listed(known)})"
            )
        if unknown:
            return Reject(
                f"the answer cites {_listed(unknown)}, which no tool showed in this run "
                f"(observed evidence: {_listed(known)}). Evidence is what the model was shown "
                f"from a fact-source tool: {rule.describe()}, and only ids in the observation "
                "as shown count (memory tools are not fact sources); cite only what you have read"
            )
        if len(cited) < min_citations:
            return Reject(
                f"the answer must cite at least {min_citations} piece(s) of observed evidence "
                f"in the form [ID] (observed evidence: {_listed(known)})"
            )
        return Accept()

    label = f"citations_observed(min_citations={min_citations})"
    if not earlier:  # the default keeps the label (and the digest) stored runs carry
        label = f"citations_observed(min_citations={min_citations}, earlier=False)"
    return CompletionValidator(check, label, evidence_rule=rule if fields or extract else None)


CheckPassed = str | Callable[[object], bool]
"""How to tell a passing check: the name of a result field that is ``True``, or a predicate."""


def _passed(receipt: Receipt, passed: CheckPassed) -> bool:
    if callable(passed):
        return bool(passed(receipt.data))
    return isinstance(receipt.data, dict) and receipt.data.get(passed) is True


def _current_check_problem(
    tool: str, passed: CheckPassed, context: CompletionContext
) -> str | None:
    """Return why there is no current passing check of ``tool``, or ``None`` when there is one."""
    last_check: Receipt | None = None
    write_after = False
    for receipt in context.receipts:
        if receipt.tool == tool and receipt.status == "ok":
            last_check, write_after = receipt, False
        elif receipt.effect == "applied":
            write_after = True
    if last_check is None:
        return f"no {tool} has run yet; run it on the current state"
    if not _passed(last_check, passed):
        return f"the last {tool} did not pass; fix the state and run it again"
    if context.revision is not None:
        # The application's revision is the authority: a write that left it unchanged (queueing
        # an export of the checked configuration) does not make the check stale.
        if last_check.revision != context.revision:
            return (
                f"the last passing {tool} ran at revision {last_check.revision}, but the state is "
                f"now at {context.revision}; run it again"
            )
        return None
    if write_after:
        return f"the state was written after the last passing {tool}; run it again"
    return None


def require_current_check(tool: str, passed: CheckPassed = "passed") -> CompletionValidator:
    """Accept a final answer only if the last ``tool`` check passed at the current revision.

    A check that ran before the latest write is stale: with a revision tracker the revisions
    differ; without one, any applied write after the check makes it stale.

    Args:
        tool: The check tool.
        passed: The result field that must be ``True``, or a predicate on the result.

    Returns:
        The validator.
    """

    def check(output: Any, evidence: Sequence[Evidence], context: CompletionContext) -> Verdict:
        problem = _current_check_problem(tool, passed, context)
        return Accept() if problem is None else Reject(problem)

    return CompletionValidator(check, f"require_current_check({tool!r})", uses_context=True)


class Precondition:
    """A condition a write must meet before it may run; unmet, the model gets feedback instead.

    Args:
        tool: The write tool it guards.
        check: The check tool that must have passed at the current revision.
        passed: The result field that must be ``True``, or a predicate on the result.
    """

    def __init__(self, tool: str, check: str, passed: CheckPassed = "passed") -> None:
        self.tool = tool
        self.check = check
        self.passed = passed

    def problem(self, tool: str, context: CompletionContext) -> str | None:
        """Return why ``tool`` may not run now, or ``None`` when it may.

        Args:
            tool: The tool about to run.
            context: Receipts and the current revision.

        Returns:
            The feedback for the model, or ``None``.
        """
        if tool != self.tool:
            return None
        problem = _current_check_problem(self.check, self.passed, context)
        return (
            None if problem is None else f"{tool} needs a current passing {self.check}: {problem}"
        )

    def __repr__(self) -> str:
        return f"requires_check_before(tool={self.tool!r}, check={self.check!r})"


def requires_check_before(*, tool: str, check: str, passed: CheckPassed = "passed") -> Precondition:
    """Make a write wait for a passing check at the current revision.

    Args:
        tool: The write tool.
        check: The check tool.
        passed: The result field that must be ``True``, or a predicate on the result.

    Returns:
        The precondition, for ``Agent(preconditions=[...])``.
    """
    return Precondition(tool, check, passed)
