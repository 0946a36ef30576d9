"""The redaction modules' contract, pinned where mutation testing found it unpinned.

Markers (`redact_marker`, `redact_sensitive`), bounds (`Bounds`, `bound_value`, `cut_text`) and
the built-in rules (`DEFAULT_KEYS`, `DEFAULT_PATTERNS`, `SecretPattern`), through the public API.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

import pytest

from ownloop import ConfigurationError
from ownloop.redaction import (
    Bounds,
    Redactor,
    SecretPattern,
    bound_value,
    cut_text,
    redact_marker,
    redact_sensitive,
)

MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")


class Unprintable:
    """A value whose ``str`` raises and whose ``repr`` is text UTF-8 cannot encode."""

    def __str__(self) -> str:
        raise TypeError("no str")

    def __repr__(self) -> str:
        return "\ud800"


def test_a_marker_is_the_sha256_of_the_values_json_cut_to_8_digits() -> None:
    """The documented digest: whoever holds a value can recompute its marker from its JSON."""
    for value, text in (("hunter2", '"hunter2"'), ({"b": 1, "a": [2]}, '{"a": [2], "b": 1}')):
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        assert redact_marker(value) == f"[redacted:{digest}]"


def test_equal_mappings_get_one_marker_whatever_their_key_order() -> None:
    """Two equal mappings built in another key order are marked alike."""
    assert redact_marker({"a": 1, "b": 2}) == redact_marker({"b": 2, "a": 1})


def test_a_value_json_cannot_encode_is_marked_as_its_text() -> None:
    """A datetime (not JSON) gets the marker of its text, so the same instant always looks alike."""
    at = dt.datetime(2026, 12, 2, 16, 0, tzinfo=dt.UTC)
    assert redact_marker(at) == redact_marker(str(at))
    assert redact_marker({"at": at}) == redact_marker({"at": str(at)})


def test_a_value_whose_text_cannot_be_encoded_still_gets_a_marker() -> None:
    """A value whose str raises and whose repr is a lone surrogate is marked, not raised on."""
    assert MARKER.fullmatch(redact_marker([Unprintable()]))
    assert redact_marker([Unprintable()]) == redact_marker([Unprintable()])


def test_sensitive_json_arguments_keep_other_text_as_written() -> None:
    """Redacting a sensitive argument in JSON text leaves the other values' letters unescaped."""
    text = redact_sensitive('{"user": "zoë", "pin": "4242"}', {"pin"})
    assert '"zoë"' in text
    assert json.loads(text) == {"user": "zoë", "pin": redact_marker("4242")}


# Every built-in key, run together as one word (``clientsecret``), which only its own rule matches.
BUILT_IN_KEYS = [
    "accesskey",
    "apikey",
    "auth",
    "authorization",
    "clientsecret",
    "cookie",
    "credential",
    "credentials",
    "encryptionkey",
    "passphrase",
    "passwd",
    "password",
    "privatekey",
    "secret",
    "sessionid",
    "setcookie",
    "signingkey",
    "token",
]


@pytest.mark.parametrize("key", BUILT_IN_KEYS)
def test_every_built_in_key_is_secret_in_a_mapping_and_in_text(key: str) -> None:
    """Each built-in key name hides its value, as a mapping key and as ``key=value`` in text."""
    redactor = Redactor()
    assert redactor.redact({key: "v4lue"}) == {key: redact_marker("v4lue")}
    assert redactor.redact_text(f"{key}=v4lue") == f"{key}={redact_marker('v4lue')}"


