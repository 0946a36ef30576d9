"""PostgreSQL DSNs: a URL's user information read as people write it, and never shown.

libpq ends a URL's user information at its *first* ``@``, so ``postgresql://u:p@ssW0rd!@host/db``
connects to the host ``ssW0rd!@host`` and shows the password's tail wherever the host is shown.
A password is the part that may hold an ``@`` (a host never does): the user information ends at
the *last* ``@`` of the authority, and is percent-encoded before libpq reads it. A URL where that
reading is ambiguous (an ``@`` after a ``/``, ``?`` or ``#``: a password holding a raw ``/``) is
refused; no error says anything of the DSN's text.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from ownloop.exceptions import ConfigurationError

__all__ = ["normalize_dsn"]

_URL = re.compile(r"(?i)^(postgres(?:ql)?://)(.*)$", re.DOTALL)
_REFUSED = (
    "cannot read the PostgreSQL DSN: an '@' follows a '/', '?' or '#', so where the password ends "
    "is ambiguous; percent-encode '@', '/', '?' and '#' in the user name, password and parameters "
    "(the DSN is not shown)"
)


def normalize_dsn(dsn: str) -> str:
    """Return the DSN with a URL's user name and password percent-encoded, as libpq reads them.

    A ``key=value`` connection string is returned as it is (its values may hold ``@``).

    Args:
        dsn: A libpq connection string or a ``postgresql://`` URL.

    Returns:
        The DSN to give libpq.

    Raises:
        ConfigurationError: If the URL's user information cannot be told from its path.
    """
    match = _URL.match(dsn)
    if match is None:
        return dsn
    scheme, rest = match.groups()
    end = min((at for at in (rest.find(mark) for mark in "/?#") if at >= 0), default=len(rest))
    if "@" in rest[end:]:
        raise ConfigurationError(_REFUSED)
    authority = rest[:end]
    at = authority.rfind("@")
    if at < 0:
        return dsn
    user, colon, password = authority[:at].partition(":")
    userinfo = _encoded(user) + (":" + _encoded(password) if colon else "")
    return f"{scheme}{userinfo}@{authority[at + 1 :]}{rest[end:]}"


def _encoded(part: str) -> str:
    """Percent-encode a user name or password (an escape already there is kept)."""
    return quote(unquote(part), safe="")
