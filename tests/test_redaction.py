"""Redaction rules and bounds: secret keys, secret shapes, literal values, markers and cuts."""

from __future__ import annotations

import json
import re

import pytest

from ownloop import ConfigurationError
from ownloop.redaction import (
    DEFAULT_BOUNDS,
    Bounds,
    Redactor,
    SecretPattern,
    bound_value,
    cut_text,
    redact_marker,
    redact_sensitive,
)

OPENAI_KEY = "sk-proj-Zq8f0Lr2Xw7Yt3Vb9Nm4Kc6Hd1Jg5Ps8Ae2Ui"
MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"key {OPENAI_KEY} rejected", OPENAI_KEY),
        ("old style sk-abcdefghijklmnopqrstuvwxyz0123", "sk-abcdefghijklmnopqrstuvwxyz0123"),
        ("Authorization: Bearer ya29.a0AfH6SMB-canary_token", "ya29.a0AfH6SMB-canary_token"),
        ("header bearer abcdefghijklmnop1234 sent", "abcdefghijklmnop1234"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl end",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl",
        ),
        ("aws AKIAZ7CANARYEXAMPLE2 here", "AKIAZ7CANARYEXAMPLE2"),
        ("temporary ASIAZ7CANARYEXAMPLE3.", "ASIAZ7CANARYEXAMPLE3"),
        ("db postgres://admin:S3cretPw@db.internal:5432/app", "admin:S3cretPw"),
        (
            "pat ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        ("slack xoxb-123456789012-abcdefghij", "xoxb-123456789012-abcdefghij"),
        (
            "google AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        ),
        ("login password=hunter2&user=bob", "hunter2"),
        ('{"api_key": "plain-value-123", "n": 1}', "plain-value-123"),
        ("client_secret: swordfish!", "swordfish!"),
        ('escaped {\\"token\\": \\"tok-in-json-text\\"}', "tok-in-json-text"),
    ],
)
def test_secret_shapes_in_text_are_replaced_by_markers(text: str, secret: str) -> None:
    """Every built-in secret shape is replaced by a marker, and the text around it is kept."""
    redacted = Redactor().redact_text(text)
    assert secret not in redacted
    assert MARKER.search(redacted)
    assert redacted.split(" ", 1)[0] == text.split(" ", 1)[0]


