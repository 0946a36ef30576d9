"""Redaction and bounding of values before they enter a trace.

The trace explains a run without carrying its secrets or its bulk. A `Redactor` replaces secrets
with a marker holding a short stable digest (so equal values still look equal): values under
secret key names, text shaped like a secret (API keys, bearer tokens, JWTs, AWS access keys, PEM
private keys, credentials in URLs), literal values the application names, and the parameters a
tool marks ``Sensitive()``. `Bounds` cut strings, lists and nesting with explicit markers.

Everything here is pure, uses only the standard library, and never raises on JSON-shaped input.
The tracing layer runs these as structlog processors before any sink sees an event.
"""

from ownloop.redaction._bounds import DEFAULT_BOUNDS, Bounds, bound_value, cut_text
from ownloop.redaction._markers import redact_marker, redact_sensitive
from ownloop.redaction._patterns import DEFAULT_KEYS, DEFAULT_PATTERNS, SecretPattern
from ownloop.redaction._redactor import Redactor

__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_KEYS",
    "DEFAULT_PATTERNS",
    "Bounds",
    "Redactor",
    "SecretPattern",
    "bound_value",
    "cut_text",
    "redact_marker",
    "redact_sensitive",
]
