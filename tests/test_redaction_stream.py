"""`StreamRedactor`: text redacted as it arrives in pieces, released once no rule can change it."""

from __future__ import annotations

import itertools
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop.redaction import RESCAN_FLOOR, Redactor, SecretPattern, StreamRedactor

OPENAI_KEY = "sk-proj-Canary0penAIkey1234567890abcdEF"
AWS_KEY = "AKIACANARY0EXAMPLE12"
BEARER = "ya29.CanaryBearerToken-1234567890"
PASSPHRASE = "correct horse battery staple"
CARD = "4111 1111 1111 1111"
CARD_PATTERN = r"\b\d{4}(?: \d{4}){3}\b"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BCanaryBody\n"
    "-----END RSA PRIVATE KEY-----"
)
PLANTED = [
    OPENAI_KEY,
    AWS_KEY,
    f"Authorization: Bearer {BEARER}",
    f"bearer {BEARER}",
    PASSPHRASE,
    CARD,
    PEM,
    "password = hunter2hunter2",
    'api_key="k3y-Canary-value"',
    "postgresql://app:s3cr3t-Canary@db.internal/app",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "xoxb-1234567890-Canary",
    "AIzaSyCanary0123456789abcdefghijklmnopq",
]
FILLER = ["alpha", "is", "key:", "=", "set", "token", "\n", "\t", "4111", "correct horse", "Bearer"]
# Every planted secret's telling part: none may reach the joined text.
TELLS = [
    "Canary0pen",
    "CANARY0EXAMPLE",
    "CanaryBearer",
    "battery staple",
    "1111 1111 1111 1111",
    "CanaryBody",
    "hunter2",
    "k3y-Canary",
    "s3cr3t-Canary",
    "eyJzdWIi",
    "ghp_abcdefghij",
    "xoxb-1234567890",
    "AIzaSyCanary",
]


# Examples of each property test: fewer under the mutation run (its `env`), where each mutant of
# the stream redactor runs this file.
EXAMPLES = int(os.environ.get("OWNLOOP_STREAM_EXAMPLES", "300"))


def redactor() -> Redactor:
    """The built-in rules, a learned value with spaces and an application pattern with spaces."""
    return Redactor().with_values(PASSPHRASE).with_patterns(CARD_PATTERN)


def stream(rules: Redactor, pieces: list[str]) -> list[str]:
    """Feed the pieces one by one; return what each released, then the rest at the end."""
    streamed = StreamRedactor(rules)
    return [*(streamed.feed(piece) for piece in pieces), streamed.end()]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.sampled_from(PLANTED + FILLER), min_size=1, max_size=14),
    separators=st.lists(st.sampled_from([" ", "\n", " ", "  ", "\t"]), min_size=14, max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=25),
)
def test_any_chunking_joins_to_the_redacted_whole_and_leaks_nothing_early(
    words: list[str], separators: list[str], cuts: list[int]
) -> None:
    """Whatever the text and its cuts, the released pieces join to the redacted whole, always."""
    text = "".join(word + separator for word, separator in zip(words, separators, strict=False))
    rules = redactor()
    whole = rules.redact_text(text)
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    pieces = [text[start:end] for start, end in itertools.pairwise(bounds)]
    released = ""
    streamed = StreamRedactor(rules)
    for piece in pieces:
        released += streamed.feed(piece)
        # a released prefix is final: no secret, nor any piece of one, was sent before its end
        assert whole.startswith(released)
    released += streamed.end()
    assert released == whole
    for tell in TELLS:
        assert tell not in released


def test_a_learned_value_with_spaces_is_held_until_it_is_whole() -> None:
    """`correct horse battery` is not released while `staple` may still follow."""
    rules = redactor()
    pieces = ["my pass is correct ", "horse ", "battery ", "staple and more "]
    released = stream(rules, pieces)
    assert released[:3] == ["my pass is ", "", ""]
    assert "".join(released) == rules.redact_text("".join(pieces))
    assert "horse" not in "".join(released)


def test_an_application_pattern_with_spaces_is_held_until_it_is_whole() -> None:
    """A card number streamed in groups leaves as one marker, never as `4111 1111 1111 [...]`."""
    rules = redactor()
    streamed = StreamRedactor(rules)
    assert streamed.feed("card 4111 1111 ") == "card "
    assert streamed.held == len("4111 1111 ")
    assert streamed.feed("1111 ") == ""
    assert streamed.feed("1111 thanks ") == rules.redact_text(f"{CARD} thanks ")
    assert streamed.held == 0


