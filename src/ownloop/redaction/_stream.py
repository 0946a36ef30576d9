"""`StreamRedactor`: redacts text that arrives in pieces, releasing only what can no longer change.

Text is released up to a *cut*: a position just after a space, tab or newline where no rule of
the redactor (a literal value, a secret pattern, a key=value rule, an application pattern) has a
match that spans it, and before the start of any match still pending: a match that reaches the end
of the text so far, or a prefix of the text's tail that some rule could still complete
(``regex`` partial matching decides that, for any pattern). Whatever lies before a cut is redacted
alone, so the pieces released, joined, equal the redactor's result on the whole text.

Cost: rules whose matches never hold a space are left to the redaction of what is released (a cut
follows a space, so it never splits them); the others are tried on the held text only when one of
their literals is in it (all of a rule's literals looked for in one pass of an Aho-Corasick
automaton, not one search each). The released text is redacted once, as the trace redacts a
whole text. Text held back is rescanned on the next piece; once more than `RESCAN_FLOOR`
characters are held, a rescan waits until as much text again has arrived, so every character is
scanned a bounded number of times (amortised) even when a long run without spaces keeps growing.
`StreamRedactor.scanned` counts what the searches read, so a test can check that bound.

Rules are read as `re` reads them, through ``regex``; a pattern the two read differently (rare
syntax) or one whose alternatives let a complete match start inside a longer pending one may hold
less than it should. When a match was found or is pending, or a word before the cut was
redacted (a rule may read its marker), a cut is also checked: both sides
redacted alone must give the whole's result, else nothing is released until the text ends.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import ahocorasick_rs
import regex

from ownloop._text import clean_text
from ownloop.redaction._patterns import AWS_PREFIXES, DEFAULT_PATTERNS, fold_case, fold_letters
from ownloop.redaction._redactor import Redactor

__all__ = ["RESCAN_FLOOR", "StreamRedactor"]

RESCAN_FLOOR = 256
"""Held text up to this length is rescanned on every piece; longer held text when it doubles."""

_SPACES = (" ", "\n", "\t")
_SPACE = re.compile("[ \n\t]")
_SPACE_BEFORE = regex.compile("[ \n\t]", regex.REVERSE)
_FLAGS = (
    (re.IGNORECASE, regex.IGNORECASE),
    (re.MULTILINE, regex.MULTILINE),
    (re.DOTALL, regex.DOTALL),
    (re.VERBOSE, regex.VERBOSE),
    (re.ASCII, regex.ASCII),
)
# Built-in rules whose matches never hold a space, tab or newline, and the literals (case as
# written) of which every match holds one.
_WORD_ANCHORS: dict[str, tuple[str, ...]] = {
    "url_credentials": ("://",),
    "openai_key": ("sk-",),
    "jwt": ("eyJ",),
    "aws_access_key": AWS_PREFIXES,
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "slack_token": ("xox",),
    "google_api_key": ("AIza",),
}
_ASCII_ALNUM = re.compile("[A-Za-z0-9]")
# A URL's credentials end at an "@" in the same word.
_NEEDS = {"://": "@"}
_WORD_RULES = tuple(rule for rule in DEFAULT_PATTERNS if rule.name in _WORD_ANCHORS)
# A private key block holds spaces before its "private key" hint: its first word gates it.
_GATES = {"private_key": ("-----begin",)}


class _Rules:
    """A redactor's rules, sorted for a stream: those that can match across a space, and the rest.

    A built-in rule whose matches never hold a space, tab or newline (a URL's credentials, an API
    key, a JWT) and a literal secret without one cannot span a cut, which always follows one: only
    the words holding one of their literals are redacted. Each other rule is compiled for partial
    matching, with the literals of which one is in every match and in every prefix of a match that
    holds a space (a key name before its ``=``, ``bearer``, ``-----begin``): without one of them in
    the held text the rule is not tried. A rule without such literals is always tried.
    """

    __slots__ = ("assignment", "quiet", "reach", "spanning", "words")

    words: tuple[tuple[str, tuple[str, ...]], ...]
    quiet: re.Pattern[str] | None

    def __init__(self, redactor: Redactor) -> None:
        spanning: list[tuple[tuple[str, ...], regex.Pattern[str]]] = []
        word_values: list[str] = []
        for value in redactor.match_values:
            if any(space in value for space in _SPACES):
                spanning.append(((), regex.compile(regex.escape(value))))
            else:
                word_values.append(value)
        anchors = list(word_values)
        self.assignment: tuple[_Finder | None, regex.Pattern[str]] | None = None
        hints: tuple[str, ...] = ()
        for rule in redactor.rules:
            if rule in _WORD_RULES:
                anchors.extend(_WORD_ANCHORS[rule.name])
                continue
            if rule.name == "key_assignment" and rule not in redactor.patterns:
                hints = rule.hints
                self.assignment = (_finder(hints), regex.compile(rule.regex.pattern))
                continue
            gate = _GATES.get(rule.name, rule.hints) if rule in DEFAULT_PATTERNS else rule.hints
            if any(space in hint or not hint for hint in gate for space in _SPACES):
                gate = ()  # every text holds the empty literal
            flags = 0
            for std, alternative in _FLAGS:
                if rule.regex.flags & std:
                    flags |= alternative
            spanning.append((gate, regex.compile(rule.regex.pattern, flags)))
        # Each gate's literals are found in one pass over the lower-cased text (an Aho-Corasick
        # automaton), not one search for each.
        self.spanning = tuple((_finder(gate), rule) for gate, rule in spanning)
        # How far before a match an application pattern reads (a look-behind, a start anchor):
        # that much released text is kept, and read before the held text (`StreamRedactor`).
        self.reach = max((_reach(rule.regex) for rule in redactor.patterns), default=0)
        # The words to redact hold one of these literals; each group of them is found by its
        # common prefix (one fast `str.find` loop) and then told apart.
        self.words = _word_groups(anchors)
        # Every literal that sends a text to a rule, folded as the text is (`fold_case`: a
        # learned value with a dotted capital I or a sigma too): a short text (folded) without
        # any of them is released up to its last space as it is. None when a rule is ungated.
        literals = [literal for gate, _ in spanning for literal in gate]
        literals += hints
        literals += (fold_case(anchor) for _, group in self.words for anchor in group)
        self.quiet = (
            re.compile("|".join(map(re.escape, sorted(set(literals)))))
            if all(gate for gate, _ in spanning)
            else None
        )


def _word_groups(anchors: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Group literals by their first characters, each group found by its common prefix."""
    groups: dict[str, list[str]] = {}
    for anchor in dict.fromkeys(anchors):
        groups.setdefault(anchor[0], []).append(anchor)
    words: list[tuple[str, tuple[str, ...]]] = []
    for group in groups.values():
        prefix = os.path.commonprefix(group)  # noqa: RUF071 (characters, not paths)
        if len(prefix) == 1 and all(len(anchor) > 1 for anchor in group):
            # "ghp_" and "github_pat_": "gh" and "gi" are rarer in text than "g"
            split: dict[str, list[str]] = {}
            for anchor in group:
                split.setdefault(anchor[:2], []).append(anchor)
            if len(split) <= 2:
                words.extend(
                    (os.path.commonprefix(part), tuple(part))  # noqa: RUF071
                    for part in split.values()
                )
                continue
        words.append((prefix, tuple(group)))
    return tuple(words)