def test_pem_private_keys_are_removed_whole_even_when_cut_before_their_end() -> None:
    """A PEM private key block disappears entirely, also when truncation removed its END line."""
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7canary"
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    assert Redactor().redact_text(f"key:\n{block}\ndone").endswith("\ndone")
    assert body not in Redactor().redact_text(f"key:\n{block}\ndone")
    assert body not in Redactor().redact_text(f"cut {block[:60]}…[900 chars, truncated]")


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=512 and input_tokens: 12",
        "the author of the task",
        "ask-questions-first and task-oriented agents",
        "see https://example.com/docs?page=2",
        "bearer of bad news",
        "ValueError: the document R-02 could not be read",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Text without secrets comes back as the very same string."""
    assert Redactor().redact_text(text) is text


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "X-Api-Key",
        "OPENAI_API_KEY",
        "Authorization",
        "access_token",
        "refreshToken",
        "password",
        "DB_PASSWORD",
        "client_secret",
        "Set-Cookie",
        "private_key",
        "aws_secret_access_key",
        "credentials",
    ],
)
def test_secret_key_names_match_word_by_word(key: str) -> None:
    """Key names match case-insensitively, in any separator style, inside longer names."""
    assert Redactor().is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "input_tokens", "tokens", "author", "tool", 3, None])
def test_ordinary_key_names_do_not_match(key: object) -> None:
    """Words that merely contain a secret word (``tokens``, ``author``) are not secret keys."""
    assert not Redactor().is_secret_key(key)


def test_values_under_secret_keys_are_redacted_at_any_depth() -> None:
    """A secret key hides its whole value, nested or not, while numbers and booleans stay."""
    payload = {
        "query": "weather",
        "auth": {"api_key": "abc123", "password": 1234, "enabled": True},
        "items": [{"token": ["a", "b"]}, {"name": "x"}],
    }
    redacted = Redactor().redact(payload)
    assert redacted["query"] == "weather"
    assert MARKER.fullmatch(redacted["auth"])
    assert MARKER.fullmatch(redacted["items"][0]["token"])
    assert redacted["items"][1] is payload["items"][1]
    only_numbers = Redactor().redact({"password": 1234, "secret": None, "token": False})
    assert only_numbers == {"password": 1234, "secret": None, "token": False}


def test_redaction_returns_the_same_object_when_nothing_is_secret() -> None:
    """A clean payload comes back as the very same object, so callers can skip re-validation."""
    payload = {"a": [1, "two", {"three": 3.0}], "b": ("x", "y")}
    assert Redactor().redact(payload) is payload


def test_equal_secrets_get_equal_markers_across_rules() -> None:
    """A key rule, a text pattern and redact_marker give one secret the same marker."""
    redactor = Redactor()
    by_key = redactor.redact({"password": "hunter2"})["password"]
    in_text = redactor.redact_text("password=hunter2")
    assert by_key == redact_marker("hunter2")
    assert in_text == f"password={by_key}"
    assert redact_marker("hunter2") != redact_marker("hunter3")


def test_markers_are_never_redacted_again() -> None:
    """Redacting an already redacted value changes nothing (markers keep their digest)."""
    redactor = Redactor()
    once = redactor.redact({"token": "abc", "url": "https://u:p@h", "text": "password=x1"})
    assert redactor.redact(once) == once


def test_user_keys_patterns_and_values_extend_the_defaults() -> None:
    """Keys, patterns and literal values given by the application are redacted too."""
    redactor = (
        Redactor(keys=["ssn"])
        .with_keys("account_number")
        .with_patterns(r"ACME-\d{6}", SecretPattern("ticket", r"ticket=(?P<secret>\w+)"))
        .with_values("correct horse battery")
    )
    payload = {
        "ssn": "078-05-1120",
        "AccountNumber": "12345678",
        "note": "order ACME-123456 ticket=T42 by correct horse battery, key " + OPENAI_KEY,
    }
    redacted = redactor.redact(payload)
    flat = json.dumps(redacted)
    for secret in ("078-05-1120", "12345678", "ACME-123456", "T42", "correct horse", OPENAI_KEY):
        assert secret not in flat
    assert "ticket=[redacted:" in redacted["note"]


def test_defaults_can_be_left_out() -> None:
    """With defaults=False only the given rules apply."""
    redactor = Redactor(keys=["pin"], defaults=False)
    redacted = redactor.redact({"pin": "1234", "password": "kept", "text": OPENAI_KEY})
    assert redacted["password"] == "kept"
    assert redacted["text"] == OPENAI_KEY
    assert MARKER.fullmatch(redacted["pin"])


def test_redactors_compose_with_or_and_have_a_neutral_element() -> None:
    """``a | b`` has both rule sets and the tightest bounds; an empty redactor changes nothing."""
    left = Redactor(keys=["ssn"], bounds=Bounds(max_string=100))
    right = Redactor(patterns=[r"ACME-\d+"], values=["swordfish"], bounds=Bounds(max_items=5))
    both = left | right
    assert both.keys == ("ssn",)
    assert [pattern.name for pattern in both.patterns] == [r"ACME-\d+"]
    assert both.bounds == Bounds(max_string=100, max_items=5)
    neutral = Redactor(defaults=False)
    assert left | neutral == left
    assert neutral | left == left
    assert (Redactor(defaults=False) | Redactor(defaults=False)).bounds == DEFAULT_BOUNDS


def test_redactor_repr_shows_rules_but_never_values() -> None:
    """The repr names the added keys and patterns and counts the literal values."""
    redactor = Redactor(keys=["ssn"], patterns=[r"ACME-\d+"], values=["swordfish"])
    text = repr(redactor.with_bounds(Bounds(max_string=64)))
    assert "keys=['ssn']" in text
    assert "ACME" in text
    assert "values=<1 hidden>" in text
    assert "swordfish" not in text
    assert "max_string=64" in text
    assert repr(Redactor()) == "Redactor(defaults=True)"


def test_with_methods_return_new_redactors() -> None:
    """Adding rules never changes the original redactor; with_keys reuses equal derivations."""
    base = Redactor()
    extended = base.with_keys("pin")
    assert not base.is_secret_key("pin")
    assert extended.is_secret_key("pin")
    assert base.with_keys("pin") is extended
    assert base == Redactor()
    assert hash(base) == hash(Redactor())
    assert base != "Redactor()"


def test_invalid_rules_are_configuration_errors() -> None:
    """A pattern that does not compile or a too short literal secret is refused at once."""
    with pytest.raises(ConfigurationError, match="does not compile"):
        Redactor(patterns=["(unclosed"])
    with pytest.raises(ConfigurationError, match="at least 4"):
        Redactor(values=["abc"])


def test_a_pattern_matching_empty_text_redacts_nothing_extra() -> None:
    """A user pattern that can match the empty string does not scatter markers through text."""
    assert Redactor(patterns=[r"x*"], defaults=False).redact_text("abc") == "abc"


def test_redactor_is_a_structlog_processor() -> None:
    """Called as a processor, it redacts secret keys and secret text of an event dict."""
    event = {"event": f"login with {OPENAI_KEY}", "password": "pw-1", "attempt": 2}
    processed = Redactor()(None, "info", event)
    assert OPENAI_KEY not in processed["event"]
    assert MARKER.fullmatch(processed["password"])
    assert processed["attempt"] == 2


def test_objects_are_redacted_through_their_repr() -> None:
    """Values that are not JSON become their redacted repr, and a broken repr does not raise."""

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    class Holder:
        def __repr__(self) -> str:
            return f"Holder(key={OPENAI_KEY})"

    assert OPENAI_KEY not in Redactor().redact([Holder()])[0]
    assert Redactor().redact(Broken()) == "<Broken>"


def test_strings_are_cut_with_a_marker_within_the_limit() -> None:
    """A long string is cut to exactly the limit, marker included; a short one is kept."""
    text = "x" * 1000
    cut = cut_text(text, 100)
    assert len(cut) == 100
    assert cut.endswith("…[1000 chars, truncated]")
    assert cut_text("short", 100) == "short"


def test_lists_mappings_and_depth_are_bounded_with_markers() -> None:
    """Lists and mappings keep max_items entries (the last a marker); deep nesting is cut."""
    bounds = Bounds(max_string=40, max_items=3, max_depth=2)
    assert bound_value(list(range(10)), bounds) == [0, 1, "…[10 items, truncated]"]
    assert bound_value({str(i): i for i in range(5)}, bounds) == {
        "0": 0,
        "1": 1,
        "…": "[5 entries, truncated]",
    }
    assert bound_value({"a": {"b": {"c": 1}}}, bounds) == {"a": {"b": "…[too deep, truncated]"}}
    assert bound_value({1: "x", None: "y"}, bounds) == {"1": "x", "None": "y"}


def test_bounding_is_idempotent_and_keeps_identity() -> None:
    """A bounded value bounds to itself, and a value within bounds is the very same object."""
    bounds = Bounds(max_string=40, max_items=3, max_depth=2)
    once = bound_value({"a": ["x" * 100, [1, [2]]], "b": list(range(9))}, bounds)
    assert bound_value(once, bounds) == once
    small = {"a": [1, "two"], "b": ("x",)}
    assert bound_value(small) is small


def test_cyclic_structures_end_at_the_depth_bound() -> None:
    """A list that contains itself is cut at the depth bound instead of recursing forever."""
    loop: list[object] = []
    loop.append(loop)
    assert "too deep" in json.dumps(bound_value(loop))
    assert "too deep" in json.dumps(Redactor().redact(loop))


def test_bounds_are_checked_compared_and_usable_as_a_processor() -> None:
    """Out-of-range bounds are refused; bounds compare by value; they bound an event dict."""
    for kwargs in ({"max_string": 10}, {"max_items": 1}, {"max_depth": 0}, {"max_depth": 101}):
        with pytest.raises(ConfigurationError):
            Bounds(**kwargs)
    assert Bounds() == DEFAULT_BOUNDS
    assert hash(Bounds()) == hash(DEFAULT_BOUNDS)
    assert Bounds() != "Bounds()"
    assert repr(Bounds()) == "Bounds(max_string=512, max_items=32, max_depth=6)"
    assert Bounds(max_string=40)(None, "info", {"event": "y" * 90})["event"].endswith("truncated]")


def test_sensitive_arguments_are_redacted_in_mappings_and_in_json_text() -> None:
    """Sensitive parameters are hidden whether the arguments are a mapping or JSON text."""
    as_dict = redact_sensitive({"user": "bob", "pin": "4242"}, {"pin"})
    assert as_dict == {"user": "bob", "pin": redact_marker("4242")}
    as_text = json.loads(redact_sensitive('{"user": "bob", "pin": "4242"}', {"pin"}))
    assert as_text == as_dict
    assert redact_sensitive('{"user": "bob"}', {"pin"}) == '{"user": "bob"}'
    assert redact_sensitive("[1, 2]", {"pin"}) == "[1, 2]"
    assert redact_sensitive(["pin"], {"pin"}) == ["pin"]
    assert redact_sensitive({"pin": "4242"}, ()) == {"pin": "4242"}


def test_sensitive_arguments_that_do_not_parse_are_hidden_whole() -> None:
    """Unparseable argument text of a tool with sensitive parameters is replaced entirely."""
    assert MARKER.fullmatch(redact_sensitive('{"pin": "4242"', {"pin"}))


def test_markers_survive_odd_values() -> None:
    """A marker can be made for values JSON cannot encode (cycles, mixed keys, surrogates)."""
    loop: list[object] = []
    loop.append(loop)
    for value in (loop, {1: "a", "b": 2}, "\ud800"):
        assert MARKER.fullmatch(redact_marker(value))


def test_secret_patterns_compare_by_name_and_regex() -> None:
    """Patterns are equal when name, regex and hints are; the repr shows name and regex."""
    pattern = SecretPattern("ticket", r"T-\d+", hints=["t-"])
    assert pattern == SecretPattern("ticket", re.compile(r"T-\d+"), hints=["T-"])
    assert pattern != SecretPattern("ticket", r"T-\d+")
    assert pattern != "ticket"
    assert hash(pattern) == hash(SecretPattern("ticket", r"T-\d+"))
    assert repr(pattern) == "SecretPattern('ticket', 'T-\\\\d+')"


def test_redactors_only_combine_with_redactors() -> None:
    """``|`` with anything but a redactor is a type error, and equality is by rules."""
    with pytest.raises(TypeError):
        Redactor() | 3  # type: ignore[operator]
    assert Redactor() != 3


def test_a_redactor_stays_correct_after_many_distinct_inputs() -> None:
    """Its caches are bounded: thousands of keys, texts and derivations change no answer."""
    redactor = Redactor()
    for number in range(4200):
        assert not redactor.is_secret_key(f"field_{number}")
        assert redactor.redact_text(f"text {number}") == f"text {number}"
    for number in range(70):
        assert redactor.with_keys(f"key_{number}").is_secret_key(f"key_{number}")
    assert redactor.is_secret_key("password")
    assert redactor.redact_text(f"use {OPENAI_KEY}") != f"use {OPENAI_KEY}"


def test_keys_that_cannot_be_printed_are_named_by_type() -> None:
    """A mapping key whose str() raises becomes a placeholder instead of an error."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

        def __hash__(self) -> int:
            return 1

    assert bound_value({Unprintable(): 1}) == {"<Unprintable>": 1}