def test_bearer_deltas_join_to_the_redacted_reply() -> None:
    """`Authorization: Bearer <token>` cut in 3-character pieces joins to the redacted reply."""
    text = f"use Authorization: Bearer {BEARER} then bearer {BEARER} ok"
    pieces = [text[start : start + 3] for start in range(0, len(text), 3)]
    joined = "".join(stream(Redactor(), pieces))
    assert joined == Redactor().redact_text(text)
    assert "Canary" not in joined


def test_ordinary_text_is_released_up_to_its_last_space_at_once() -> None:
    """Text no rule can match is held back only from its last space, tab or newline."""
    streamed = StreamRedactor(Redactor())
    assert streamed.feed("hello world\tand so\non") == "hello world\tand so\n"
    assert streamed.held == 2
    assert streamed.feed(" ") == "on "
    assert streamed.end() == ""


def test_a_key_before_its_sign_is_held_with_the_spaces_after_it() -> None:
    """`password ` then `= hunter2…`: the key waits for its value, which never leaks."""
    streamed = StreamRedactor(Redactor())
    assert streamed.feed("the password ") == "the "
    assert streamed.feed("= hunter2hunter2 done ") == Redactor().redact_text(
        "password = hunter2hunter2 done "
    )


@pytest.mark.parametrize("between", ["\r", " \r", "\x0b \x0c", "\u00a0 "])
def test_a_key_held_across_any_whitespace_before_its_sign(between: str) -> None:
    """Any whitespace (a carriage return) between a key and its sign holds the key, as a space."""
    rules = Redactor()
    text = f"the token{between}: hunter2hunter2 done "
    for cut in range(1, len(text)):
        released = stream(rules, [text[:cut], text[cut:]])
        assert "hunter2" not in released[0]
        assert "".join(released) == rules.redact_text(text)


def test_ordinary_short_pieces_are_released_as_they_come() -> None:
    """One-word pieces that no rule can read are released whole, or up to their last space."""
    streamed = StreamRedactor(Redactor())
    assert streamed.feed("plain ") == "plain "
    assert streamed.feed("words\tand") == "words\t"
    assert streamed.feed("no") == ""
    assert streamed.held == 5
    assert streamed.feed("te \u00e9t\u00e9 ") == "andnote \u00e9t\u00e9 "
    assert streamed.held == 0


def test_the_redactor_is_read_at_every_piece() -> None:
    """A secret learned mid-stream is redacted in the text still held."""
    current = [Redactor()]
    streamed = StreamRedactor(lambda: current[0])
    assert streamed.feed("the code is opensesame") == "the code is "
    current[0] = Redactor().with_values("opensesame")
    assert streamed.feed(" now ") == current[0].redact_text("opensesame now ")
    assert "opensesame" not in current[0].redact_text("opensesame")


def test_a_long_run_without_spaces_is_rescanned_only_once_it_doubled() -> None:
    """Held text past the floor waits for as much again before the next scan (bounded work)."""
    streamed = StreamRedactor(Redactor())
    run = "x" * (RESCAN_FLOOR + 1)
    assert streamed.feed(run) == ""
    assert streamed.feed(" done ") == ""  # a cut exists, but the held text has not doubled
    assert streamed.feed("y" * RESCAN_FLOOR + " ") == run + " done " + "y" * RESCAN_FLOOR + " "
    assert streamed.held == 0


def test_short_held_text_is_rescanned_at_every_piece() -> None:
    """Up to the floor, every piece rescans: a cut is used as soon as it exists."""
    streamed = StreamRedactor(Redactor())
    run = "x" * RESCAN_FLOOR
    assert streamed.feed(run) == ""
    assert streamed.feed(" ") == run + " "


def test_the_end_releases_the_rest_redacted_and_starts_afresh() -> None:
    """`end` redacts what is held, even a secret cut short, and the next text starts clean."""
    streamed = StreamRedactor(Redactor())
    assert streamed.feed(f"key {OPENAI_KEY}") == "key "
    assert streamed.end() == Redactor().redact_text(OPENAI_KEY)
    assert streamed.end() == ""
    assert streamed.feed("next ") == "next "


def test_a_rule_that_reads_across_a_cut_keeps_the_text_whole() -> None:
    """A pattern whose look-behind sees past a space is never split where that would change it."""
    rules = Redactor(defaults=False).with_patterns(r"(?<=id )\d{4,}")
    streamed = StreamRedactor(rules)
    released = streamed.feed("the id 12345 is here ") + streamed.end()
    assert released == rules.redact_text("the id 12345 is here ")
    assert "12345" not in released


