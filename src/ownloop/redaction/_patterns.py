"""The built-in redaction rules: secret key names and secret value patterns.

Key names are matched word by word after normalisation (``apiKey``, ``X-Api-Key`` and
``openai_api_key`` all contain the words ``api key``), so ``token`` catches ``access_token`` but
not ``max_tokens``. Value patterns recognise secrets by their shape wherever they appear in text.
Each pattern carries cheap literal hints checked before its regex runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ownloop.exceptions import ConfigurationError
from ownloop.redaction._markers import redact_marker

__all__ = [
    "AWS_PREFIXES",
    "DEFAULT_KEYS",
    "DEFAULT_PATTERNS",
    "PatternLike",
    "SecretPattern",
    "as_pattern",
    "assignment_pattern",
    "fold_case",
    "fold_letters",
    "key_words",
    "replace_secret",
]

DEFAULT_KEYS: tuple[str, ...] = (
    "access_key",
    "api_key",
    "auth",
    "authorization",
    "client_secret",
    "cookie",
    "credential",
    "credentials",
    "encryption_key",
    "passphrase",
    "passwd",
    "password",
    "private_key",
    "secret",
    "session_id",
    "set_cookie",
    "signing_key",
    "token",
)
"""Key names whose values are always redacted (compared word by word, case-insensitively)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def key_words(key: str) -> tuple[str, ...]:
    """Split a key name into lower-case words: ``"X-Api-Key"`` -> ``("x", "api", "key")``.

    Args:
        key: A mapping key or a key name of a rule.

    Returns:
        Its words, without separators.
    """
    return tuple(word for word in _SEPARATORS.split(_CAMEL.sub("_", key).lower()) if word)


# Letters that case-insensitive matching (``re``'s IGNORECASE) reads as an ASCII letter but that
# ``regex`` (which reads the stream's patterns) does not: dotless i and dotted capital I read as
# ``i``. The long s is mapped too (``regex`` reads it as ``s``, so nothing changes for it).
_FOLDS = str.maketrans({"\u0131": "i", "\u0130": "i", "\u017f": "s"})
# After ``str.lower``: each character that ``re`` reads as another one when ignoring case, though
# their lower cases differ, becomes that other one (``re``'s own table of equivalences): final
# sigma and sigma, micro sign and mu, the Greek symbol forms, the Cyrillic small rounded and
# tall forms, long s with dot, the ligatures st (``re._casefix`` in Python 3.11).
_EQUIVALENTS = str.maketrans(
    {
        "\u03c2": "\u03c3",
        "\u00b5": "\u03bc",
        "\u0345": "\u03b9",
        "\u1fbe": "\u03b9",
        "\u1fd3": "\u0390",
        "\u1fe3": "\u03b0",
        "\u03d0": "\u03b2",
        "\u03f5": "\u03b5",
        "\u03d1": "\u03b8",
        "\u03f0": "\u03ba",
        "\u03d6": "\u03c0",
        "\u03f1": "\u03c1",
        "\u03d5": "\u03c6",
        "\u1c80": "\u0432",
        "\u1c81": "\u0434",
        "\u1c82": "\u043e",
        "\u1c83": "\u0441",
        "\u1c84": "\u0442",
        "\u1c85": "\u0442",
        "\u1c86": "\u044a",
        "\u1c87": "\u0463",
        "\u1c88": "\ua64b",
        "\u1e9b": "\u1e61",
        "\ufb06": "\ufb05",
    }
)


def fold_letters(text: str) -> str:
    """Replace each letter ``re`` reads as an ASCII letter when ignoring case by that letter.

    One character for one, so positions stay: a long s becomes ``s``, a dotless i ``i``. The
    ``regex`` package, which reads the stream's patterns, does not read a dotless i as ``i``.

    Args:
        text: Any text.

    Returns:
        The text, folded (the same object when it is ASCII).
    """
    return text if text.isascii() else text.translate(_FOLDS)


def fold_case(text: str) -> str:
    """Fold a text's case as ``re`` ignores case: the one fold of hints and of the texts they gate.

    Two characters fold to the same one exactly when ``re``'s IGNORECASE reads them as one
    (``re`` compares simple lower cases, then its own equivalences): a dotted capital I folds to
    ``i`` (``str.lower`` makes it two characters), a final sigma to a sigma (``str.lower`` picks
    the form from the letters around it), a long s to ``s``. One character for one, each alone,
    so a hint (folded too) is in a text's fold wherever a case-insensitive regex finds it, or
    wherever it is written as it is.

    Args:
        text: Any text.

    Returns:
        The text, folded.
    """
    if text.isascii():
        return text.lower()
    return text.translate(_FOLDS).lower().translate(_EQUIVALENTS)