class _Tally:
    """Characters read by a stream's searches (`StreamRedactor.scanned`)."""

    __slots__ = ("read",)

    def __init__(self) -> None:
        self.read = 0


def _last_space(text: str, limit: int, tally: _Tally, floor: int = 0) -> int:
    """The largest cut in ``[floor, limit]`` that follows a space, tab or newline (else ``floor``).

    Searched backwards down to ``floor`` only, so a caller walking a long text left to right
    reads each part of it once (three ``rfind`` would each read back to the start). The
    stretch read, from ``limit`` back to the cut, is added to ``tally``.
    """
    found = _SPACE_BEFORE.search(text, floor, limit)
    cut = found.end() if found is not None else floor
    tally.read += limit - cut
    return cut


class StreamRedactor:
    """Redacts one text as it arrives in pieces; the pieces it releases join into the redacted text.

    Args:
        redactor: The redactor, or a function returning the current one (read at every piece, so
            a secret learned mid-stream applies to the text still held).
    """

    def __init__(self, redactor: Redactor | Callable[[], Redactor]) -> None:
        self._redactor: Callable[[], Redactor] = (
            (lambda: redactor) if isinstance(redactor, Redactor) else redactor
        )
        self._held = ""
        self._context = ""  # the end of the released text, as far as the rules read back
        self._rescan_at = 0
        self._known: tuple[Redactor, _Rules] | None = None
        self._tally = _Tally()

    @property
    def held(self) -> int:
        """How many characters of raw text are held back."""
        return len(self._held)

    @property
    def scanned(self) -> int:
        """How many characters this stream's searches have read so far (read-only, never reset).

        The held text counts its length each time it is searched (once, once more for each rule
        that can span a space tried on it, and once at `end`), a backward search for a space the
        stretch it reads, and the key=value rule one for each position it is tried at. Streamed
        in any pieces, a text costs a small constant times its length: the bound "each character
        scanned a bounded number of times" as a count, where re-reading the held text from its
        start at every piece would cost about its length squared over the piece size.
        """
        return self._tally.read

    def feed(self, text: str) -> str:
        """Take one piece; return the redacted text that can no longer change (may be empty).

        Args:
            text: The next piece of raw text.

        Returns:
            Redacted text to hand on now.
        """
        held = self._held = self._held + text
        if len(held) < self._rescan_at:
            return ""
        redactor = self._redactor()
        known = self._known
        if known is None or known[0] is not redactor:
            known = self._known = (redactor, _Rules(redactor))  # once a stream, mostly
        rules = known[1]
        quiet = rules.quiet
        tally = self._tally
        # released text a look-behind (or a start anchor) may still read, before the held text
        context = self._context
        text = context + held
        tally.read += len(text)
        if quiet is not None and len(held) <= RESCAN_FLOOR and not quiet.search(fold_case(text)):
            # no rule can match or be pending in it (the common one-word piece): one search;
            # no rescan is pending (one waits for more than twice RESCAN_FLOOR characters)
            cut = len(held) if held.endswith(_SPACES) else _last_space(held, len(held), tally)
            return self._release(held, cut, _clean(held[:cut]), rules.reach)
        cut, spans = _cut(text, rules, redactor, tally)
        self._rescan_at = 0
        released = None
        if cut > len(context):
            window = text[len(context) : cut]
            if spans:  # a secret was found: the cut was checked against the whole (`_cut`)
                released = _redact_after(context, window, redactor)
            else:
                released = _redact_released(window, rules, redactor, tally)
                # a word redacted before the cut: its marker may be what a rule reads after it
                if released != window and not _splits_cleanly(text, cut, redactor, rules.reach):
                    released = None
        if released is None:
            if len(held) > RESCAN_FLOOR:
                self._rescan_at = 2 * len(held)
            return ""
        return self._release(held, cut - len(context), released, rules.reach)

    def _release(self, held: str, cut: int, released: str, reach: int) -> str:
        """Keep the held text after the cut, and as much of what is released as a rule reads."""
        self._held = held[cut:]
        if reach:
            self._context = (self._context + held[:cut])[-reach:]
        return released

    def end(self) -> str:
        """The text is complete: return the rest, redacted, and start afresh.

        Returns:
            The redacted rest of the text.
        """
        rest, context = self._held, self._context
        self._held, self._context, self._rescan_at = "", "", 0
        self._tally.read += len(rest)
        if not rest:
            return ""
        redactor = self._redactor()
        released = _redact_after(context, rest, redactor)
        return released if released is not None else redactor.redact_text(rest)


