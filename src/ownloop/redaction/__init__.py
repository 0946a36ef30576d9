"""Redaction and bounding of values before they enter a trace.

The trace explains a run without carrying its secrets or its bulk. A `Redactor` replaces secrets
with a marker holding a short stable digest (so equal values still look equal): values under
secret key names, text shaped like a secret (API keys, bearer tokens, JWTs, AWS access keys, PEM
private keys, credentials in URLs), literal values the application names, and the parameters a
tool marks ``Sensitive()``. A `StreamRedactor` applies a redactor to text that arrives in pieces
(a streamed reply), releasing only what no rule can still change. `Bounds` cut strings, lists and
nesting with explicit markers.

Everything here is pure (the standard library, and ``regex`` for partial matching) and never
raises on JSON-shaped input. The tracing layer runs these as structlog processors before any sink
sees an event.
"""

from ownloop.redaction._bounds import DEFAULT_BOUNDS, Bounds, bound_value, cut_text
from ownloop.redaction._markers import redact_marker, redact_sensitive
from ownloop.redaction._patterns import DEFAULT_KEYS, DEFAULT_PATTERNS, SecretPattern
from ownloop.redaction._redactor import Redactor
from ownloop.redaction._stream import RESCAN_FLOOR, StreamRedactor

__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_KEYS",
    "DEFAULT_PATTERNS",
    "RESCAN_FLOOR",
    "Bounds",
    "Redactor",
    "SecretPattern",
    "StreamRedactor",
    "bound_value",
    "cut_text",
    "redact_marker",
    "redact_sensitive",
]