@pytest.mark.parametrize(
    "key", ["\u017fecret", "ap\u0131_key", "cl\u0130ent_secret", "PA\u017f\u017fWORD"]
)
def test_a_key_spelt_with_letters_read_as_ascii_letters_is_still_a_key(key: str) -> None:
    """A long s or a dotless i reads as `s` or `i` to the key rule, and to its hints too."""
    redacted = Redactor().redact_text(f"{key}=hunter2hunter2")
    assert "hunter2" not in redacted
    assert redacted.startswith(f"{key}=[redacted:")


def test_a_value_that_is_itself_a_key_before_its_sign_leaves_that_key_its_value() -> None:
    """`token = password = hunter2…`: the password's value is redacted, not the word password."""
    redacted = Redactor().redact_text("token = password = hunter2hunter2 ")
    assert "hunter2" not in redacted
    assert redacted.startswith("token = password = [redacted:")


def _cased_characters() -> str:
    """Every character of the Basic Multilingual Plane that has a case, with its case partners."""
    chars = {chr(code) for code in range(0x10000) if not 0xD800 <= code < 0xE000}
    cased = {char for char in chars if char.lower() != char or char.upper() != char}
    cased |= {partner for char in cased for partner in char.lower() + char.upper()}
    return "".join(sorted(cased | set("\u0131\u017f\u03c2\u00b5\u0345\u1fbe\u1e9b\ufb05\ufb06")))