Spans = list[tuple[int, int]]


def _cut(text: str, rules: _Rules, redactor: Redactor, tally: _Tally) -> tuple[int, Spans]:
    """The cut, and the matches before it of the rules that can span a space."""
    end = len(text)
    limit = end
    spans: Spans = []
    lowered = _utf8(fold_case(text))
    # a rule ignoring case reads the text as `re` reads it: a dotless i or a dotted capital I is
    # an i (`regex` reads neither so); positions unchanged
    letters = fold_letters(text)
    for gate, rule in rules.spanning:
        if _holds_any(lowered, gate):
            tally.read += end
            subject = letters if rule.flags & regex.IGNORECASE else text
            limit = min(limit, _settled(rule.finditer(subject, partial=True), end, end, spans))
    assignment = rules.assignment
    # a key=value match holds its sign; without one, only a key the text ends on can start one
    if (
        assignment is not None
        and ("=" in text or ":" in text or text[-1:].isspace())
        and _holds_any(lowered, assignment[0])
    ):
        # read as `re` reads it: api_key spelt with a dotless i is a key; positions unchanged
        matches = _assignments(letters, assignment[1], tally)
        # a value with only whitespace after it may still change: `token = token ` grows into
        # `token = token x`, or its `token` turns out to be a key before its sign (`token = …`)
        limit = min(limit, _settled(matches, _skip_spaces_back(text, end), end, spans))
    cut = _last_space(text, limit, tally)
    moved = bool(spans)
    while cut and moved:
        moved = False
        for start, stop in spans:
            if start < cut < stop:
                cut = _last_space(text, start, tally)
                moved = True
    # A match found or pending: a look-behind past the cut, or a rule that reads another's marker,
    # could make the two sides read differently alone.
    if cut and (spans or limit < end) and not _splits_cleanly(text, cut, redactor, rules.reach):
        cut = 0
    return cut, [(start, stop) for start, stop in spans if stop <= cut]


