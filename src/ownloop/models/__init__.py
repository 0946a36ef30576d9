"""The model port and its adapters.

`AgentModel` is the port: one async method taking ownloop's `ModelRequest` and returning a
`ModelResponse`. Provider adapters live beside it; only they may import a provider SDK:

- `OpenAIChatModel` speaks Chat Completions (OpenAI and any OpenAI-compatible server),
- `OpenAIResponsesModel` speaks the Responses API, stateless (``store=false``),
- `ReActTextModel` gives tools to models without tool calling, in the text ReAct format,
- `from_env` builds the one the environment names (``OWNLOOP_API``).

A `CompatProfile` (``OWNLOOP_COMPAT``) says what a server accepts.
"""

from ownloop.models._adapter import OpenAIAdapter
from ownloop.models._chat import OpenAIChatModel
from ownloop.models._compat import PROFILES, CompatProfile
from ownloop.models._deltas import listen_to_text_deltas, report_text_delta
from ownloop.models._env import from_env
from ownloop.models._port import (
    AgentModel,
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
)
from ownloop.models._react import ReActTextModel
from ownloop.models._responses import OpenAIResponsesModel

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
