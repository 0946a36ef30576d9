"""`from_env`: the adapter the environment asks for, with explicit arguments winning."""

from __future__ import annotations

from typing import Any

from ownloop.models._chat import OpenAIChatModel
from ownloop.models._react import ReActTextModel
from ownloop.models._responses import OpenAIResponsesModel
from ownloop.models._settings import read_settings

__all__ = ["from_env"]

_ADAPTERS: dict[str, type[OpenAIChatModel | OpenAIResponsesModel | ReActTextModel]] = {
    "chat": OpenAIChatModel,
    "responses": OpenAIResponsesModel,
    "react": ReActTextModel,
}


def from_env(
    *, api: str | None = None, **overrides: Any
) -> OpenAIChatModel | OpenAIResponsesModel | ReActTextModel:
    """Build the model adapter the environment describes.

    ``OWNLOOP_API`` (``chat`` by default, ``responses`` or ``react``) chooses the wire API;
    ``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``OPENAI_BASE_URL`` and ``OWNLOOP_COMPAT`` configure it.

    Args:
        api: The wire API, instead of ``OWNLOOP_API``.
        **overrides: Constructor arguments (``model``, ``api_key``, ``base_url``, ``compat``,
            ``timeout_s``...); each one wins over its variable.

    Returns:
        `OpenAIChatModel`, `OpenAIResponsesModel` or `ReActTextModel`.

    Raises:
        ConfigurationError: If a required variable is missing or a value is unknown; the
            message names the variable (``OWNLOOP_API`` for the API).
    """
    keys = ("api_key", "model", "base_url", "compat")
    chosen = read_settings(api=api, **{key: overrides.get(key) for key in keys})
    adapter = _ADAPTERS[chosen.api]
    return adapter(
        **{
            **overrides,
            "model": chosen.model,
            "api_key": chosen.api_key,
            "base_url": chosen.base_url,
            "compat": chosen.profile,
        }
    )