def test_words_holding_a_secret_are_redacted_among_plain_words() -> None:
    """Every kind of one-word secret in long released text is redacted in place."""
    text = " ".join(
        ["plain", OPENAI_KEY, "gh", "ghost", "A", "AKIA", AWS_KEY, "https://x.org/a", "end "]
    )
    streamed = StreamRedactor(Redactor())
    assert streamed.feed(text) == Redactor().redact_text(text)


def test_a_redactor_without_rules_releases_text_as_it_is() -> None:
    """With no rule at all, only unpaired surrogates change and text goes at the last space."""
    streamed = StreamRedactor(Redactor(defaults=False))
    assert streamed.feed("a \ud800b c") == "a \ufffdb "


def test_a_look_behind_past_a_pending_match_reads_the_released_text_before_it() -> None:
    """`the id 12345` with a rule reading `id ` before the number: the words go, not the number."""
    rules = Redactor(defaults=False).with_patterns(r"(?<=id )\d{4,}")
    streamed = StreamRedactor(rules)
    assert streamed.feed("the id 12345") == "the id "
    assert "the id " + streamed.end() == rules.redact_text("the id 12345")
    assert "12345" not in rules.redact_text("the id 12345")


def test_a_cut_inside_a_match_moves_before_it() -> None:
    """A value with spaces followed by more of a word: the cut goes back before the value."""
    rules = Redactor().with_values(PASSPHRASE)
    streamed = StreamRedactor(rules)
    text = f"say {PASSPHRASE}xyz"
    assert streamed.feed(text) == "say "
    assert "say " + streamed.end() == rules.redact_text(text)


def test_a_pattern_whose_hint_holds_a_space_is_always_tried() -> None:
    """A hint with a space cannot gate a rule (its first word may arrive alone): it is tried."""
    rules = Redactor(defaults=False).with_patterns(
        SecretPattern("order", r"order no \d{6}", hints=["order no"])
    )
    pieces = ["my order ", "no 123", "456 ok "]
    released = stream(rules, pieces)
    assert released[0] == "my "
    assert "".join(released) == rules.redact_text("".join(pieces))