def _settled(matches: Iterable[regex.Match[str]], tail: int, end: int, spans: Spans) -> int:
    """Collect the settled matches' spans; return where the first one still pending starts.

    A match is pending when it is partial or reaches ``tail`` (the end, or for the key=value
    rule the end before trailing whitespace); with none pending, the result is ``end``.
    """
    for found in matches:
        start, stop = found.span()
        if found.partial or stop >= tail:  # may still grow or change with the next piece
            return start
        if stop > start:
            spans.append((start, stop))
    return end


def _assignments(text: str, rule: regex.Pattern[str], tally: _Tally) -> list[regex.Match[str]]:
    """The key=value rule's matches, tried only where one can start.

    A match holds ``:`` or ``=`` after its key, and a key holds no space: it starts in the word
    before a sign (spaces between them skipped), or, when only whitespace ends the text, in its last
    word (the sign still to come). There it is tried at each position its look-behind allows.

    Positions are tried left to right, each once, and none inside a match found (as a search
    goes on after a match): a long word of many signs (``token=token=…``) costs its length, not
    its length times its signs.
    """
    end = len(text)
    signs = [at for sign in (":", "=") for at in _positions(text, sign)]
    tail = _skip_spaces_back(text, end)
    if tail < end:
        signs.append(tail)
    found: list[regex.Match[str]] = []
    start = 0
    for sign in sorted(signs):
        before = _skip_spaces_back(text, sign)
        word = _last_space(text, before, tally, min(start, before))  # no further back than tried
        start = max(start, word)
        while start < max(before, word + 1):
            if start == word or not _ASCII_ALNUM.match(text, start - 1):
                tally.read += 1
                match = rule.match(text, start, partial=True)
                if match is not None:
                    found.append(match)
                    start = match.end()  # a key is never empty: the end is past the start
                    continue
            start += 1
    return found


_Finder = ahocorasick_rs.BytesAhoCorasick


def _finder(literals: tuple[str, ...]) -> _Finder | None:
    """An automaton finding any of a gate's literals in one pass (None for none: ungated)."""
    return _Finder([_utf8(literal) for literal in literals]) if literals else None


def _utf8(text: str) -> bytes:
    """A text's UTF-8 bytes (lone surrogates too): a literal is in a text when its bytes are."""
    return text.encode("utf-8", "surrogatepass")


def _holds_any(text: bytes, finder: _Finder | None) -> bool:
    """Whether a text holds one of a gate's literals (always, for none: an ungated rule).

    A search that does not overlap its matches finds one whenever any literal is in the text.
    """
    return finder is None or bool(finder.find_matches_as_indexes(text))


def _positions(text: str, literal: str) -> list[int]:
    """Where a literal occurs in a text."""
    positions = []
    at = text.find(literal)
    while at >= 0:
        positions.append(at)
        at = text.find(literal, at + 1)
    return positions