def test_fold_case_tells_apart_exactly_what_case_insensitive_re_tells_apart() -> None:
    """Two characters fold alike exactly when `re` ignoring case reads them as one, only then."""
    from ownloop.redaction._patterns import fold_case

    pool = _cased_characters()
    folded = fold_case(pool)
    assert len(folded) == len(pool)  # one character for one: positions stay
    assert folded == "".join(fold_case(char) for char in pool)  # no context (final sigma)
    classes: dict[str, set[str]] = {}
    for char, fold in zip(pool, folded, strict=True):
        classes.setdefault(fold, set()).add(char)
    for char, fold in zip(pool, folded, strict=True):
        assert set(re.findall(re.escape(char), pool, re.IGNORECASE)) == classes[fold], char
    assert fold_case("Straße ΚΛΕΙΣ") == "straße κλεισ"


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (
            SecretPattern(
                "code", r"(?i)\u03ba\u03c9\u03b4\u03b9\u03ba\u03bf\u03c2\d+", ["ΚΩΔΙΚΟΣ"]
            ),
            "the \u03ba\u03c9\u03b4\u03b9\u03ba\u03bf\u03c31234 here",
        ),
        (SecretPattern("id", r"\u0130d\d+", hints=["\u0130d"]), "an \u0130d1234 here"),
        (SecretPattern("sid", r"(?i)\u017fid\d+", hints=["\u017fid"]), "a SID1234 here"),
    ],
)
def test_a_hint_is_found_wherever_its_pattern_matches(pattern: SecretPattern, text: str) -> None:
    """A hint with a final sigma, a dotted capital I or a long s still lets its pattern run."""
    assert pattern.regex.search(text)
    redacted = Redactor(defaults=False, patterns=[pattern]).redact_text(text)
    assert "1234" not in redacted