def test_a_pattern_that_matches_nothing_blocks_no_cut() -> None:
    """A pattern matching the empty string redacts nothing and holds nothing back."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(r"z*"))
    assert streamed.feed("ab cd ") == "ab cd "


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (re.compile(r"card \d{4} \d{4}", re.IGNORECASE), "my CARD 1234 5678 ok "),
        (re.compile(r"card \s+ \d{4} \s \d{4}", re.VERBOSE), "my card 1234 5678 ok "),
        (re.compile(r"begin .+? end", re.DOTALL), "a begin x\ny end b "),
        (re.compile(r"^secret \d+ \d+", re.MULTILINE), "a\nsecret 12 34 b "),
    ],
)
def test_a_compiled_pattern_keeps_its_flags_in_the_stream(
    pattern: re.Pattern[str], text: str
) -> None:
    """Flags given to `re.compile` hold in the stream too, in small pieces or in one."""
    rules = Redactor(defaults=False).with_patterns(pattern)
    pieces = [text[start : start + 3] for start in range(0, len(text), 3)]
    assert "".join(stream(rules, pieces)) == rules.redact_text(text)
    assert "".join(stream(rules, [text])) == rules.redact_text(text)
    assert "[redacted:" in rules.redact_text(text)


SHARDS = ["token", "password", "api_key", "Bearer", "auth", "=", ":", " ", "  ", "\n", "\t", '"']
SHARDS += ["'", "x", "v4lue", "sk-", "0123456789abcdefgh", "@", "://", "AKIA", ";", "-", "_", "\r"]


@settings(
    max_examples=max(1, EXAMPLES // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    shards=st.lists(st.sampled_from(SHARDS), min_size=1, max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
)
def test_keys_signs_and_values_in_any_order_and_any_chunking_join_to_the_redacted_whole(
    shards: list[str], cuts: list[int]
) -> None:
    """Keys, signs, quotes and values jumbled and cut anywhere still join to the redacted whole."""
    text = "".join(shards)
    rules = redactor()
    whole = rules.redact_text(text)
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    released = ""
    streamed = StreamRedactor(rules)
    for start, end in itertools.pairwise(bounds):
        released += streamed.feed(text[start:end])
        assert whole.startswith(released)
    assert released + streamed.end() == whole


SHAPES = ["token=", "a:token:", "token = ", "password ", "sk-abcdefghijklmnopqrstu\n", "a://x@y\n"]
SHAPES += ["x", "plain ", "correct horse "]


@pytest.mark.parametrize("unit", SHAPES)
def test_a_long_text_of_one_repeated_shape_is_scanned_a_bounded_number_of_times(unit: str) -> None:
    """A shape with a sign, a key, a secret or no space, repeated, reads each character <= 10 times.

    Before, `token=` repeated cost its length cubed (8,000 characters took 52 s): each sign
    tried every position of its word, and each search read back to the start of the text.
    Re-reading the held text from its start at every 50-character piece would read about 20
    times a 2,000-character text, 40 times one of 4,000: the count grows as the text does.
    """
    rules = redactor()
    counts = []
    for length in (2_000, 4_000):
        text = unit * (length // len(unit))
        streamed = StreamRedactor(rules)
        released = "".join(streamed.feed(text[at : at + 50]) for at in range(0, len(text), 50))
        released += streamed.end()
        assert released == rules.redact_text(text)
        from_start = sum(min(at + 50, len(text)) for at in range(0, len(text), 50))
        assert len(text) <= streamed.scanned <= 10 * len(text) < from_start
        counts.append(streamed.scanned)
    # twice the text, about twice the reads (a cost growing as its square would read 4 times)
    assert counts[1] <= 2.1 * counts[0]


def test_scanned_counts_each_read_of_the_held_text_and_the_search_for_its_last_space() -> None:
    """Plain pieces: each is read once, and the backward search reads back to its last space."""
    streamed = StreamRedactor(Redactor())
    assert streamed.scanned == 0
    assert streamed.feed("hello wor") == "hello "
    assert streamed.scanned == 9 + 3
    assert streamed.feed("ld ") == "world "
    assert streamed.scanned == 9 + 3 + 6
    assert streamed.end() == ""
    assert streamed.scanned == 18
    streamed.feed("x" * (RESCAN_FLOOR + 1))
    assert streamed.end() == "x" * (RESCAN_FLOOR + 1)
    # once to search it, the whole way back for a space, and once more at the end
    assert streamed.scanned == 18 + 3 * (RESCAN_FLOOR + 1)


def test_scanned_counts_each_rule_tried_and_each_position_the_key_rule_tries() -> None:
    """A rule that can span a space reads the held text once more; the key rule counts its tries."""
    streamed = StreamRedactor(Redactor().with_values("open sesame"))
    assert streamed.feed("say open ") == "say "
    assert streamed.scanned == 9 + 9  # the held text, then the value's rule over it
    streamed = StreamRedactor(Redactor())
    assert streamed.feed("a token=v1 b ") == Redactor().redact_text("a token=v1 b ")
    # the held text; back from the sign to its word (5) and one try there; back from the last
    # word to its space (1) and one try at it
    assert streamed.scanned == 13 + 5 + 1 + 1 + 1


def test_a_value_followed_only_by_whitespace_is_held_until_more_text_comes() -> None:
    """`token = token ` may still become `token = token x` or `token = token = …`: it waits."""
    rules = Redactor()
    for rest in ["= token x ", "x ", "done "]:
        released = stream(rules, ["say token = token ", rest])
        assert released[0] == "say "
        assert "".join(released) == rules.redact_text("say token = token " + rest)


def test_an_ascii_pattern_keeps_its_flag_in_the_stream() -> None:
    """With `re.ASCII`, a word class matches no accented letter in the stream either: none held."""
    rules = Redactor(defaults=False).with_patterns(re.compile(r"key \w+ \w+", re.ASCII))
    streamed = StreamRedactor(rules)
    assert streamed.feed("key éé ") == "key éé "


def test_a_pattern_with_two_flags_keeps_both_in_the_stream() -> None:
    """`re.IGNORECASE | re.DOTALL` together: a block across lines, in any case, leaves whole."""
    pattern = re.compile(r"begin .+ end", re.IGNORECASE | re.DOTALL)
    rules = Redactor(defaults=False).with_patterns(pattern)
    text = "a BEGIN x\ny END b "
    pieces = [text[start : start + 2] for start in range(0, len(text), 2)]
    joined = "".join(stream(rules, pieces))
    assert joined == rules.redact_text(text)
    assert "x\ny" not in joined


def test_every_kind_of_one_word_secret_is_redacted_in_released_text() -> None:
    """JWTs, GitHub, Slack and Google keys and URL credentials among plain words leave redacted."""
    secrets = [
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJl",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-1234567890-Canary",
        "AIzaSyCanary0123456789abcdefghijklmnopq",
        "ASIACANARY0EXAMPLE12",
        "postgresql://app:s3cr3t@db/app",
    ]
    for secret in secrets:
        text = f"plain gh {secret} and\tmore\nwords "
        released = StreamRedactor(Redactor()).feed(text)
        assert released == Redactor().redact_text(text)
        assert secret not in released


def test_a_url_without_credentials_is_released_as_it_is() -> None:
    """`https://example.org/x` holds no `@`: it is plain text, released unchanged."""
    text = "see https://example.org/x and a@b.org "
    assert StreamRedactor(Redactor()).feed(text) == text


def test_a_learned_value_with_a_tab_or_a_newline_is_held_until_it_is_whole() -> None:
    """A literal secret holding a tab or a newline spans a cut, as one holding a space does."""
    for value in ("open\tsesame", "open\nsesame"):
        rules = Redactor().with_values(value)
        streamed = StreamRedactor(rules)
        assert streamed.feed("say open" + value[4]) == "say "
        assert streamed.feed("sesame now ") == rules.redact_text(value + " now ")


def test_the_end_also_forgets_a_pending_rescan() -> None:
    """After a long run without spaces ends, the next short text is released at once."""
    streamed = StreamRedactor(Redactor())
    streamed.feed("x" * (RESCAN_FLOOR + 1))
    assert streamed.end() == "x" * (RESCAN_FLOOR + 1)
    assert streamed.feed("next ") == "next "


@pytest.mark.parametrize(
    "key",
    ["\u017fecret", "ap\u0131_key", "cl\u0130ent_secret", "api_\u212aey", "PA\u017f\u017fWORD"],
)
def test_a_key_spelt_with_letters_read_as_ascii_is_redacted_whole_and_at_any_cut(key: str) -> None:
    """A key spelt with a long s or a dotless i is read as `re` reads it, at every cut."""
    text = f"my secret is: {key} = hunter2hunter2 ok "
    rules = Redactor()
    whole = rules.redact_text(text)
    assert "hunter2" not in whole
    for cut in range(len(text) + 1):
        assert "".join(stream(rules, [text[:cut], text[cut:]])) == whole


@pytest.mark.parametrize(
    "text",
    [
        "see ab(token=hunter2hunter2) and more ",  # a key after punctuation inside a word
        "=x token=hunter2hunter2 ok ",  # a sign first, then a key's
        "a=1 token=hunter2hunter2 b=2 ",  # a key's sign between two others
        " = token=hunter2hunter2 ok ",  # whitespace and a sign before the key
    ],
)
def test_a_key_anywhere_among_other_signs_is_found_at_every_cut(text: str) -> None:
    """The key rule is tried wherever a key can start: none of these values leaves, at any cut."""
    rules = Redactor()
    whole = rules.redact_text(text)
    assert "hunter2" not in whole
    for cut in range(len(text) + 1):
        released = stream(rules, [text[:cut], text[cut:]])
        assert "hunter2" not in "".join(released)
        assert "".join(released) == whole


def test_scanned_counts_a_try_at_a_leading_sign_and_each_sign_of_a_pair() -> None:
    """The key rule's tries are counted at a sign that opens the text and at both signs of `==`."""
    streamed = StreamRedactor(Redactor())
    streamed.feed("=x token=hunter2hunter2 ok ")
    # the held text (27); a try at the leading sign (1); back to the key's word (5) and a try
    # there (1); back from the last word (2) and a try at it (1)
    assert streamed.scanned == 27 + 1 + 5 + 1 + 2 + 1
    streamed = StreamRedactor(Redactor())
    streamed.feed("a==b token==c x ")
    assert streamed.scanned == 28