def _skip_spaces_back(text: str, at: int) -> int:
    """The position after the last character before ``at`` that is not whitespace.

    Whitespace as the key=value rule reads it between a key and its sign (`str.isspace`, a
    carriage return too).
    """
    while at > 0 and text[at - 1].isspace():
        at -= 1
    return at


def _splits_cleanly(text: str, cut: int, redactor: Redactor, reach: int) -> bool:
    """Whether both sides of a cut redacted apart give the whole's result.

    The side after the cut is redacted after the ``reach`` characters before it, as the stream
    will redact it. A lookaround, or a rule reading another's marker, could tell them apart.
    """
    whole = redactor.redact_text(text)
    after = _redact_after(text[max(0, cut - reach) : cut], text[cut:], redactor)
    return after is not None and redactor.redact_text(text[:cut]) + after == whole


def _redact_after(context: str, text: str, redactor: Redactor) -> str | None:
    """Redact a text as it reads after a context already released (a look-behind reads that).

    The context and the text are redacted together, and the context's own redaction taken off
    the front; None when the result does not start with it (a match spans the two: hold).
    """
    known = redactor.redact_text(context)
    whole = redactor.redact_text(context + text)
    return whole[len(known) :] if whole.startswith(known) else None


_PARSER: Any = importlib.import_module("re._parser")  # re's own parser (no stub: Any)


def _reach(pattern: re.Pattern[str]) -> int:
    r"""How many characters before a match's start a pattern may read.

    A look-behind reads its width (fixed, as ``re`` requires) before where it stands, a start
    anchor (``^``, ``\A``) one character; ``\b`` reads one too, but a cut follows a space,
    tab or newline, which reads to it as the start of a text does.
    """
    return _reach_of(_PARSER.parse(pattern.pattern, pattern.flags))


def _reach_of(tree: Any) -> int:
    """`_reach` of a parsed pattern (``re._parser``'s tree: a list of operator, argument)."""
    reach = 0
    for op, argument in tree:
        name = str(op)
        if name in {"ASSERT", "ASSERT_NOT"} and argument[0] < 0:
            reach = max(reach, argument[1].getwidth()[1] + _reach_of(argument[1]))
        elif name == "AT" and str(argument) in {"AT_BEGINNING", "AT_BEGINNING_STRING"}:
            reach = max(reach, 1)
        else:
            for part in argument if isinstance(argument, tuple | list) else (argument,):
                for child in part if isinstance(part, list) else (part,):
                    if hasattr(child, "getwidth"):
                        reach = max(reach, _reach_of(child))
    return reach


def _redact_released(text: str, rules: _Rules, redactor: Redactor, tally: _Tally) -> str:
    """Redact released text in which no rule that can span a space matched: its words.

    Only the words holding a word rule's literal or a literal secret are redacted: such a rule's
    match lies inside one word, and each window starts after a space and ends before one, so
    redacting the windows alone equals redacting the whole text.
    """
    hot: Spans = []
    for prefix, group in rules.words:
        need = _NEEDS.get(prefix)
        if need is not None and need not in text:
            continue  # no word of the text can hold both
        at = text.find(prefix)
        while at >= 0:
            if text.startswith(group, at):
                stop = _next_space(text, at)
                if need is None or text.find(need, at, stop) >= 0:
                    hot.append((at, stop))
            at = text.find(prefix, at + 1)
    if not hot:
        return _clean(text)
    out: list[str] = []
    done = 0
    window_start = window_end = -1
    for start, stop in sorted(hot):
        if start >= window_end:
            if window_end >= 0:
                out.append(redactor.redact_text(text[window_start:window_end]))
            window_start = _last_space(text, start, tally)
            out.append(_clean(text[done:window_start]))
        window_end = max(window_end, stop)  # a space's position (or the end): the word's end
        done = window_end
    out.append(redactor.redact_text(text[window_start:window_end]))
    out.append(_clean(text[window_end:]))
    return "".join(out)


def _next_space(text: str, start: int) -> int:
    """The position of the first space, tab or newline at or after ``start`` (else the end)."""
    found = _SPACE.search(text, start)
    return found.start() if found is not None else len(text)


def _clean(text: str) -> str:
    """`clean_text`, skipped for ASCII text (which holds no surrogate): a check far cheaper."""
    return text if text.isascii() else clean_text(text)
