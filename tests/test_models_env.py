"""Configuration: the environment picks the adapter, explicit arguments win, secrets stay secret."""

from __future__ import annotations

import asyncio
import warnings

import openai
import pytest

from ownloop.exceptions import ConfigurationError, ProviderError
from ownloop.models import (
    PROFILES,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ReActTextModel,
    allow_model_requests,
    from_env,
)

from .openai_server import OpenAIServer, ask, json_reply

KEY = "sk-planted-ENV-SECRET-0123456789"
ANSWER = {"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A clean environment naming a key and a model."""
    for name in ("OPENAI_BASE_URL", "OWNLOOP_API", "OWNLOOP_COMPAT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    return monkeypatch


@pytest.mark.parametrize(
    ("api", "adapter"),
    [
        (None, OpenAIChatModel),
        ("chat", OpenAIChatModel),
        ("responses", OpenAIResponsesModel),
        ("REACT", ReActTextModel),
    ],
)
def test_ownloop_api_chooses_the_adapter(
    environment: pytest.MonkeyPatch, api: str | None, adapter: type
) -> None:
    """OWNLOOP_API picks chat (the default), responses or react."""
    if api is not None:
        environment.setenv("OWNLOOP_API", api)
    model = from_env()
    assert type(model) is adapter
    assert (model.model_name, model.profile.name) == ("env-model", "openai")


def test_explicit_arguments_override_the_environment(environment: pytest.MonkeyPatch) -> None:
    """Arguments win over OWNLOOP_API, OPENAI_MODEL, OPENAI_BASE_URL and OWNLOOP_COMPAT."""
    environment.setenv("OWNLOOP_API", "responses")
    environment.setenv("OWNLOOP_COMPAT", "vllm")
    environment.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    model = from_env(
        api="chat", model="mine", base_url="http://127.0.0.1:2/v1", compat="ollama", timeout_s=5
    )
    assert type(model) is OpenAIChatModel
    assert (
        repr(model)
        == "OpenAIChatModel(model='mine', base_url='http://127.0.0.1:2/v1', compat='ollama')"
    )
    assert OpenAIResponsesModel.from_env().profile is PROFILES["vllm"]
    assert OpenAIChatModel(model="direct").model_name == "direct"


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("OPENAI_API_KEY", "", "OPENAI_API_KEY"),
        ("OPENAI_MODEL", "  ", "OPENAI_MODEL"),
        ("OWNLOOP_API", "assistants", "OWNLOOP_API"),
        ("OWNLOOP_COMPAT", "nonsense", "OWNLOOP_COMPAT"),
    ],
)
def test_a_missing_or_unknown_value_names_the_variable(
    environment: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    """An empty variable counts as unset, and every configuration error names what to set."""
    environment.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=named) as raised:
        from_env()
    assert KEY not in str(raised.value)


def test_the_key_never_shows_in_repr_or_errors(environment: pytest.MonkeyPatch) -> None:
    """Adapters' repr and their failures never contain the key."""
    for adapter in (OpenAIChatModel, OpenAIResponsesModel, ReActTextModel):
        model = adapter()
        assert KEY not in repr(model)
        assert KEY not in repr(vars(model))
    with pytest.raises(ConfigurationError) as raised:
        asyncio.run(OpenAIChatModel().respond(ask("hi")))
    assert KEY not in str(raised.value)


def test_one_adapter_serves_several_event_loops_without_leaks(
    environment: pytest.MonkeyPatch,
) -> None:
    """run_sync again and again: each loop gets its client, closed when that loop shuts down."""
    with OpenAIServer(lambda received: json_reply(ANSWER)) as server, allow_model_requests(True):
        model = OpenAIChatModel(base_url=server.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                assert asyncio.run(model.respond(ask("hi"))).final_output == "ok"

            async def twice() -> None:
                await model.respond(ask("hi"))
                await model.respond(ask("hi"))
                await model.aclose()
                await model.aclose()

            asyncio.run(twice())
    assert len(server.requests) == 5
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_given_client_is_used_without_retries_and_left_open(
    environment: pytest.MonkeyPatch,
) -> None:
    """An application's own AsyncOpenAI client is used with retries off and is not closed for it."""
    failing = json_reply({"error": {"message": "busy"}}, 503)
    with OpenAIServer(lambda received: failing) as server, allow_model_requests(True):

        async def run() -> tuple[int, bool]:
            client = openai.AsyncOpenAI(api_key="sk-client-key", base_url=server.url, max_retries=5)
            async with OpenAIChatModel("m", client=client) as model:
                error = None
                try:
                    await model.respond(ask("hi"))
                except ProviderError as raised:
                    error = raised
            assert getattr(error, "category", None) == "overloaded"
            still_open = not client.is_closed()
            await client.close()
            return len(server.requests), still_open

        attempts, still_open = asyncio.run(run())
    assert (attempts, still_open) == (1, True)
