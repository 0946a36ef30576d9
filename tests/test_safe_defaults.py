"""A tool that declares no effect is a write: denied unless allowed or approved, and said once."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections import Counter

import pytest

from ownloop import Agent, Approval, RunStatus, StopReason, ToolRegistry
from ownloop.demo.ablation import run_ablation
from ownloop.policy import allow_tools, allow_writes
from ownloop.testing import ScriptedModel, final, tool_call


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_tool_without_a_declared_effect_is_a_write() -> None:
    """The bare decorator and add() without effect= register writes; effect='read' is a read."""
    registry = ToolRegistry()

    @registry.tool
    def send_reply_bare(to: str) -> str:
        """Send a reply.

        Args:
            to: The recipient.
        """
        return to

    @registry.tool(name="send_reply_options", timeout_s=5)
    def send_reply_options(to: str) -> str:
        """Send a reply.

        Args:
            to: The recipient.
        """
        return to

    def lookup(to: str) -> str:
        """Look up a contact.

        Args:
            to: The contact.
        """
        return to

    registry.add(lookup, name="send_reply_added")
    registry.add(lookup, name="lookup_read", effect="read")
    effects = {spec.name: spec.effect for spec in registry.specs()}
    assert effects == {
        "send_reply_bare": "write",
        "send_reply_options": "write",
        "send_reply_added": "write",
        "lookup_read": "read",
    }


def test_an_undeclared_tool_never_runs_under_the_default_policy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A forgotten declaration sends nothing: the call is denied and the build warned how to fix."""
    sent: Counter[str] = Counter()
    registry = ToolRegistry()

    @registry.tool
    def send_undeclared(to: str) -> str:
        """Send mail.

        Args:
            to: The recipient.
        """
        sent[to] += 1
        return "sent"

    model = ScriptedModel([tool_call("send_undeclared", "c1", to="ann"), final("done")])
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        agent = Agent(model, registry)
    (warning,) = _warnings(caplog)
    assert warning.startswith("tool 'send_undeclared' is registered but the policy never offers it")
    assert "declare it requires_approval=True" in warning
    assert "allow_writes('send_undeclared')" in warning
    assert warning.endswith('if it only reads, declare @registry.tool(effect="read")')
    result = agent.run_sync("reply to ann")
    assert (result.status, result.stop_reason) == (RunStatus.FAILED, StopReason.TOOL_DENIED)
    assert sent == Counter()


def test_an_undeclared_tool_declared_requires_approval_pauses_then_runs_once_approved() -> None:
    """requires_approval=True without an effect is an approval-gated write under the default."""
    sent: Counter[str] = Counter()
    registry = ToolRegistry()

    @registry.tool(requires_approval=True)
    def send_gated(to: str) -> str:
        """Send mail once a person approves.

        Args:
            to: The recipient.
        """
        sent[to] += 1
        return "sent"

    model = ScriptedModel([tool_call("send_gated", "c1", to="ann"), final("done")])
    agent = Agent(model, registry)
    paused = agent.run_sync("reply to ann")
    assert paused.status is RunStatus.PAUSED
    assert sent == Counter()
    (request,) = paused.approval_requests
    approval = Approval(request_id=request.id, approved=True, approver="reviewer")
    done = agent.resume_sync(paused, approvals=[approval])
    assert done.status is RunStatus.COMPLETED
    assert sent == Counter({"ann": 1})


def test_tools_one_rule_never_offers_are_named_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three writes the policy leaves out cost one warning naming all three and the rule."""
    registry = ToolRegistry()
    for name in ("grp_reset", "grp_checkout", "grp_branch", "grp_add"):
        registry.add(lambda: "ok", name=name, description="A git write.", effect="write")
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        Agent(ScriptedModel([]), registry, policy=allow_writes("grp_add"))
        Agent(ScriptedModel([]), registry, policy=allow_writes("grp_add"))
    assert _warnings(caplog) == [
        "3 tools are registered but the policy never offers them (rule allow_writes('grp_add')): "
        "'grp_reset', 'grp_checkout', 'grp_branch'; for 'grp_reset': write tool 'grp_reset' is "
        "not explicitly allowed; allow it with allow_writes('grp_reset'); "
        'if it only reads, declare @registry.tool(effect="read")'
    ]


def test_a_never_offered_read_gets_no_effect_hint(caplog: pytest.LogCaptureFixture) -> None:
    """A read the policy leaves out is named without the effect='read' hint (it has it)."""
    registry = ToolRegistry()
    registry.add(lambda: "ok", name="hint_read_a", description="A read.", effect="read")
    registry.add(lambda: "ok", name="hint_read_b", description="A read.", effect="read")
    registry.add(lambda: "ok", name="hint_kept", description="A read.", effect="read")
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        Agent(ScriptedModel([]), registry, policy=allow_tools("hint_kept"))
    (warning,) = _warnings(caplog)
    assert warning.startswith("2 tools are registered but the policy never offers them")
    assert "effect=" not in warning


def test_ownloop_ablate_prints_no_warning_about_the_tool_it_refuses_on_purpose() -> None:
    """'ownloop ablate' from a shell: the table on stdout, nothing on stderr (publish expected)."""
    done = subprocess.run(
        [sys.executable, "-m", "ownloop.cli", "ablate"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "publish" in done.stdout
    assert done.stderr == ""


def test_the_lab_still_warns_about_a_tool_a_users_policy_leaves_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A --policy base without check_config: the lab names check_config, never publish."""
    base = {"allowed_tools": ["read_config", "write_config"], "max_requests": 4}
    with caplog.at_level(logging.WARNING, logger="ownloop"):
        run_ablation("publish", "essential", base=base)
    messages = _warnings(caplog)
    assert any("'check_config'" in message for message in messages), messages
    assert not any(message.startswith("tool 'publish'") for message in messages), messages
