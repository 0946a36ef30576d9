"""`Redactor`: the redaction policy, applied to any JSON-shaped value and to structlog events.

Three kinds of rules, all on by default and extensible: secret *key names* (the whole value under
such a key is replaced, in mappings at any depth and in ``key=value`` text), secret *value
patterns* (API keys, bearer tokens, JWTs, AWS keys, PEM private keys, credentials in URLs…) and
literal secret *values* the application knows. Redaction never raises and returns the very same
object when nothing was redacted. Numbers, booleans and ``None`` are never redacted: a secret is
text (mark a numeric secret parameter ``Sensitive()`` to hide it at the source).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from ownloop._text import clean_text
from ownloop.exceptions import ConfigurationError
from ownloop.redaction._bounds import DEFAULT_BOUNDS, TOO_DEEP, Bounds
from ownloop.redaction._markers import MARKER, redact_marker
from ownloop.redaction._patterns import (
    DEFAULT_KEYS,
    DEFAULT_PATTERNS,
    PatternLike,
    SecretPattern,
    as_pattern,
    assignment_pattern,
    fold_case,
    key_words,
    replace_secret,
)

__all__ = ["Redactor"]

_MIN_VALUE_CHARS = 4  # shorter literals would shred ordinary text
_CACHE_LIMIT = 4096
_CACHED_TEXT_CHARS = 256
_DERIVED_LIMIT = 64


class Redactor:
    """Which values never reach a trace: secret keys, secret shapes and known secret values.

    ``Redactor()`` applies the built-in rules. Rules given to the constructor (or added with
    `with_keys`, `with_patterns`, `with_values`) extend them; ``defaults=False`` starts empty.
    Redactors combine with ``|`` (the union of their rules and the tightest bounds), and
    ``Redactor(defaults=False)`` is the neutral element. A redactor is also a structlog
    processor: put it before the renderer of your own structlog configuration.

    Args:
        keys: More key names (``"ssn"``); matched word by word, case-insensitively.
        patterns: More value patterns: regex text, compiled regexes or `SecretPattern`. A group
            named ``secret`` limits the replacement to that group.
        values: Literal secrets to remove wherever they appear (at least 4 characters each).
        bounds: Size bounds of the trace payloads; `DEFAULT_BOUNDS` when omitted.
        defaults: Whether the built-in keys and patterns apply.

    Raises:
        ConfigurationError: If a pattern does not compile or a value is shorter than 4 characters.
    """

    def __init__(
        self,
        *,
        keys: Iterable[str] = (),
        patterns: Iterable[PatternLike] = (),
        values: Iterable[str] = (),
        bounds: Bounds | None = None,
        defaults: bool = True,
    ) -> None:
        self.defaults = defaults
        self.keys = tuple(dict.fromkeys(keys))
        self.patterns = tuple(dict.fromkeys(as_pattern(pattern) for pattern in patterns))
        self.values = tuple(dict.fromkeys(values))
        for value in self.values:
            if not isinstance(value, str) or len(value) < _MIN_VALUE_CHARS:
                raise ConfigurationError(
                    f"a literal secret must be a string of at least {_MIN_VALUE_CHARS} characters"
                )
        # Matched against text already cleaned of unpaired surrogates, so cleaned the same way.
        self._match_values = tuple(dict.fromkeys(clean_text(value) for value in self.values))
        self._bounds = bounds
        all_keys = (*DEFAULT_KEYS, *self.keys) if defaults else self.keys
        self._key_rules = {key_words(key) for key in all_keys} - {()}
        self._joined_rules = {"".join(words) for words in self._key_rules}
        builtin = DEFAULT_PATTERNS if defaults else ()
        assignment = (assignment_pattern(self._key_rules),) if self._key_rules else ()
        # PEM blocks first (a key=value rule would stop at the block's first space), then
        # key=value text, so "Authorization: Bearer …" becomes one marker.
        self._rules = (*builtin[:1], *assignment, *builtin[1:], *self.patterns)
        # One search for every rule's hints decides, for most texts, that no hinted rule can
        # match; only then are the rules tried one by one.
        hints = sorted({hint for rule in self._rules for hint in rule.hints}, key=len)
        self._any_hint = re.compile("|".join(map(re.escape, hints))) if hints else None
        self._always = tuple(rule for rule in self._rules if not rule.hints)
        self._key_cache: dict[str, bool] = {}
        self._clean_texts: set[str] = set()
        self._derived: dict[tuple[str, ...], Redactor] = {}

    @property
    def bounds(self) -> Bounds:
        """The size bounds of trace payloads."""
        return self._bounds if self._bounds is not None else DEFAULT_BOUNDS

    @property
    def rules(self) -> tuple[SecretPattern, ...]:
        """The value patterns in the order they apply: built-in, key=value, the application's."""
        return self._rules

    @property
    def match_values(self) -> tuple[str, ...]:
        """The literal secrets as they are matched (cleaned of unpaired surrogates), in order."""
        return self._match_values

    def with_keys(self, *keys: str) -> Redactor:
        """Return a redactor that also redacts values under these key names."""
        # Remembered: an agent derives the same redactor for every run, and keeps its caches warm.
        derived = self._derived.get(keys)
        if derived is None:
            if len(self._derived) >= _DERIVED_LIMIT:
                self._derived.clear()
            derived = self._derived[keys] = self._extend(keys=keys)
        return derived

    def with_patterns(self, *patterns: PatternLike) -> Redactor:
        """Return a redactor that also redacts text matching these patterns."""
        return self._extend(patterns=patterns)

    def with_values(self, *values: str) -> Redactor:
        """Return a redactor that also removes these literal secrets from every string."""
        return self._extend(values=values)

    def with_bounds(self, bounds: Bounds) -> Redactor:
        """Return a redactor with these size bounds instead of the current ones."""
        return Redactor(
            keys=self.keys,
            patterns=self.patterns,
            values=self.values,
            bounds=bounds,
            defaults=self.defaults,
        )

    def _extend(
        self,
        *,
        keys: Iterable[str] = (),
        patterns: Iterable[PatternLike] = (),
        values: Iterable[str] = (),
    ) -> Redactor:
        return Redactor(
            keys=(*self.keys, *keys),
            patterns=(*self.patterns, *(as_pattern(pattern) for pattern in patterns)),
            values=(*self.values, *values),
            bounds=self._bounds,
            defaults=self.defaults,
        )

    def __or__(self, other: Redactor) -> Redactor:
        if not isinstance(other, Redactor):
            return NotImplemented
        if self._bounds is None or other._bounds is None:
            bounds = self._bounds if other._bounds is None else other._bounds
        else:
            bounds = self._bounds.tightest(other._bounds)
        return Redactor(
            keys=(*self.keys, *other.keys),
            patterns=(*self.patterns, *other.patterns),
            values=(*self.values, *other.values),
            bounds=bounds,
            defaults=self.defaults or other.defaults,
        )

    def is_secret_key(self, key: object) -> bool:
        """Tell whether values under this mapping key are redacted.

        Args:
            key: A mapping key (anything that is not a string never is).

        Returns:
            Whether one of the key rules matches it, word by word.
        """
        if not isinstance(key, str):
            return False
        known = self._key_cache.get(key)
        if known is None:
            words = key_words(key)
            known = "".join(words) in self._joined_rules or any(
                words[start : start + len(rule)] == rule
                for rule in self._key_rules
                for start in range(len(words) - len(rule) + 1)
            )
            if len(self._key_cache) >= _CACHE_LIMIT:
                self._key_cache.clear()
            self._key_cache[key] = known
        return known

    def redact_text(self, text: str) -> str:
        """Redact the known values and the secret patterns in one string.

        Args:
            text: The string.

        Returns:
            ``text`` itself when nothing matched, else a copy with each secret replaced by its
            marker (and any unpaired surrogate by U+FFFD).
        """
        if text in self._clean_texts:
            return text
        result = clean_text(text)  # the last line: no unencodable text reaches a trace or sink
        for value in self._match_values:
            if value in result:
                result = result.replace(value, redact_marker(value))
        lowered = fold_case(text)
        hinted = self._any_hint is not None and self._any_hint.search(lowered) is not None
        for rule in self._rules if hinted else self._always:
            if rule.may_match(lowered):
                result = rule.regex.sub(replace_secret, result)
        if result == text:
            if len(text) <= _CACHED_TEXT_CHARS:
                if len(self._clean_texts) >= _CACHE_LIMIT:
                    self._clean_texts.clear()
                self._clean_texts.add(text)
            return text
        return result

    def redact(self, value: Any) -> Any:
        """Redact a JSON-shaped value: secret keys at any depth, secrets inside every string.

        Tuples are treated as lists; other objects become their redacted ``repr``; containers
        nested deeper than the bounds allow are replaced by a marker (so cycles end).

        Args:
            value: Any value.

        Returns:
            ``value`` itself when nothing was redacted, else a redacted copy.
        """
        return self._redact(value, 0)

    def _redact(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict | list | tuple) and depth >= self.bounds.max_depth:
            return TOO_DEEP
        if isinstance(value, dict):
            return self._redact_mapping(value, depth)
        if isinstance(value, list | tuple):
            items = [self._redact(item, depth + 1) for item in value]
            unchanged = all(new is old for new, old in zip(items, value, strict=True))
            return value if unchanged else items
        try:
            text = repr(value)
        except Exception:  # a broken __repr__ must not break the trace
            text = f"<{type(value).__name__}>"
        return self.redact_text(text)

    def _redact_mapping(self, value: dict[Any, Any], depth: int) -> dict[Any, Any]:
        redacted: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            new_key = self.redact_text(key) if isinstance(key, str) else key
            if self.is_secret_key(key) and not _exempt(item):
                new_item: Any = redact_marker(item)
            else:
                new_item = self._redact(item, depth + 1)
            changed = changed or new_key is not key or new_item is not item
            redacted[new_key] = new_item
        return redacted if changed else value

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """Redact a structlog event dict in place (a processor; use it before any renderer).

        Args:
            logger: The wrapped logger (unused).
            method_name: The log method's name (unused).
            event_dict: The event.

        Returns:
            The same dict with secret keys and secret values redacted.
        """
        for key, value in list(event_dict.items()):
            if self.is_secret_key(key) and not _exempt(value):
                event_dict[key] = redact_marker(value)
            else:
                event_dict[key] = self._redact(value, 0)
        return event_dict

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Redactor):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def _identity(self) -> tuple[Any, ...]:
        return (self.defaults, self.keys, self.patterns, self.values, self._bounds)

    def __repr__(self) -> str:
        parts = [f"defaults={self.defaults}"]
        if self.keys:
            parts.append(f"keys={list(self.keys)}")
        if self.patterns:
            parts.append(f"patterns={[pattern.name for pattern in self.patterns]}")
        if self.values:
            parts.append(f"values=<{len(self.values)} hidden>")
        if self._bounds is not None:
            parts.append(f"bounds={self._bounds!r}")
        return f"Redactor({', '.join(parts)})"


def _exempt(value: Any) -> bool:
    """Numbers, booleans, ``None`` and existing markers are left as they are."""
    if value is None or isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and MARKER.fullmatch(value) is not None
