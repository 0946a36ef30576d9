"""Money as a budget: token prices per model, and what a run has spent.

Prices are the application's to supply (they change; ownloop ships none): a `PriceTable` maps a
model name to a `Price` in currency units per million tokens. With ``Limits.max_cost`` set, the
loop stops with ``max_cost`` *before* a request whose estimated input would cross the budget.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from ownloop.contracts import TokenUsage
from ownloop.exceptions import ConfigurationError

__all__ = ["Price", "PriceTable", "cost_of"]

PER = 1_000_000


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

        Args:
            model: The model name.

        Raises:
            ConfigurationError: If the model is not listed and there is no default.
        """
        price = self._prices.get(model or "", self._default)
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
