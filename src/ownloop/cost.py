"""Money as a budget: token prices per model, what a run has spent, and what a run will cost.

Prices are the application's to supply (they change; ownloop ships none): a `PriceTable` maps a
model name to a `Price` in currency units per million tokens. With ``Limits.max_cost`` set, the
loop stops with ``max_cost`` *before* a request whose estimated input would cross the budget.

Before a run, `estimate_run_tokens` answers "what will this cost?": an agent loop resends its whole
history every turn, so the input of turn *n* carries the *n - 1* turns before it and the total
grows with the square of the turns. `rounds_for_budget` inverts it (the most turns a token budget
affords, a value for ``Limits.max_steps``) and `format_cost_table` prints the growth. Nothing here
does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ownloop.contracts import TokenUsage
from ownloop.exceptions import ConfigurationError

__all__ = [
    "Price",
    "PriceTable",
    "RunTokenEstimate",
    "cost_of",
    "estimate_run_tokens",
    "format_cost_table",
    "rounds_for_budget",
]

PER = 1_000_000
MAX_ROUNDS = 10_000
"""The most turns `rounds_for_budget` reports: the largest ``Limits.max_steps`` accepted."""

# A dated snapshot suffix: gpt-4o-2024-08-06, claude-3-5-sonnet-20240620, gpt-4-0613.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


class Price(BaseModel):
    """The price of one model's tokens, per million.

    Attributes:
        input: Per million input tokens.
        output: Per million output tokens (reasoning included).
        cached_input: Per million cached input tokens; the input price when not given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


class PriceTable:
    """Prices by model name, with an optional default for unlisted models.

    Args:
        prices: Model name -> `Price` (or a mapping with ``input``/``output``/``cached_input``).
        default: The price of models not listed; without it an unlisted model is an error.

    Raises:
        ConfigurationError: If a price is invalid.
    """

    def __init__(
        self,
        prices: Mapping[str, Price | Mapping[str, float]],
        *,
        default: Price | None = None,
    ) -> None:
        try:
            self._prices = {
                name: price if isinstance(price, Price) else Price.model_validate(price)
                for name, price in prices.items()
            }
        except ValueError as error:
            raise ConfigurationError(f"invalid price table: {error}") from None
        self._default = default

    def price(self, model: str | None) -> Price:
        """Return a model's price.

        Providers answer with the dated snapshot they served (``gpt-4o-2024-08-06`` for
        ``gpt-4o``): a name not listed is looked up again without its date suffix.

        Args:
            model: The model name.

        Raises:
            ConfigurationError: If the model is not listed and there is no default.
        """
        name = model or ""
        price = self._prices.get(name) or self._prices.get(_SNAPSHOT.sub("", name), self._default)
        if price is None:
            listed = ", ".join(sorted(self._prices)) or "none"
            raise ConfigurationError(f"no price for model {model!r} (priced: {listed})")
        return price

    def __repr__(self) -> str:
        return f"PriceTable(models={sorted(self._prices)}, default={self._default is not None})"


def cost_of(usage: TokenUsage, price: Price) -> float:
    """Return what one response's tokens cost.

    Args:
        usage: The tokens the provider reported.
        price: The model's price.

    Returns:
        The cost in the price table's currency.
    """
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_price = price.input if price.cached_input is None else price.cached_input
    return (
        (usage.input_tokens - cached) * price.input
        + cached * cached_price
        + usage.output_tokens * price.output
    ) / PER


class RunTokenEstimate(BaseModel):
    """The tokens a run of some turns is expected to use, turn by turn.

    Attributes:
        turns: How many model turns.
        input_per_turn: Input tokens of each turn's request, in order.
        output_per_turn: Output tokens of each turn, in order.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    turns: int = Field(ge=0)
    input_per_turn: tuple[int, ...]
    output_per_turn: tuple[int, ...]

    @property
    def input_tokens(self) -> int:
        """Input tokens over the run."""
        return sum(self.input_per_turn)

    @property
    def output_tokens(self) -> int:
        """Output tokens over the run."""
        return sum(self.output_per_turn)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over the run."""
        return self.input_tokens + self.output_tokens

    @property
    def peak_input_tokens(self) -> int:
        """The largest single request: what must fit the model's context window."""
        return max(self.input_per_turn, default=0)

    def cost(self, price: Price) -> float:
        """Return what the run would cost at ``price`` (no cached input assumed).

        Args:
            price: The model's price.

        Returns:
            The cost in the price's currency.
        """
        return cost_of(
            TokenUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens), price
        )


