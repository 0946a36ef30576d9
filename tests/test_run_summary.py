"""print(result) says how a run ended and why: status, stop reason, detail, requests, output."""

from __future__ import annotations

from ownloop import Agent, RunStatus, ToolRegistry
from ownloop.contracts import ModelRequest, ModelResponse
from ownloop.exceptions import PermanentModelError
from ownloop.testing import FunctionModel, ScriptedModel, final, tool_call


def _failing(_request: ModelRequest) -> ModelResponse:
    raise PermanentModelError("authentication: bad key (HTTP 401)", category="authentication")


def test_a_failed_run_names_its_stop_reason_and_detail() -> None:
    """A model error prints 'failed (model_error): <why>', not 'failed model_error None'."""
    result = Agent(FunctionModel(_failing)).run_sync("hi")
    assert result.status is RunStatus.FAILED
    text = str(result)
    assert text == result.summary()
    assert text.startswith(f"failed (model_error): {result.detail}")
    assert "bad key (HTTP 401)" in text
    assert "output:" not in text


def test_a_completed_run_prints_its_output_after_the_reason() -> None:
    """A completed run's summary ends with its output."""
    result = Agent(ScriptedModel([final("Forty-two.")])).run_sync("hi")
    lines = result.summary().splitlines()
    assert lines[0].startswith("completed (final_output)")
    assert lines[-1] == "output: Forty-two."


def test_a_paused_run_lists_the_approvals_it_waits_for() -> None:
    """A paused run names each request: its id, tool and arguments."""
    registry = ToolRegistry()

    @registry.tool(effect="write", requires_approval=True)
    def send_reply(to: str) -> str:
        """Send a reply.

        Args:
            to: The recipient.
        """
        return to

    model = ScriptedModel([tool_call("send_reply", "c1", to="ann@example.com"), final("sent")])
    paused = Agent(model, registry).run_sync("reply")
    (request,) = paused.approval_requests
    lines = str(paused).splitlines()
    assert lines[0].startswith("paused (approval_required)")
    assert lines[1] == f"waiting for approval {request.id}: send_reply {{'to': 'ann@example.com'}}"


def test_a_result_without_detail_prints_status_and_reason_alone() -> None:
    """With no detail and no output, the summary is 'status (reason)'."""
    result = Agent(ScriptedModel([final("x")])).run_sync("hi")
    bare = result.model_copy(update={"detail": "", "output": None})
    assert str(bare) == "completed (final_output)"
