"""`StreamRedactor`'s contract, pinned where the broader stream tests leave it loose.

Each test names one behaviour of the public `StreamRedactor` (what it releases, what it holds,
what its searches read as `scanned` counts it); together they kill the mutants of
``ownloop/redaction/_stream.py`` that the property tests of ``test_redaction_stream.py`` miss.
"""

from __future__ import annotations

import re

import pytest

from ownloop.redaction import RESCAN_FLOOR, Redactor, SecretPattern, StreamRedactor

OPENAI_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"


def test_each_secret_words_window_reads_back_to_its_own_words_start() -> None:
    """Two words holding a secret after a bracket: each window reads back to its word's start."""
    streamed = StreamRedactor(Redactor())
    text = f"({OPENAI_KEY}) plain words here [{OPENAI_KEY}] "
    released = streamed.feed(text)
    assert released == Redactor().redact_text(text)
    assert OPENAI_KEY not in released
    # the held text once, no stretch before its final space, then each bracket read back
    assert streamed.scanned == len(text) + 2
    assert streamed.held == 0


def test_a_lone_surrogate_in_held_text_is_searched_for_the_rules_literals() -> None:
    """Text holding a lone surrogate is still searched for the rules' literals, and released."""
    rules = Redactor()
    text = "note \ud800 password = hunter2hunter2 then more words "
    streamed = StreamRedactor(rules)
    released = streamed.feed(text)
    assert "hunter2" not in released
    assert released + streamed.end() == rules.redact_text(text)


def test_a_url_without_credentials_is_not_read_back_for_its_word() -> None:
    """A URL word without an ``@`` (in it or in the text) is released without reading its word."""
    for text in (
        "see https://example.org/guide now ",
        "see https://example.org/x mail me@x.org ",
        "mail me@x.org see https://example.org/x ",
    ):
        streamed = StreamRedactor(Redactor())
        assert streamed.feed(text) == text
        # the held text once, and nothing read back from "://" to the start of "https"
        assert streamed.scanned == len(text)


def test_a_sign_after_a_leading_space_is_tried_from_the_start() -> None:
    """A sign right after a leading space: the key=value rule reads the key word after it once."""
    text = " =password "
    streamed = StreamRedactor(Redactor())
    assert streamed.feed(text) == " "
    assert streamed.held == len(text) - 1
    # 11 for the held text; at the sign: one try at 0; at the trailing space: 9 read back to the
    # sign, tries at 1 and 2 (the pending key); then 1 read back for the cut after the space
    assert streamed.scanned == 11 + 1 + 9 + 2 + 1


def test_a_learned_value_with_a_space_a_newline_and_a_tab_is_held_until_whole() -> None:
    """A learned value holding a space, a newline and a tab is held until it is whole."""
    value = "one two\nthree\tfour"
    rules = Redactor().with_values(value)
    streamed = StreamRedactor(rules)
    text = f"see {value} after "
    pieces = [text[at : at + 3] for at in range(0, len(text), 3)]
    released = [streamed.feed(piece) for piece in pieces]
    joined = "".join(released) + streamed.end()
    assert joined == rules.redact_text(text)
    assert not any("three" in piece or "four" in piece for piece in released)


def test_a_learned_value_ending_in_a_space_is_released_redacted_up_to_its_end() -> None:
    """A value that ends in a space, right before the cut, is released at once, redacted."""
    rules = Redactor().with_values("pass word ")
    streamed = StreamRedactor(rules)
    released = streamed.feed("x pass word more")
    assert released == rules.redact_text("x pass word ")
    assert "pass" not in released
    assert streamed.held == len("more")


@pytest.mark.parametrize(
    ("patterns", "reach"),
    [
        ([r"(?<=pin )\d+"], 4),
        ([r"(?<!no )code"], 3),
        ([r"\Aref"], 1),
        ([r"(?m)^total"], 1),
        ([r"\bword\b", r"plain$", r"x(?=abc)", r"x(?!abc)", r"[(?<=]x"], 0),
        ([r"(?=(?<=ab)c)x"], 2),  # a look-behind inside a look-ahead
        ([r"(a|(?<!xyz)b)"], 3),  # in an alternative of a group
        ([r"(?>(?<=abcd)x)"], 4),  # in an atomic group
        ([r"(?:(?<=ab)c)+"], 2),  # in a repeat
        ([r"(a)?(?(1)(?<=qq)y|z)"], 2),  # in a conditional
        ([r"(?<=a(?<=bc))d"], 3),  # nested: counted as the outer width and the inner's reach
        ([re.compile(r"(?<= p i n ) \d+", re.VERBOSE)], 3),  # read with the pattern's flags
        ([r"(?<=ab)c", r"(?<=abcde)f", r"\Ag"], 5),  # the farthest of them
    ],
)
def test_the_stream_keeps_as_much_released_text_as_its_patterns_read_back(
    patterns: list[str | re.Pattern[str]], reach: int
) -> None:
    """A piece is read after as many released characters as the patterns read before a match."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(*patterns))
    assert streamed.feed("mmmm nnnn ") == "mmmm nnnn "
    before = streamed.scanned
    assert streamed.feed("kk ") == "kk "
    # the kept characters and the piece, read once to find the cut and once by each pattern
    assert streamed.scanned - before == (1 + len(patterns)) * (reach + len("kk "))


def test_a_cut_moved_out_of_one_match_into_an_earlier_one_moves_again() -> None:
    """Moved before `two three`, the cut falls inside the value `one two`: it moves before that."""
    rules = Redactor(defaults=False, values=["one two"], patterns=[r"two three", r"three \d+ x"])
    streamed = StreamRedactor(rules)
    # `three 12` may still become `three 12 x`: the cut goes before it, then before each match
    assert streamed.feed("a one two three 12") == "a "
    assert "a " + streamed.end() == rules.redact_text("a one two three 12")


def test_a_long_run_after_the_kept_text_waits_until_it_doubled() -> None:
    """After `pin ` is kept for a look-behind, a long run without spaces still waits to double."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(r"(?<=pin )\d+"))
    assert streamed.feed("my pin ") == "my pin "
    assert streamed.feed("x" * 300) == ""
    scanned = streamed.scanned
    assert streamed.feed("y") == ""
    assert streamed.scanned == scanned  # not read again before 600 characters are held


