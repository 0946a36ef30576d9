"""How the adapters are configured from the environment, and which arguments win.

One variable chooses the wire API (``OWNLOOP_API``), one the compatibility profile
(``OWNLOOP_COMPAT``); the rest are the variables the official SDK reads. An explicit argument
always overrides the environment; an empty variable counts as unset. Errors name the variable to
set and never echo a key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ownloop._text import strip_userinfo
from ownloop.exceptions import ConfigurationError
from ownloop.models._compat import CompatProfile, resolve_profile

__all__ = [
    "API_KEY_VARIABLE",
    "API_VARIABLE",
    "BASE_URL_VARIABLE",
    "COMPAT_VARIABLE",
    "MODEL_VARIABLE",
    "EnvironmentSettings",
    "WireApi",
    "read_settings",
]

API_KEY_VARIABLE = "OPENAI_API_KEY"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
MODEL_VARIABLE = "OPENAI_MODEL"
API_VARIABLE = "OWNLOOP_API"
COMPAT_VARIABLE = "OWNLOOP_COMPAT"

WireApi = Literal["chat", "responses", "react"]
_APIS: tuple[WireApi, ...] = ("chat", "responses", "react")


@dataclass(frozen=True, slots=True)
class EnvironmentSettings:
    """The resolved configuration of an adapter.

    Attributes:
        api_key: The API key.
        model: The model name.
        base_url: The API base URL, or ``None`` for OpenAI's.
        api: The wire API: ``chat``, ``responses`` or ``react``.
        profile: The compatibility profile.
    """

    api_key: str
    model: str
    base_url: str | None
    api: WireApi
    profile: CompatProfile

    def __repr__(self) -> str:
        shown = strip_userinfo(self.base_url) if self.base_url is not None else None
        return (
            f"EnvironmentSettings(model={self.model!r}, base_url={shown!r}, "
            f"api={self.api!r}, profile={self.profile.name!r})"
        )


def _pick(explicit: str | None, environ: Mapping[str, str], variable: str) -> str | None:
    if explicit is not None and explicit.strip():
        return explicit.strip()
    value = environ.get(variable, "").strip()
    return value or None


def read_settings(
    *,
    api_key: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api: str | None = None,
    compat: str | CompatProfile | None = None,
    environ: Mapping[str, str] | None = None,
) -> EnvironmentSettings:
    """Resolve the configuration: explicit arguments first, then the environment.

    Args:
        api_key: The API key, instead of ``OPENAI_API_KEY``.
        model: The model, instead of ``OPENAI_MODEL``.
        base_url: The base URL, instead of ``OPENAI_BASE_URL``.
        api: ``chat``, ``responses`` or ``react``, instead of ``OWNLOOP_API`` (default ``chat``).
        compat: A profile name or profile, instead of ``OWNLOOP_COMPAT`` (default ``openai``).
        environ: The environment to read; `os.environ` by default.

    Returns:
        The settings.

    Raises:
        ConfigurationError: If the key or the model is missing, or the API or profile unknown;
            the message names the variable to set.
    """
    env = os.environ if environ is None else environ
    key = _pick(api_key, env, API_KEY_VARIABLE)
    if key is None:
        raise ConfigurationError(
            f"no API key: set {API_KEY_VARIABLE} or pass api_key= (a local server that needs "
            f"no key still needs a placeholder, for example {API_KEY_VARIABLE}=local)"
        )
    chosen_model = _pick(model, env, MODEL_VARIABLE)
    if chosen_model is None:
        raise ConfigurationError(
            f"no model: set {MODEL_VARIABLE} (for example {MODEL_VARIABLE}=gpt-4.1-mini) or "
            "pass model="
        )
    wanted = (_pick(api, env, API_VARIABLE) or "chat").lower()
    chosen_api = next((name for name in _APIS if name == wanted), None)
    if chosen_api is None:
        raise ConfigurationError(
            f"unknown wire API {wanted!r} in {API_VARIABLE}: choose chat, responses or react"
        )
    if isinstance(compat, CompatProfile):
        profile = compat
    else:
        profile = resolve_profile(_pick(compat, env, COMPAT_VARIABLE))
    return EnvironmentSettings(
        api_key=key,
        model=chosen_model,
        base_url=_pick(base_url, env, BASE_URL_VARIABLE),
        api=chosen_api,
        profile=profile,
    )