class SecretPattern:
    """A secret recognised by the shape of its value.

    When the regex has a group named ``secret`` only that group is replaced (``Bearer <token>``
    keeps the word ``Bearer``); otherwise the whole match is.

    Args:
        name: A short name shown in reprs (``openai_key``).
        regex: The pattern, as text or compiled.
        hints: Literals of which at least one appears in any text the pattern matches (their
            case folded by `fold_case`); the regex is skipped when none does. Empty means:
            always run the regex.
    """

    __slots__ = ("hints", "name", "regex")

    def __init__(self, name: str, regex: str | re.Pattern[str], hints: Iterable[str] = ()) -> None:
        self.name = name
        self.regex = re.compile(regex)  # a compiled regex comes back as it is
        self.hints = tuple(fold_case(hint) for hint in hints)

    def may_match(self, lowered: str) -> bool:
        """Tell whether the pattern can match a text, from the text in lower case.

        Args:
            lowered: The text, lower-cased by `fold_case`.

        Returns:
            ``False`` only when no hint appears in it.
        """
        return not self.hints or any(hint in lowered for hint in self.hints)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretPattern):
            return NotImplemented
        return (self.name, self.regex.pattern, self.hints) == (
            other.name,
            other.regex.pattern,
            other.hints,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.regex.pattern))

    def __repr__(self) -> str:
        return f"SecretPattern({self.name!r}, {self.regex.pattern!r})"


PatternLike = str | re.Pattern[str] | SecretPattern
"""What a redaction pattern may be given as."""

AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "APKA")

DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    SecretPattern(
        "private_key",
        # Also matches a block cut before its END line (a bounded string must not leak a prefix).
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?-----END[A-Z0-9 ]*PRIVATE KEY"
        r"(?: BLOCK)?-----|.*)",
        hints=("private key",),
    ),
    SecretPattern(
        "url_credentials",
        # The password runs to the last "@" before the host, so one holding a raw "@" is hidden
        # whole (mysql://root:p@ssW0rd!@db/x).
        r"\b[A-Za-z][A-Za-z0-9+.-]*://(?P<secret>(?!\[redacted:)[^\s/?#@:]*:[^\s/?#]*)@",
        hints=("://",),
    ),
    SecretPattern(
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{16,}",
        hints=("sk-",),
    ),
    SecretPattern(
        "bearer_token",
        r"(?i)\bbearer\s+(?P<secret>(?!\[redacted:)[A-Za-z0-9._~+/-]{8,}=*)",
        hints=("bearer",),
    ),
    SecretPattern(
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        hints=("eyj",),
    ),
    SecretPattern(
        "aws_access_key",
        rf"(?<![A-Z0-9])(?:{'|'.join(AWS_PREFIXES)})[A-Z0-9]{{16}}(?![A-Z0-9])",
        hints=tuple(prefix.lower() for prefix in AWS_PREFIXES),
    ),
    SecretPattern(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretPattern("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", hints=("xox",)),
    SecretPattern("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", hints=("aiza",)),
)
"""Secret shapes redacted in every string by default."""


def assignment_pattern(keys: Iterable[tuple[str, ...]]) -> SecretPattern:
    """Build the pattern for ``key=value`` and ``"key": "value"`` written inside text.

    Args:
        keys: The secret key names, as words.

    Returns:
        A pattern whose ``secret`` group is the assigned value.
    """
    # sorted, so the regex is the same text in every process; the alternatives' order does not
    # matter, as a key's words are [a-z0-9]+ and only a sign, a quote or a space may follow one
    words = sorted({key for key in keys if key})
    names = "|".join("[_-]?".join(re.escape(word) for word in key) for key in words)
    quote = r"(?:\\?[\"'])?"
    regex = (
        rf"(?i)(?<![a-z0-9])(?:{names})(?![a-z0-9]){quote}\s*[:=]\s*{quote}"
        # a value that is itself a key before its sign is that key's, not this one's value
        rf"(?P<secret>(?:(?:bearer|basic|token)\s+)?(?!\[redacted:)(?!(?:{names})(?![a-z0-9]){quote}\s*[:=])"
        r"[^\s\"',;&}\]\\]+)"
    )
    return SecretPattern("key_assignment", regex, hints=sorted({key[0] for key in words}))


def replace_secret(match: re.Match[str]) -> str:
    """Return a match's replacement: its ``secret`` group (or all of it) as a marker.

    Args:
        match: A match of a secret pattern.

    Returns:
        The matched text with the secret replaced.
    """
    if not match.group(0):  # a user pattern that matches the empty string redacts nothing
        return ""
    if "secret" in match.re.groupindex and match.group("secret") is not None:
        start, end = match.span("secret")
        offset = match.start()
        whole = match.group(0)
        return (
            whole[: start - offset] + redact_marker(match.group("secret")) + whole[end - offset :]
        )
    return redact_marker(match.group(0))


def as_pattern(pattern: PatternLike) -> SecretPattern:
    """Turn regex text or a compiled regex into a `SecretPattern` named after it.

    Args:
        pattern: The pattern.

    Returns:
        The secret pattern.

    Raises:
        ConfigurationError: If the regex text does not compile.
    """
    if isinstance(pattern, SecretPattern):
        return pattern
    try:
        compiled = re.compile(pattern)  # a compiled regex comes back as it is
    except re.error as error:
        raise ConfigurationError(
            f"redaction pattern {pattern!r} does not compile: {error}"
        ) from None
    return SecretPattern(compiled.pattern, compiled)