def test_a_learned_value_right_after_its_first_letter_is_redacted() -> None:
    """`zzq1secret` holds the value `zq1secret` one letter in: found though a `z` precedes it."""
    rules = Redactor().with_values("zq1secret", "zr2secret", "zs3secret")
    text = "say zzq1secret and zzzs3secret ok "
    released = StreamRedactor(rules).feed(text)
    assert released == rules.redact_text(text)
    assert "secret" not in released


def test_a_pattern_anchored_at_the_start_holds_nothing_once_it_cannot_match() -> None:
    """`^foo` and digits, on text not starting with `foo`: nothing can be pending, all leaves."""
    streamed = StreamRedactor(Redactor(defaults=False).with_patterns(r"^foo\d+"))
    assert streamed.feed("a b ") == "a b "


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("\u0130stanbul1", "a \u0130stanbul1 b "),  # a dotted capital I lowers to two characters
        (
            "\u039a\u039b\u0395\u0399\u03a3",
            "a \u039a\u039b\u0395\u0399\u03a3\u0391 b ",
        ),  # a sigma, then a letter
        (
            "\u03c0\u03b1\u03c2\u03c2",
            "a x\u03c0\u03b1\u03c2\u03c2 b ",
        ),  # final sigmas inside a word
        ("\u017fecret99", "a \u017fecret99 b "),
        ("p\u0131n-code", "a p\u0131n-code b "),
    ],
)
def test_a_learned_value_whose_case_mapping_is_not_one_for_one_never_leaks(
    value: str, text: str
) -> None:
    """A value with a dotted I, a sigma, a long s or a dotless i is redacted at every cut."""
    rules = Redactor().with_values(value)
    whole = rules.redact_text(text)
    assert value not in whole
    for cut in range(len(text) + 1):
        released = stream(rules, [text[:cut], text[cut:]])
        assert whole.startswith(released[0])
        assert "".join(released) == whole


