"""Redaction at its exact edges: keys, the processor, composition, bounds, depth and lengths."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ownloop import ConfigurationError
from ownloop.redaction import DEFAULT_BOUNDS, Bounds, Redactor, redact_marker

OPENAI_KEY = "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8Ae2Ui"
TOO_DEEP = "…[too deep, truncated]"
SMALL = Bounds(max_string=64, max_items=4, max_depth=3)


def test_a_secret_used_as_a_mapping_key_is_redacted() -> None:
    """A secret in a mapping key is replaced like one in a value; the entry is kept."""
    redacted = Redactor(values=["hunter22"]).redact({"user hunter22": 1, OPENAI_KEY: "x"})
    assert redacted == {f"user {redact_marker('hunter22')}": 1, redact_marker(OPENAI_KEY): "x"}


def test_a_non_string_key_is_kept_and_never_a_secret_key() -> None:
    """Integer keys pass through; only string keys can name secrets."""
    assert Redactor().redact({1: "a", 2: {"password": "pw-1"}}) == {
        1: "a",
        2: {"password": redact_marker("pw-1")},
    }
    assert Redactor().is_secret_key(7) is False


def test_the_processor_leaves_ordinary_values_alone() -> None:
    """As a structlog processor only secret keys and secret text change; other values stay."""
    event: dict[str, Any] = {"event": "hello", "user": "bob", "password": "pw-1", "n": 3}
    assert Redactor()(None, "info", event) == {
        "event": "hello",
        "user": "bob",
        "password": redact_marker("pw-1"),
        "n": 3,
    }


def test_the_processor_leaves_exempt_values_under_secret_keys() -> None:
    """Numbers, booleans, None and markers under a secret key are not re-marked by the processor."""
    marker = redact_marker("x")
    event: dict[str, Any] = {"token": 5, "secret": None, "auth": True, "password": marker}
    assert Redactor()(None, "info", dict(event)) == event


def test_the_processor_redacts_nested_values() -> None:
    """The processor redacts secret keys and secret text inside nested values of the event."""
    event: dict[str, Any] = {
        "payload": {"api_key": "k-123456", "items": [f"use {OPENAI_KEY}", {"token": "t-1"}]},
    }
    processed = Redactor()(None, "info", event)
    assert processed["payload"] == {
        "api_key": redact_marker("k-123456"),
        "items": [f"use {redact_marker(OPENAI_KEY)}", {"token": redact_marker("t-1")}],
    }


def test_the_processor_applies_the_depth_bound_from_the_event_level() -> None:
    """Each event value may nest max_depth containers; the event dict itself does not count."""
    redactor = Redactor(bounds=Bounds(max_depth=2))
    event: dict[str, Any] = {"a": {"b": {"c": {"d": 1}}}, "l": [[1]], "m": [[[1]]]}
    assert redactor(None, "info", event) == {
        "a": {"b": {"c": TOO_DEEP}},
        "l": [[1]],
        "m": [[TOO_DEEP]],
    }


def test_or_keeps_the_known_secret_values_of_both_sides() -> None:
    """The union a | b removes the literal secrets of a and of b."""
    left, right = Redactor(values=["alpha-1"]), Redactor(values=["bravo-2"], defaults=False)
    for combined in (left | right, right | left):
        assert combined.redact_text("alpha-1 bravo-2") == (
            f"{redact_marker('alpha-1')} {redact_marker('bravo-2')}"
        )
        assert combined.defaults is True


def test_or_keeps_keys_patterns_and_the_defaults_of_either_side() -> None:
    """The union a | b redacts both keys and patterns; defaults apply if either side has them."""
    left = Redactor(keys=["ssn"], defaults=False)
    right = Redactor(patterns=[r"EMP-\d{4}"], defaults=False)
    combined = left | right
    assert combined.redact({"ssn": "1", "note": "EMP-1234"}) == {
        "ssn": redact_marker("1"),
        "note": redact_marker("EMP-1234"),
    }
    assert combined.defaults is False
    assert combined.redact({"password": "pw"}) == {"password": "pw"}


def test_or_takes_the_tightest_bounds_or_the_only_ones() -> None:
    """The bounds of a | b are the tightest of both, or whichever side set bounds."""
    loose, tight = Bounds(max_depth=5), Bounds(max_string=100, max_depth=2)
    assert (Redactor(bounds=loose) | Redactor(bounds=tight)).bounds == Bounds(
        max_string=100, max_items=32, max_depth=2
    )
    assert (Redactor() | Redactor(bounds=tight)).bounds == tight
    assert (Redactor(bounds=tight) | Redactor()).bounds == tight
    assert (Redactor() | Redactor()).bounds == DEFAULT_BOUNDS
    assert (Redactor() | Redactor()) == Redactor()


def test_with_bounds_keeps_every_rule() -> None:
    """with_bounds changes only the bounds: built-in and own keys, patterns and values stay."""
    base = Redactor(keys=["ssn"], patterns=[r"EMP-\d{4}"], values=["alpha-1"])
    bounded = base.with_bounds(SMALL)
    assert bounded.bounds == SMALL
    assert bounded.redact({"password": "pw", "ssn": "1", "n": "EMP-1234 alpha-1"}) == {
        "password": redact_marker("pw"),
        "ssn": redact_marker("1"),
        "n": f"{redact_marker('EMP-1234')} {redact_marker('alpha-1')}",
    }
    bare = Redactor(defaults=False).with_bounds(SMALL)
    assert bare.redact({"password": "pw"}) == {"password": "pw"}


@pytest.mark.parametrize("defaults", [True, False])
def test_derived_redactors_keep_bounds_defaults_and_rules(defaults: bool) -> None:
    """with_keys, with_patterns and with_values keep the bounds, the defaults and earlier rules."""
    base = Redactor(keys=["ssn"], bounds=SMALL, defaults=defaults)
    derived = base.with_keys("pin").with_patterns(r"EMP-\d{4}").with_values("alpha-1")
    assert derived.bounds == SMALL
    assert derived.defaults is defaults
    assert derived.keys == ("ssn", "pin")
    assert derived.redact({"ssn": "1", "pin": "2", "n": "EMP-1234 alpha-1", "password": "p"}) == {
        "ssn": redact_marker("1"),
        "pin": redact_marker("2"),
        "n": f"{redact_marker('EMP-1234')} {redact_marker('alpha-1')}",
        "password": redact_marker("p") if defaults else "p",
    }


def test_with_keys_returns_the_same_redactor_for_the_same_keys() -> None:
    """Deriving with the same keys again gives the remembered redactor, still correct."""
    base = Redactor()
    first = base.with_keys("ssn")
    assert base.with_keys("ssn") is first
    assert base.with_keys("pin") is not first
    for index in range(80):
        derived = base.with_keys(f"k{index}")
        assert derived.is_secret_key(f"k{index}")
    assert base.with_keys("ssn").is_secret_key("ssn")


def test_nested_dicts_stop_exactly_at_the_depth_bound() -> None:
    """max_depth levels of dicts are kept, the next one becomes the too-deep marker."""
    redactor = Redactor(bounds=SMALL)
    assert redactor.redact({"a": {"b": {"c": 1}}}) == {"a": {"b": {"c": 1}}}
    assert redactor.redact({"a": {"b": {"c": {"d": 1}}}}) == {"a": {"b": {"c": TOO_DEEP}}}
    assert redactor.redact([[["x"]]]) == [[["x"]]]
    assert redactor.redact([[[["x"]]]]) == [[[TOO_DEEP]]]
    assert redactor.redact(({"k": ({"z": 1},)},)) == [{"k": [TOO_DEEP]}]


def test_a_cyclic_dict_ends_at_the_depth_bound() -> None:
    """A mapping that contains itself is cut at max_depth instead of recursing forever."""
    loop: dict[str, Any] = {"password": "pw-1"}
    loop["self"] = loop
    redacted = Redactor(bounds=SMALL).redact(loop)
    assert redacted == {
        "password": redact_marker("pw-1"),
        "self": {
            "password": redact_marker("pw-1"),
            "self": {"password": redact_marker("pw-1"), "self": TOO_DEEP},
        },
    }


@pytest.mark.parametrize("key", ["apikey", "APIKEY", "ApiKey", "x_api_key_id", "my-api-key"])
def test_joined_and_embedded_spellings_of_a_key_rule_match(key: str) -> None:
    """A key rule matches its words run together (apikey) and inside longer key names."""
    assert Redactor().is_secret_key(key)
    assert Redactor(keys=["employee_number"], defaults=False).is_secret_key(
        key.lower().replace("api", "employee").replace("key", "number")
    )


@pytest.mark.parametrize("key", ["api", "keys", "max_tokens", "apike", "", "monkey"])
def test_partial_words_of_a_key_rule_do_not_match(key: str) -> None:
    """Only whole words (or the rule's words run together) match: api, keys, monkey do not."""
    assert not Redactor().is_secret_key(key)


def test_key_answers_stay_right_past_the_cache_limit() -> None:
    """After more distinct keys than the cache holds, answers are still correct."""
    redactor = Redactor()
    for index in range(5000):
        assert redactor.is_secret_key(f"field_{index}") is False
    assert redactor.is_secret_key("password") is True
    assert redactor.is_secret_key("field_1") is False


def test_a_secret_of_exactly_the_minimum_length_is_accepted_and_removed() -> None:
    """A literal secret of 4 characters is allowed and removed; 3 characters are refused."""
    assert Redactor(values=["abcd"]).redact_text("xabcdx") == f"x{redact_marker('abcd')}x"
    with pytest.raises(ConfigurationError, match="at least 4 characters"):
        Redactor(values=["abc"])
    with pytest.raises(ConfigurationError, match="at least 4 characters"):
        Redactor(values=[1234])  # type: ignore[list-item]


def test_clean_text_answers_stay_right_past_the_cache_limit() -> None:
    """After more distinct clean texts than the cache holds, secrets are still found."""
    redactor = Redactor(values=["alpha-1"])
    for index in range(5000):
        text = f"plain {index}"
        assert redactor.redact_text(text) is text
    assert redactor.redact_text("alpha-1") == redact_marker("alpha-1")
    long_text = "y" * 300
    assert redactor.redact_text(long_text) is long_text
    assert redactor.redact_text(long_text) is long_text


def test_a_user_pattern_without_hints_applies_to_any_text() -> None:
    """A user pattern is tried on every text, even text with no built-in hint in it."""
    redactor = Redactor(patterns=[r"EMP-\d{4}"])
    assert redactor.redact_text("id EMP-1234") == f"id {redact_marker('EMP-1234')}"
    assert Redactor(defaults=False).redact_text(f"k {OPENAI_KEY}") == f"k {OPENAI_KEY}"


def test_unchanged_containers_are_returned_as_they_are() -> None:
    """Nothing redacted: the very same list, tuple and dict come back."""
    items = ["a", ("b", 1), {"c": [2.5, None, True]}]
    assert Redactor().redact(items) is items
    pair = ("a", "b")
    assert Redactor().redact(pair) is pair


def test_one_changed_item_makes_a_copy_and_keeps_the_rest() -> None:
    """A secret anywhere in a list makes a redacted copy; the input is not changed."""
    items = ["a", {"password": "pw"}, "b"]
    redacted = Redactor().redact(items)
    assert redacted == ["a", {"password": redact_marker("pw")}, "b"]
    assert items[1] == {"password": "pw"}


def test_the_repr_names_rules_and_bounds_but_no_values() -> None:
    """The repr lists defaults, keys, pattern names, a count of values and the bounds."""
    redactor = Redactor(
        keys=["ssn"], patterns=[r"EMP-\d{4}"], values=["alpha-1"], bounds=SMALL, defaults=False
    )
    text = repr(redactor)
    assert text.startswith("Redactor(defaults=False, keys=['ssn'], patterns=[")
    assert text.endswith(f", values=<1 hidden>, bounds={SMALL!r})")
    assert "alpha-1" not in text
    assert repr(Redactor()) == "Redactor(defaults=True)"


def test_equal_redactors_hash_alike() -> None:
    """Redactors with the same rules and bounds are equal and hash alike; others differ."""
    assert Redactor(keys=["a"]) == Redactor(keys=["a"])
    assert hash(Redactor(keys=["a"], bounds=SMALL)) == hash(Redactor(keys=["a"], bounds=SMALL))
    assert Redactor(keys=["a"]) != Redactor(keys=["b"])
    assert Redactor(bounds=SMALL) != Redactor()
    assert Redactor(defaults=False) != Redactor()
    assert Redactor() != "Redactor()"


@given(st.text(min_size=4, max_size=12).filter(lambda s: s.strip() == s and len(s) >= 4))
def test_any_known_value_is_gone_from_any_text_around_it(secret: str) -> None:
    """A literal secret never survives redaction, whatever surrounds it."""
    redactor = Redactor(values=[secret], defaults=False)
    assert secret not in redactor.redact_text(f"<{secret}>")
    assert secret not in str(redactor.redact({"k": [f"a{secret}b"]}))


def test_key_value_text_is_redacted_only_for_rule_keys() -> None:
    """Text key=value pairs are redacted for rule keys only; no rules, no change."""
    text = "user=bob password=hunter2 ssn=123-45"
    assert (
        Redactor().redact_text(text) == f"user=bob password={redact_marker('hunter2')} ssn=123-45"
    )
    assert Redactor(keys=["ssn"], defaults=False).redact_text(text) == (
        f"user=bob password=hunter2 ssn={redact_marker('123-45')}"
    )
    empty = Redactor(defaults=False)
    assert empty.redact_text(text) is text
    spaced = "a = b, c : d"
    assert empty.redact_text(spaced) is spaced
    assert empty.redact({"password": "x", "note": text}) == {"password": "x", "note": text}


@pytest.mark.parametrize("key", ["passWord", "pass_word", "Api_Key", "accessKey"])
def test_a_key_split_into_other_words_still_matches_when_joined(key: str) -> None:
    """A key whose words run together spell a rule (passWord -> password) is a secret key."""
    assert Redactor().is_secret_key(key)