def test_a_cut_right_after_the_text_a_look_behind_reads_is_checked_with_that_text() -> None:
    """`ab 12`, `ab ` read by a look-behind: the cut after `ab ` splits cleanly, `ab ` read too."""
    rules = Redactor(defaults=False).with_patterns(r"(?<=ab )\d+")
    streamed = StreamRedactor(rules)
    assert streamed.feed("ab 12") == "ab "
    assert "ab " + streamed.end() == rules.redact_text("ab 12")


def test_a_case_sensitive_pattern_reads_a_dotless_i_as_itself() -> None:
    """A `pin` pattern that keeps case never matches `pin` with a dotless i: nothing is held."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(r"pin \d+"))
    assert streamed.feed("my p\u0131n ") == "my p\u0131n "


def test_a_cut_between_a_marker_and_a_rule_reading_it_is_not_taken() -> None:
    """A pattern reading a value's marker (`] now`): no cut between the value and `now` is kept."""
    rules = Redactor(defaults=False, values=["open sesame"], patterns=[r"\] now"])
    text = "say open sesame now"
    streamed = StreamRedactor(rules)
    # released alone, `say [redacted:…] ` and then `now` would never meet the pattern
    assert streamed.feed(text) == ""
    assert streamed.end() == rules.redact_text(text)
    assert rules.redact_text(text) != rules.redact_text("say open sesame ") + "now"


@pytest.mark.parametrize(
    ("rules", "text"),
    [
        (Redactor(defaults=False, values=["secretword", "] now"]), "say secretword now"),
        (Redactor().with_patterns(r"\] now"), f"key {OPENAI_KEY} now"),
        (Redactor(defaults=False, values=["open sesame", "] now"]), "say open sesame now"),
    ],
)
def test_a_rule_reading_the_marker_of_a_word_before_the_cut_keeps_them_together(
    rules: Redactor, text: str
) -> None:
    """A value or pattern that reads `] now` after a redacted word: no cut between the two."""
    streamed = StreamRedactor(rules)
    released = streamed.feed(text)
    assert released == ""
    assert released + streamed.end() == rules.redact_text(text)
    assert rules.redact_text(text).count("[redacted:") == 2


def test_empty_matches_are_no_match_found() -> None:
    """A pattern matching only the empty string finds nothing: secret words are redacted alone."""
    streamed = StreamRedactor(Redactor().with_patterns(r"z*"))
    text = f"({OPENAI_KEY}) plain "
    assert streamed.feed(text) == Redactor().redact_text(text)
    # the held text, once to find the cut and once by the pattern, then the bracket read back
    # for the secret word's window (no window at all if an empty match counted as a match)
    assert streamed.scanned == 2 * len(text) + 1


def test_an_application_pattern_named_like_a_built_in_one_is_gated_by_its_own_hints() -> None:
    """A pattern of the application's named `private_key` is tried on its hint, not on the PEM's."""
    pin = SecretPattern("private_key", r"pin \d+", hints=["pin"])
    rules = Redactor(defaults=False, patterns=[pin])
    streamed = StreamRedactor(rules)
    assert streamed.feed("my pin ") == "my "
    assert "my " + streamed.feed("1234 ok ") == rules.redact_text("my pin 1234 ok ")


def test_text_released_at_once_is_kept_for_a_look_behind_too() -> None:
    """`ab ` holds no literal and leaves at once, but a look-behind still reads it after."""
    rules = Redactor(defaults=False, patterns=[SecretPattern("x", r"(?<=ab )\d{4}x", ["x"])])
    released = stream(rules, ["ab ", "1234x "])
    assert released[0] == "ab "
    assert "1234" not in released[1]
    assert "".join(released) == rules.redact_text("ab 1234x ")


def test_held_text_is_rescanned_as_soon_as_it_has_doubled() -> None:
    """Past the floor, the scan waits for twice the held length, and not one character more."""
    streamed = StreamRedactor(Redactor())
    run = "x" * (RESCAN_FLOOR + 1)
    assert streamed.feed(run) == ""
    assert streamed.feed("x" * RESCAN_FLOOR + " ") == run + "x" * RESCAN_FLOOR + " "


def stream(rules: Redactor, pieces: list[str]) -> list[str]:
    """Feed the pieces one by one; return what each released, then the rest at the end."""
    streamed = StreamRedactor(rules)
    return [*(streamed.feed(piece) for piece in pieces), streamed.end()]


def test_held_text_at_the_floor_is_rescanned_at_the_next_piece_by_every_rule() -> None:
    """With a rule tried on every text, 256 characters held are still rescanned at once."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(r"q\d q"))
    run = "x" * RESCAN_FLOOR
    assert streamed.feed(run) == ""
    assert streamed.feed(" ") == run + " "
