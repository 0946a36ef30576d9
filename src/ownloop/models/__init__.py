"""The model port and its adapters.

`AgentModel` is the port: one async method taking ownloop's `ModelRequest` and returning a
`ModelResponse`. Provider adapters live beside it; only they may import a provider SDK.
"""

from ownloop.models._port import (
    AgentModel,
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
)

__all__ = [
    "AgentModel",
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
]
