"""The model port and its adapters.

`AgentModel` is the port: one async method taking ownloop's `ModelRequest` and returning a
`ModelResponse`. Provider adapters live beside it; only they may import a provider SDK:

- `OpenAIChatModel` speaks Chat Completions (OpenAI and any OpenAI-compatible server),
- `OpenAIResponsesModel` speaks the Responses API, stateless (``store=false``),
- `ReActTextModel` gives tools to models without tool calling, in the text ReAct format,
- `from_env` builds the one the environment names (``OWNLOOP_API``).

A `CompatProfile` (``OWNLOOP_COMPAT``) says what a server accepts.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ownloop.models._compat import PROFILES, CompatProfile
from ownloop.models._deltas import listen_to_text_deltas, report_text_delta
from ownloop.models._port import (
    AgentModel,
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
)

if _TYPE_CHECKING:
    from ownloop.models._adapter import OpenAIAdapter
    from ownloop.models._chat import OpenAIChatModel
    from ownloop.models._env import from_env
    from ownloop.models._react import ReActTextModel
    from ownloop.models._responses import OpenAIResponsesModel

# The adapters import the openai SDK, which takes longer to import than the rest of ownloop: they
# load on first use, so ``import ownloop`` (and the CLI's fast commands) never pay for it.
_LAZY = {
    "OpenAIAdapter": "ownloop.models._adapter",
    "OpenAIChatModel": "ownloop.models._chat",
    "OpenAIResponsesModel": "ownloop.models._responses",
    "ReActTextModel": "ownloop.models._react",
    "from_env": "ownloop.models._env",
}


def __getattr__(name: str) -> _Any:
    """Import an adapter (and with it the openai SDK) the first time it is asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "PROFILES",
    "AgentModel",
    "CompatProfile",
    "OpenAIAdapter",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ReActTextModel",
    "allow_model_requests",
    "check_model_requests_allowed",
    "from_env",
    "listen_to_text_deltas",
    "model_requests_allowed",
    "report_text_delta",
]