def _sizes(
    system_chars: int,
    question_chars: int,
    think_chars: int,
    observation_chars: int,
    chars_per_token: float,
) -> tuple[int, int, int]:
    """Return the tokens of the pinned head, of one turn's output, and of one carried turn."""
    if chars_per_token <= 0:
        raise ConfigurationError(f"chars_per_token must be positive, got {chars_per_token}")
    sizes = {
        "system_chars": system_chars,
        "question_chars": question_chars,
        "think_chars": think_chars,
        "observation_chars": observation_chars,
    }
    for name, chars in sizes.items():
        if chars < 0:
            raise ConfigurationError(f"{name} must be >= 0, got {chars}")
    system, question, think, observation = (
        math.ceil(chars / chars_per_token) for chars in sizes.values()
    )
    return system + question, think, think + observation


def estimate_run_tokens(
    turns: int,
    *,
    system_chars: int,
    question_chars: int,
    think_chars: int,
    observation_chars: int,
    chars_per_token: float = 4,
    keep_last_turns: int | None = None,
) -> RunTokenEstimate:
    """Estimate the tokens of a run: every turn resends the system message, the task and history.

    Turn *n* (from 1) reads the system message, the question and the *n - 1* earlier turns (each
    what the model wrote plus the observation it got back), and writes ``think_chars``. So the
    input per turn grows linearly and the run's total with the square of the turns. With
    ``keep_last_turns`` (a `ContextPolicy` that compacts to that many turns), the history carried
    stops growing and so does the input per turn (the placeholder's few tokens are left out).

    Args:
        turns: How many model turns.
        system_chars: Characters of the system message (and tool schemas).
        question_chars: Characters of the task.
        think_chars: Characters the model writes per turn (text and tool calls).
        observation_chars: Characters of the observation each turn adds.
        chars_per_token: Characters per token (4 is the usual figure for English).
        keep_last_turns: The most earlier turns carried, when the context is compacted.

    Returns:
        The estimate, turn by turn.

    Raises:
        ConfigurationError: If a size or ``turns`` is negative, or ``chars_per_token`` is not
            positive.
    """
    head, think, carried = _sizes(
        system_chars, question_chars, think_chars, observation_chars, chars_per_token
    )
    if turns < 0 or (keep_last_turns is not None and keep_last_turns < 0):
        raise ConfigurationError("turns and keep_last_turns must be >= 0")
    inputs = tuple(
        head + carried * (turn if keep_last_turns is None else min(turn, keep_last_turns))
        for turn in range(turns)
    )
    return RunTokenEstimate(turns=turns, input_per_turn=inputs, output_per_turn=(think,) * turns)


def rounds_for_budget(
    max_tokens: int,
    *,
    system_chars: int,
    question_chars: int,
    think_chars: int,
    observation_chars: int,
    chars_per_token: float = 4,
    keep_last_turns: int | None = None,
) -> int:
    """Return the most turns whose input and output tokens fit ``max_tokens``: a ``max_steps``.

    Args:
        max_tokens: The token budget of the run (input plus output).
        system_chars: Characters of the system message (and tool schemas).
        question_chars: Characters of the task.
        think_chars: Characters the model writes per turn.
        observation_chars: Characters of the observation each turn adds.
        chars_per_token: Characters per token.
        keep_last_turns: The most earlier turns carried, when the context is compacted.

    Returns:
        The number of turns, from 0 (not even one fits) to `MAX_ROUNDS`.

    Raises:
        ConfigurationError: On the same invalid sizes as `estimate_run_tokens`.
    """
    head, think, carried = _sizes(
        system_chars, question_chars, think_chars, observation_chars, chars_per_token
    )
    if keep_last_turns is not None and keep_last_turns < 0:
        raise ConfigurationError("keep_last_turns must be >= 0")
    spent, rounds = 0, 0
    while rounds < MAX_ROUNDS:
        history = rounds if keep_last_turns is None else min(rounds, keep_last_turns)
        spent += head + carried * history + think
        if spent > max_tokens:
            break
        rounds += 1
    return rounds


def format_cost_table(estimates: Sequence[RunTokenEstimate], *, price: Price | None = None) -> str:
    """Render estimates as a Markdown table, each row compared with the first.

    Args:
        estimates: The runs to compare, for example the same task at 2, 4, 8 and 12 turns.
        price: Adds a cost column at this price when given.

    Returns:
        The table, one line per estimate after the header.
    """
    header = "| turns | input tokens | output tokens | total tokens | vs first |"
    rule = "| ---: | ---: | ---: | ---: | ---: |"
    if price is not None:
        header, rule = f"{header} cost |", f"{rule} ---: |"
    lines = [header, rule]
    base = estimates[0].total_tokens if estimates else 0
    for estimate in estimates:
        ratio = estimate.total_tokens / base if base else 0.0
        row = (
            f"| {estimate.turns} | {estimate.input_tokens:,} | {estimate.output_tokens:,} "
            f"| {estimate.total_tokens:,} | {ratio:.1f}x |"
        )
        if price is not None:
            row = f"{row} {estimate.cost(price):.4f} |"
        lines.append(row)
    return "\n".join(lines)
