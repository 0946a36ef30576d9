"""Completion checks: a final answer is accepted only when validators say so.

A validator is a callable ``(output, evidence) -> Accept | Reject``. Wrapped in
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

from ownloop.contracts import Evidence
from ownloop.exceptions import ConfigurationError

__all__ = [
    "Accept",
    "CompletionValidator",
    "Reject",
    "Verdict",
    "accept_all",
    "as_validator",
    "citations_observed",
    "reject_all",
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

CheckFunction = Callable[[str, Sequence[Evidence]], Verdict]


class CompletionValidator:
    """A named, composable completion check.

    Args:
        check: The function deciding the verdict.
        name: How the check is shown in traces and reprs.
    """

    def __init__(self, check: CheckFunction, name: str) -> None:
        self._check = check
        self.name = name

    def __call__(self, output: str, evidence: Sequence[Evidence]) -> Verdict:
        """Judge a final answer.

        Args:
            output: The final answer.
            evidence: What tools returned in this run.

        Returns:
            `Accept`, or `Reject` naming this validator when the check did not name one.
        """
        verdict = self._check(output, evidence)
        if isinstance(verdict, Reject) and not verdict.validator:
            return Reject(verdict.reason, self.name)
        return verdict

    def __and__(self, other: CheckFunction) -> CompletionValidator:
        right = as_validator(other)

        def both(output: str, evidence: Sequence[Evidence]) -> Verdict:
            first = self(output, evidence)
            return first if isinstance(first, Reject) else right(output, evidence)

        return CompletionValidator(both, f"({self.name} & {right.name})")

    def __or__(self, other: CheckFunction) -> CompletionValidator:
        right = as_validator(other)

        def either(output: str, evidence: Sequence[Evidence]) -> Verdict:
            first = self(output, evidence)
            if isinstance(first, Accept):
                return first
            second = right(output, evidence)
            if isinstance(second, Accept):
                return second
            return Reject(f"{first.reason}; {second.reason}", f"({self.name} | {right.name})")

        return CompletionValidator(either, f"({self.name} | {right.name})")

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


def citations_observed(
    pattern: str = DEFAULT_CITATION_PATTERN, *, min_citations: int = 0
) -> CompletionValidator:
    """Require every id cited in the answer to name evidence a tool returned in this run.

    Args:
        pattern: A regular expression whose first group captures a cited id; by default ids in
            square brackets, like ``[R-02]``.
        min_citations: How many distinct citations the answer must make at least.

    Returns:
        The validator. A made-up citation is rejected with the ids that were not observed.

    Raises:
        ConfigurationError: If the pattern does not compile or has no capturing group.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ConfigurationError(f"citation pattern {pattern!r} is invalid: {error}") from None
    if compiled.groups < 1:
        raise ConfigurationError(f"citation pattern {pattern!r} needs a capturing group")

    def check(output: str, evidence: Sequence[Evidence]) -> Verdict:
        cited = list(dict.fromkeys(match.group(1) for match in compiled.finditer(output)))
        known = {item.id for item in evidence}
        unknown = [item for item in cited if item not in known]
        if unknown:
            observed = ", ".join(sorted(known)) or "none"
            return Reject(
                f"the answer cites {', '.join(unknown)}, which no tool returned in this run "
                f"(observed evidence: {observed}); cite only what you have read"
            )
        if len(cited) < min_citations:
            return Reject(
                f"the answer must cite at least {min_citations} piece(s) of observed evidence "
                f"in the form [ID]"
            )
        return Accept()

    return CompletionValidator(check, f"citations_observed(min_citations={min_citations})")