@pytest.mark.parametrize(
    "prefix", ["AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "APKA"]
)
def test_every_aws_key_prefix_is_recognised(prefix: str) -> None:
    """An AWS access key id of each known prefix is hidden wherever it appears in text."""
    key = f"{prefix}Z7CANARYEXAMPLE2"
    assert Redactor().redact_text(f"id {key} here") == f"id {redact_marker(key)} here"


@pytest.mark.parametrize("prefix", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"])
def test_every_github_token_prefix_is_recognised(prefix: str) -> None:
    """A GitHub token of each kind (classic, OAuth, user, server, refresh, fine-grained) goes."""
    token = prefix + "abcdefghijklmnopqrstuvwxyz0123456789"
    assert Redactor().redact_text(f"pat {token}.") == f"pat {redact_marker(token)}."


@pytest.mark.parametrize(
    ("bound", "lowest", "highest", "message"),
    [
        ("max_string", 40, None, "Bounds.max_string must be >= 40"),
        ("max_items", 2, None, "Bounds.max_items must be >= 2"),
        ("max_depth", 1, 100, "Bounds.max_depth must be between 1 and 100"),
    ],
)
def test_bounds_accept_exactly_their_range(
    bound: str, lowest: int, highest: int | None, message: str
) -> None:
    """Each bound accepts its lowest (and highest) value and refuses one past it or a fraction."""
    assert getattr(Bounds(**{bound: lowest}), bound) == lowest
    refused: list[float] = [lowest - 1, lowest + 0.5]
    if highest is not None:
        assert getattr(Bounds(**{bound: highest}), bound) == highest
        refused.append(highest + 1)
    for value in refused:
        with pytest.raises(ConfigurationError) as error:
            Bounds(**{bound: value})
        assert str(error.value) == message


def test_with_less_room_than_its_marker_a_cut_string_is_the_marker_alone() -> None:
    """A string cut to fewer characters than the marker keeps no prefix, only the marker."""
    assert cut_text("abcdefghij" * 5, 10) == "…[50 chars, truncated]"
    assert cut_text("x" * 41, 40) == "x" * 18 + "…[41 chars, truncated]"
    assert cut_text("x" * 40, 40) == "x" * 40


def test_bounds_compare_only_with_bounds() -> None:
    """Bounds are equal to equal bounds and never to another kind of value."""
    assert (Bounds() == object()) is False
    assert (Bounds() != object()) is True
    assert Bounds(max_items=3) != Bounds(max_items=4)
    assert Bounds(max_string=41) != Bounds(max_string=40)
    assert Bounds(max_depth=3) != Bounds(max_depth=4)


def test_a_list_or_mapping_of_exactly_max_items_is_kept_whole() -> None:
    """max_items items or entries are kept as they are; one more keeps max_items - 1, a marker."""
    bounds = Bounds(max_items=3)
    three, four = [1, 2, 3], [1, 2, 3, 4]
    assert bound_value(three, bounds) is three
    assert bound_value(four, bounds) == [1, 2, "…[4 items, truncated]"]
    entries = {"a": 1, "b": 2, "c": 3}
    assert bound_value(entries, bounds) is entries
    assert bound_value({**entries, "d": 4}, bounds) == {
        "a": 1,
        "b": 2,
        "…": "[4 entries, truncated]",
    }


def test_a_tuple_is_bounded_as_a_list_and_kept_when_within_bounds() -> None:
    """A tuple within bounds is the same tuple; a tuple with a cut item becomes a list."""
    pair = ("a", 1)
    assert bound_value(pair) is pair
    assert bound_value(("x" * 100, 1), Bounds(max_string=40)) == [
        "x" * 17 + "…[100 chars, truncated]",
        1,
    ]
    assert bound_value(tuple(range(5)), Bounds(max_items=2)) == [0, "…[5 items, truncated]"]


def test_a_mapping_with_a_cut_key_or_value_or_a_non_string_key_is_a_copy() -> None:
    """Any changed key or value makes a new mapping; the input stays as it was."""
    bounds = Bounds(max_string=40)
    long = "k" * 50
    by_key = {long: 1}
    assert bound_value(by_key, bounds) == {"k" * 18 + "…[50 chars, truncated]": 1}
    assert by_key == {long: 1}
    by_value = {"a": long}
    assert bound_value(by_value, bounds) == {"a": cut_text(long, 40)}
    assert by_value == {"a": long}
    by_number = {1: "a"}
    assert bound_value(by_number, bounds) == {"1": "a"}
    at = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
    assert bound_value({at: 1}, bounds) == {"2026-12-02 00:00:00+00:00": 1}  # str, not repr


def test_distinct_bounds_and_patterns_hash_apart() -> None:
    """Bounds and patterns that differ hash differently, so sets and caches of them stay fast."""
    assert len({hash(Bounds(max_items=items)) for items in range(2, 50)}) == 48
    patterns = {hash(SecretPattern(f"p{index}", rf"P{index}-\d+")) for index in range(48)}
    assert len(patterns) == 48


def test_a_compiled_pattern_is_used_as_it_is() -> None:
    """A compiled regex given as a pattern keeps its flags (here: ignoring case)."""
    compiled = re.compile(r"emp-\d{4}", re.IGNORECASE)
    assert SecretPattern("employee", compiled).regex is compiled
    assert Redactor(patterns=[compiled]).redact_text("id EMP-1234") == (
        f"id {redact_marker('EMP-1234')}"
    )


def test_values_json_cannot_encode_still_get_markers_of_their_own() -> None:
    """Different cyclic or mixed-key values get different markers (their repr is digested)."""
    first: list[object] = [1]
    first.append(first)
    second: list[object] = [2]
    second.append(second)
    assert redact_marker(first) != redact_marker(second)
    assert redact_marker({1: "a", "b": 2}) != redact_marker({1: "a", "b": 3})


def test_json_arguments_with_nothing_sensitive_are_returned_as_written() -> None:
    """Argument text without a sensitive key is the same text, however it is spaced."""
    for text in ('{"user":"bob"}', '["pin",1]', '"pin"', "42"):
        assert redact_sensitive(text, {"pin"}) == text
    assert json.loads(redact_sensitive('{"pin":"1","user":"bob"}', {"pin"})) == {
        "pin": redact_marker("1"),
        "user": "bob",
    }


def test_patterns_compare_only_with_patterns() -> None:
    """A secret pattern is never equal to another kind of value, even its own regex text."""
    pattern = SecretPattern("ticket", r"T-\d+")
    assert (pattern == r"T-\d+") is False
    assert (pattern != object()) is True


def test_a_regex_that_does_not_compile_is_refused_with_its_error() -> None:
    """A pattern given as broken regex text is a configuration error that quotes it and why."""
    with pytest.raises(ConfigurationError) as error:
        Redactor(patterns=["(unclosed"])
    assert str(error.value) == (
        "redaction pattern '(unclosed' does not compile: "
        "missing ), unterminated subpattern at position 0"
    )


@pytest.mark.parametrize("scheme", ["Bearer", "basic", "TOKEN"])
def test_an_assigned_credential_with_its_scheme_hides_the_credential(scheme: str) -> None:
    """``authorization: Basic <credential>`` hides the credential together with its scheme."""
    text = f"authorization: {scheme} dXNlcjpwYXNz"
    assert "dXNlcjpwYXNz" not in Redactor().redact_text(text)
    assert Redactor().redact_text(text) == (
        f"authorization: {redact_marker(f'{scheme} dXNlcjpwYXNz')}"
    )


class Holder:
    """A value that is not JSON, with a long repr."""

    def __repr__(self) -> str:
        return "Holder(" + "x" * 60 + ")"


class BrokenRepr:
    """A value whose repr raises."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_any_other_value_is_bounded_as_its_repr() -> None:
    """A value that is not JSON becomes its repr, cut to max_string; a broken repr its type."""
    assert bound_value(Holder(), Bounds(max_string=40)) == cut_text(repr(Holder()), 40)
    assert bound_value([Holder()]) == [repr(Holder())]
    assert bound_value(BrokenRepr()) == "<BrokenRepr>"


def test_nested_lists_stop_exactly_at_the_depth_bound() -> None:
    """Lists nest max_depth levels; the next level is the too-deep marker."""
    bounds = Bounds(max_depth=2)
    kept = [[1]]
    assert bound_value(kept, bounds) is kept
    assert bound_value([[[1]]], bounds) == [["…[too deep, truncated]"]]


class Name(str):
    """A str subclass used as a mapping key."""

    __slots__ = ()


def test_a_mapping_of_exactly_max_items_with_a_cut_value_keeps_every_key() -> None:
    """Cutting a value of a full mapping drops no entry, and a str subclass key is kept as it is."""
    bounds = Bounds(max_string=40, max_items=3)
    full = {"a": "x" * 60, "b": 2, "c": 3}
    assert bound_value(full, bounds) == {"a": cut_text("x" * 60, 40), "b": 2, "c": 3}
    named = {Name("a"): 1}
    assert bound_value(named, bounds) is named


def test_argument_text_that_does_not_parse_is_marked_as_itself() -> None:
    """Broken argument text is replaced by its own marker, so two different texts differ."""
    assert redact_sensitive('{"pin": "1"', {"pin"}) == redact_marker('{"pin": "1"')
    assert redact_sensitive('{"pin": "2"', {"pin"}) != redact_sensitive('{"pin": "1"', {"pin"})