@pytest.mark.parametrize("spelt", ["p\u0131n", "P\u0130N", "PIN", "pin"])
def test_a_case_insensitive_pattern_reads_a_dotless_i_as_re_does_at_every_cut(spelt: str) -> None:
    """A case-insensitive `pin` pattern on `pin` spelt with a dotless i: held as `re` reads it."""
    rules = Redactor(defaults=False).with_patterns(r"(?i)pin \d+")
    text = f"my {spelt} 1234 ok "
    whole = rules.redact_text(text)
    assert "1234" not in whole
    for cut in range(len(text) + 1):
        released = stream(rules, [text[:cut], text[cut:]])
        assert whole.startswith(released[0])
        assert "".join(released) == whole


# Application patterns that read before their match: a look-behind, a negative one, and anchors
# at the start of the text and of a line.
READING_BACK = [r"(?<=pin )\d+", r"(?<!no )code \d+", r"\Aref \d+", r"(?m)^total \d+"]
BACK_WORDS = ["pin", "no", "code", "ref", "total", "1234", "56789", "ok", "pin 1234", "no code"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.sampled_from(BACK_WORDS), min_size=1, max_size=12),
    separators=st.lists(st.sampled_from([" ", "\n", "  ", "\t", " \n"]), min_size=12, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=20),
)
def test_a_pattern_reading_before_its_match_is_redacted_as_in_the_whole_at_any_cut(
    words: list[str], separators: list[str], cuts: list[int]
) -> None:
    """A look-behind or a start anchor reads the text already released, as in the whole reply."""
    text = "".join(word + separator for word, separator in zip(words, separators, strict=False))
    rules = redactor().with_patterns(*READING_BACK)
    whole = rules.redact_text(text)
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    released = ""
    streamed = StreamRedactor(rules)
    for start, end in itertools.pairwise(bounds):
        released += streamed.feed(text[start:end])
        assert whole.startswith(released)
    assert released + streamed.end() == whole


def test_a_look_behind_reads_the_released_text_when_the_stream_cut_before_its_number() -> None:
    """`pin ` released, then the digits: redacted as in the whole, never sent as they are."""
    rules = Redactor(defaults=False).with_patterns(r"(?<=pin )\d+")
    streamed = StreamRedactor(rules)
    assert streamed.feed("my pin ") == "my pin "
    released = streamed.feed("1234 ok ")
    assert "1234" not in released
    assert "my pin " + released + streamed.end() == rules.redact_text("my pin 1234 ok ")
    streamed = StreamRedactor(rules)
    assert streamed.feed("my pin ") + streamed.end() == "my pin "
    assert streamed.feed("1234 ") == "1234 "  # after the end, nothing is read back


def test_a_look_behind_reads_back_across_several_released_pieces() -> None:
    """`a `, `b `, `c ` released one by one, then digits: the look-behind reads all three."""
    rules = Redactor(defaults=False).with_patterns(r"(?<=a b c )\d+")
    released = stream(rules, ["a ", "b ", "c ", "1234 "])
    assert released[:3] == ["a ", "b ", "c "]
    assert "1234" not in released[3]
    assert "".join(released) == rules.redact_text("a b c 1234 ")
