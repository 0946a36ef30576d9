"""Model-based: redactors derived in any order keep every rule and the bounds a model expects."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ownloop.redaction import DEFAULT_BOUNDS, Bounds, Redactor

KEYS = st.sampled_from(["ssn", "pin_code", "employee_id", "iban", "badge"])
VALUES = st.sampled_from(["alpha-101", "bravo-202", "charlie-303", "delta-404"])
BOUNDS = st.builds(
    Bounds,
    max_string=st.integers(min_value=40, max_value=600),
    max_items=st.integers(min_value=2, max_value=40),
    max_depth=st.integers(min_value=1, max_value=8),
)


class DerivedRedactors(RuleBasedStateMachine):
    """A redactor built step by step, and the keys, values and bounds it must have."""

    @initialize(defaults=st.booleans())
    def start(self, defaults: bool) -> None:
        """Start from the built-in rules or from none."""
        self.redactor = Redactor(defaults=defaults)
        self.defaults = defaults
        self.keys: set[str] = set()
        self.values: set[str] = set()
        self.bounds: Bounds | None = None

    @rule(key=KEYS)
    def add_key(self, key: str) -> None:
        """Derive with one more secret key."""
        self.redactor = self.redactor.with_keys(key)
        self.keys.add(key)

    @rule(value=VALUES)
    def add_value(self, value: str) -> None:
        """Derive with one more literal secret."""
        self.redactor = self.redactor.with_values(value)
        self.values.add(value)

    @rule(bounds=BOUNDS)
    def set_bounds(self, bounds: Bounds) -> None:
        """Replace the bounds."""
        self.redactor = self.redactor.with_bounds(bounds)
        self.bounds = bounds

    @rule(key=KEYS, value=VALUES, bounds=st.none() | BOUNDS, defaults=st.booleans())
    def union(self, key: str, value: str, bounds: Bounds | None, defaults: bool) -> None:
        """Combine with another redactor: rules add up, bounds tighten, defaults if either."""
        other = Redactor(keys=[key], values=[value], bounds=bounds, defaults=defaults)
        self.redactor = self.redactor | other
        self.keys.add(key)
        self.values.add(value)
        self.defaults = self.defaults or defaults
        if bounds is not None:
            self.bounds = bounds if self.bounds is None else self.bounds.tightest(bounds)

    @invariant()
    def keys_are_secret(self) -> None:
        """Every key added so far is a secret key, in any spelling."""
        for key in self.keys:
            assert self.redactor.is_secret_key(key)
            assert self.redactor.is_secret_key(key.upper())
        assert self.redactor.is_secret_key("password") is self.defaults

    @invariant()
    def values_are_removed(self) -> None:
        """Every literal secret added so far is removed from text and from nested values."""
        for value in self.values:
            assert value not in self.redactor.redact_text(f"x {value} y")
            assert value not in str(self.redactor.redact({"note": [f"<{value}>"]}))

    @invariant()
    def bounds_are_the_models(self) -> None:
        """The bounds are the last ones set or the tightest of a union, else the defaults."""
        assert self.redactor.bounds == (self.bounds or DEFAULT_BOUNDS)

    @invariant()
    def nothing_else_changes(self) -> None:
        """Text with no rule in it comes back as the very same object."""
        text = "an ordinary sentence"
        assert self.redactor.redact_text(text) is text


DerivedRedactors.TestCase.settings = settings(
    max_examples=40, stateful_step_count=12, deadline=None
)
test_derived_redactors = DerivedRedactors.TestCase
