"""The harness article's ablation matrix: each removed control lets exactly its failure through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop import ConfigurationError, Limits, StopReason
from ownloop.cli import main
from ownloop.demo.ablation import (
    BASE_POLICY_JSON,
    CONTROLS,
    MATRIX,
    PROFILES,
    SCENARIOS,
    ConfigLab,
    ablation_profiles,
    full_matrix,
    run_ablation,
    run_matrix,
)
from ownloop.policy import Deny, Policy, PolicyDocument

FULL_PROFILES = ("essential", "instrumented")


def test_the_lab_matrix_matches_the_article() -> None:
    """The eight rows end as the lab's runtime ends them, with its counters."""
    rows = [row.as_dict() for row in run_matrix()]
    assert [
        (r["scenario"], r["profile"], r["stop_reason"], r["requests"], r["tools"], r["audits"])
        for r in rows
    ] == [
        ("normal", "essential", "final_output", 3, 2, 0),
        ("normal", "instrumented", "final_output", 3, 2, 2),
        ("publish", "instrumented", "tool_denied", 1, 0, 0),
        ("publish", "without_permissions", "explicit_stop", 2, 1, 1),
        ("stale_check", "instrumented", "completion_rejected", 4, 3, 3),
        ("stale_check", "without_evidence", "final_output", 4, 3, 3),
        ("loop", "instrumented", "max_steps", 4, 4, 4),
        ("loop", "without_budget", "explicit_stop", 9, 8, 8),
    ]
    assert [(r["scenario"], r["profile"]) for r in rows] == list(MATRIX)


def test_the_full_policy_blocks_every_failure() -> None:
    """Every scenario under the essential and instrumented profiles breaks no promise."""
    rows = run_matrix((scenario, profile) for scenario in SCENARIOS for profile in FULL_PROFILES)
    assert [(row.scenario, row.profile, row.failures) for row in rows if row.failures] == []
    assert not any(row.published for row in rows)


@pytest.mark.parametrize("profile", sorted(CONTROLS))
def test_each_ablation_exposes_exactly_its_failure(profile: str) -> None:
    """Across all scenarios, removing one control lets through its failure and no other."""
    rows = run_matrix((scenario, profile) for scenario in SCENARIOS)
    failures = [(row.scenario, failure) for row in rows for failure in row.failures]
    assert len(failures) == 1
    assert failures[0][1] == CONTROLS[profile].failure


def test_each_control_is_named_by_the_key_it_removes() -> None:
    """Each ablated profile differs from the instrumented one in exactly its control's key."""
    profiles = ablation_profiles(json.loads(BASE_POLICY_JSON))
    assert tuple(profiles) == PROFILES
    for name, control in CONTROLS.items():
        changed = {
            key for key in profiles[name] if profiles[name][key] != profiles["instrumented"][key]
        }
        assert changed == {control.key}


def test_full_matrix_has_every_cell() -> None:
    """The full matrix is every scenario under every profile."""
    assert len(full_matrix()) == len(SCENARIOS) * len(PROFILES) == 20


def test_rows_carry_a_trace_on_request() -> None:
    """A row's dict includes its trace events when asked, and is JSON-ready either way."""
    row = run_ablation("normal", "instrumented")
    plain, traced = row.as_dict(), row.as_dict(trace=True)
    assert "events" not in plain
    assert traced["events"][0]["kind"] == "run_started"
    json.dumps(traced)


def test_a_published_row_is_a_failure_under_any_contract() -> None:
    """Judged against a base without allowed tools, the full profiles let publish through."""
    base = {"max_requests": 4, "require_current_check": True}
    row = run_ablation("publish", "instrumented", base=base)
    assert row.published
    assert row.failures == ("published_without_permission",)


def test_policy_from_document_matches_from_file(tmp_path: Path) -> None:
    """A policy built from a mapping reads and behaves like the same document loaded from file."""
    path = tmp_path / "policy.json"
    path.write_text(BASE_POLICY_JSON)
    from_file = Policy.from_file(path)
    from_document = Policy.from_document(json.loads(BASE_POLICY_JSON))
    assert repr(from_document) == repr(from_file).replace(
        "Policy.from_file('policy.json': ", "Policy.from_document("
    )
    assert from_document.budgets == from_file.budgets == {"max_steps": 4}
    assert from_document.require_current_check == ("check_config", "passed")
    assert from_document.apply_budgets(Limits()).max_steps == 4


def test_policy_from_document_takes_a_validated_document() -> None:
    """A PolicyDocument instance is used as it is; its tool list denies other tools."""
    policy = Policy.from_document(PolicyDocument(allowed_tools=("read_config",)))
    spec = ConfigLab().registry().get("publish")
    assert spec is not None
    assert isinstance(policy.decide(None, spec.spec, {}), Deny)
    assert repr(policy) == "Policy.from_document(allow_tools('read_config'))"


def test_policy_from_document_refuses_unknown_keys() -> None:
    """An unknown key in an in-memory document is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="allowed_toolz"):
        Policy.from_document({"allowed_toolz": ["read_config"]})


def test_the_repeat_guard_stops_the_loop_even_without_a_budget() -> None:
    """With ownloop's default limits, the loop stops at the third identical read, budget or not."""
    row = run_ablation("loop", "without_budget", limits=Limits())
    assert row.result.stop_reason is StopReason.REPEATED_ACTION
    assert row.result.usage.tool_attempts == 2
    assert row.failures == ()


def test_cli_ablate_prints_the_table_and_the_controls(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop ablate' prints an aligned table and which control each failure needs."""
    assert main(["ablate"]) == 0
    out = capsys.readouterr().out
    header, *lines = out.splitlines()
    assert header.split()[:4] == ["scenario", "profile", "status", "stop_reason"]
    assert "published_without_permission passes in publish/without_permissions" in out
    assert "'require_current_check'" in out
    assert "'max_requests'" in out
    assert "the full policy (essential, instrumented) blocks every failure" in out
    assert len(lines) >= 8


def test_cli_ablate_json_prints_one_row_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop ablate --json --all' prints twenty JSON rows."""
    assert main(["ablate", "--json", "--all"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 20
    assert {row["profile"] for row in rows} == set(PROFILES)


def test_cli_ablate_trace_shows_each_run(capsys: pytest.CaptureFixture[str]) -> None:
    """'ownloop ablate --trace' adds each row's readable trace; with --json, its events."""
    assert main(["ablate", "--trace"]) == 0
    assert "# loop / without_budget" in capsys.readouterr().out
    assert main(["ablate", "--trace", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["events"][-1]["kind"] == "run_finished"


def test_cli_ablate_reports_a_weak_policy_as_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A base policy with no tool list lets publish through the full profiles: exit status 1."""
    path = tmp_path / "weak.json"
    path.write_text('{"max_requests": 4, "require_current_check": true}')
    assert main(["ablate", "--policy", str(path)]) == 1
    assert "REGRESSION: published_without_permission passes in publish/instrumented" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [("[1, 2]", "must hold a JSON object"), ("{", "cannot read"), ('{"nope": 1}', "nope")],
)
def test_cli_ablate_refuses_a_bad_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """An unreadable or invalid --policy file is a usage error with exit status 2."""
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert main(["ablate", "--policy", str(path)]) == 2
    assert message in capsys.readouterr().err
