"""The text helpers every boundary uses: encodable, printable, shallow, without userinfo."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ownloop._text import (
    MAX_NESTING,
    clean_json,
    clean_text,
    describe_error,
    nesting_depth,
    safe_str,
    strip_userinfo,
)


def test_clean_text_replaces_lone_surrogates_and_joins_pairs() -> None:
    """A lone surrogate becomes U+FFFD, a pair of code points its character, clean text is kept."""
    assert clean_text("a\ud83db\udc80") == "a\ufffdb\ufffd"
    assert clean_text("\ud83d\ude00") == "\U0001f600"
    text = "plain é 😀"
    assert clean_text(text) is text


@given(st.text(st.characters(exclude_categories=())))
def test_clean_text_always_encodes(text: str) -> None:
    """Whatever the input, the result encodes as UTF-8, and valid text is unchanged."""
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return
    assert cleaned == text


def test_clean_json_rebuilds_only_what_holds_dirty_text() -> None:
    """Keys and values at any depth are cleaned; tuples stay tuples; clean values are kept."""
    clean = {"a": [1, ("x",)]}
    assert clean_json(clean) is clean
    assert clean_json("x\ud83d") == "x\ufffd"
    dirty: Any = {"k\ud83d": [1, ("v\udc80", None)], "deep": [[["\ud83d"]]]}
    assert clean_json(dirty) == {"k\ufffd": [1, ("v\ufffd", None)], "deep": [[["\ufffd"]]]}
    deep: Any = "\ud83d"
    for _ in range(10_000):  # far past Python's recursion limit
        deep = [deep]
    cleaned = clean_json(deep)
    for _ in range(10_000):
        cleaned = cleaned[0]
    assert cleaned == "\ufffd"


def test_nesting_depth_counts_and_stops_past_the_limit() -> None:
    """Depth counts containers, and the walk stops once it passes the limit."""
    assert nesting_depth(1) == 0
    assert nesting_depth([]) == 1
    assert nesting_depth({"a": [{"b": (1,)}]}) == 4
    looped: list[Any] = []
    looped.append(looped)
    assert nesting_depth(looped) == MAX_NESTING + 1


class _NoName(type):
    @property
    def __name__(cls) -> str:  # type: ignore[override]
        raise RuntimeError("no name")


class _Odd(Exception, metaclass=_NoName):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_safe_str_and_describe_error_never_raise() -> None:
    """A raising __str__ or type name gives a placeholder; messages are cleaned and cut."""
    assert safe_str(_Odd()) == "<unprintable object>"
    assert describe_error(_Odd()) == "object: <unprintable object>"
    assert describe_error(ValueError("x\ud83d")) == "ValueError: x\ufffd"
    assert describe_error(ValueError()) == "ValueError"
    assert len(describe_error(ValueError("y" * 5000))) == 1000


def test_strip_userinfo_removes_credentials_from_every_url() -> None:
    """Userinfo goes up to the last @ before the host; text without URLs is kept."""
    assert strip_userinfo("http://u:p@ss@host/v1") == "http://host/v1"
    assert strip_userinfo("a https://tok@h/x and ftp://u:p@h2") == "a https://h/x and ftp://h2"
    assert strip_userinfo("mail me@example.com") == "mail me@example.com"
    assert strip_userinfo("http://host/path?email=a@b") == "http://host/path?email=a@b"
