"""Run cost estimates: quadratic growth, its inverse, compaction's linear growth, the table."""

from __future__ import annotations

import itertools
import re

import pytest

from ownloop import ConfigurationError, Price
from ownloop.cost import (
    MAX_ROUNDS,
    RunTokenEstimate,
    estimate_run_tokens,
    format_cost_table,
    rounds_for_budget,
)

from .context_kit import ROOT, run_markdown

# The tutorial's example in characters at four per token: 300, 60, 120 and 400 tokens.
SIZES = {
    "system_chars": 1_200,
    "question_chars": 240,
    "think_chars": 480,
    "observation_chars": 1_600,
}


def test_each_turn_resends_the_history_so_input_grows_linearly() -> None:
    """Turn n's input is the head plus n - 1 earlier turns; every turn writes the same output."""
    estimate = estimate_run_tokens(4, **SIZES)
    assert estimate.input_per_turn == (360, 880, 1_400, 1_920)
    assert estimate.output_per_turn == (120,) * 4
    assert estimate.peak_input_tokens == 1_920


def test_the_total_grows_with_the_square_of_the_turns() -> None:
    """Totals have a constant second difference, and doubling the turns about quadruples them."""
    totals = [estimate_run_tokens(turns, **SIZES).total_tokens for turns in range(1, 12)]
    second = {totals[i + 2] - 2 * totals[i + 1] + totals[i] for i in range(len(totals) - 2)}
    assert second == {520}  # one turn's think + observation, carried once more each turn
    assert 3.5 < totals[9] / totals[4] < 4.2  # 10 turns vs 5


def test_the_tutorials_numbers_are_reproduced() -> None:
    """Two rounds cost 1,480 tokens, eight cost 18,400: 12.4 times as much."""
    two, eight = (estimate_run_tokens(turns, **SIZES) for turns in (2, 8))
    assert (two.total_tokens, eight.total_tokens) == (1_480, 18_400)
    assert [rounds_for_budget(b, **SIZES) for b in (5_000, 20_000, 100_000)] == [3, 8, 19]


@pytest.mark.parametrize("budget", [0, 479, 480, 1_480, 5_000, 77_777, 1_000_000])
def test_rounds_for_budget_is_the_inverse_of_the_estimate(budget: int) -> None:
    """The answer's total fits the budget and one more turn would not."""
    rounds = rounds_for_budget(budget, **SIZES)
    assert estimate_run_tokens(rounds, **SIZES).total_tokens <= budget
    assert estimate_run_tokens(rounds + 1, **SIZES).total_tokens > budget


def test_compaction_makes_growth_linear() -> None:
    """Carrying at most k turns caps the input per turn, so the total grows linearly."""
    estimate = estimate_run_tokens(12, keep_last_turns=2, **SIZES)
    assert estimate.peak_input_tokens == 360 + 2 * 520
    totals = [estimate_run_tokens(t, keep_last_turns=2, **SIZES).total_tokens for t in range(3, 9)]
    assert len({b - a for a, b in itertools.pairwise(totals)}) == 1
    assert rounds_for_budget(100_000, keep_last_turns=2, **SIZES) > rounds_for_budget(
        100_000, **SIZES
    )


def test_chars_per_token_and_empty_runs() -> None:
    """Sizes are converted at the given rate, rounded up; zero turns cost nothing."""
    estimate = estimate_run_tokens(
        1, system_chars=7, question_chars=0, think_chars=1, observation_chars=0, chars_per_token=3
    )
    assert (estimate.input_tokens, estimate.output_tokens) == (3, 1)
    assert estimate_run_tokens(0, **SIZES).total_tokens == 0
    assert estimate_run_tokens(0, **SIZES).peak_input_tokens == 0
    zero = dict.fromkeys(SIZES, 0)
    assert rounds_for_budget(10, **zero) == MAX_ROUNDS  # nothing grows: only the cap stops it


@pytest.mark.parametrize(
    "change",
    [{"system_chars": -1}, {"chars_per_token": 0}, {"turns": -1}, {"keep_last_turns": -1}],
)
def test_impossible_sizes_are_configuration_errors(change) -> None:
    """Negative sizes, turns or kept turns and a non-positive rate are refused."""
    arguments = {"turns": 3, **SIZES, **change}
    with pytest.raises(ConfigurationError):
        estimate_run_tokens(**arguments)
    if "turns" not in change:
        with pytest.raises(ConfigurationError):
            rounds_for_budget(1_000, **{k: v for k, v in arguments.items() if k != "turns"})


def test_estimates_are_priced() -> None:
    """An estimate's cost is its input and output tokens at the price per million."""
    estimate = estimate_run_tokens(8, **SIZES)
    assert estimate.cost(Price(input=2.5, output=10)) == pytest.approx(
        (17_440 * 2.5 + 960 * 10) / 1e6
    )


def test_cost_table_compares_each_run_with_the_first() -> None:
    """The table has one row per estimate, the ratio to the first, and costs when priced."""
    estimates = [estimate_run_tokens(turns, **SIZES) for turns in (2, 4, 8)]
    table = format_cost_table(estimates, price=Price(input=2.5, output=10))
    lines = table.splitlines()
    assert lines[0].startswith("| turns | input tokens | output tokens | total tokens |")
    assert lines[0].endswith("| cost |")
    assert lines[2] == "| 2 | 1,240 | 240 | 1,480 | 1.0x | 0.0055 |"
    assert lines[4] == "| 8 | 17,440 | 960 | 18,400 | 12.4x | 0.0532 |"
    assert "cost" not in format_cost_table(estimates)
    empty = RunTokenEstimate(turns=0, input_per_turn=(), output_per_turn=())
    assert format_cost_table([empty]).splitlines()[2] == "| 0 | 0 | 0 | 0 | 0.0x |"
    assert len(format_cost_table([]).splitlines()) == 2


def test_the_cost_page_runs_and_its_tables_are_the_estimators(capsys) -> None:
    """docs/concepts/cost.md runs as written, and the tables it shows are what the code prints."""
    page = run_markdown("docs/concepts/cost.md")
    printed = capsys.readouterr().out
    text = (ROOT / "docs/concepts/cost.md").read_text(encoding="utf-8")
    tables = re.findall(r"^(\| turns .*?)\n\n", text, re.M | re.S)
    assert len(tables) == 2
    for table in tables:
        assert table in printed
    assert "100000 19" in printed
    result = page["result"]
    assert (result.status, result.stop_reason, result.usage.steps) == ("stopped", "max_cost", 3)
    assert round(result.usage.cost, 4) == 0.0154
    assert result.detail == (
        "budget max_cost exhausted before model call: limit 0.02, observed 0.030555 = 0.01542 "
        "spent + about 0.015135 estimated for the next request"
    )
