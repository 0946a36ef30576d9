"""Retry decisions: which failures are transient, and how long to wait before the next attempt.

Backoff comes from tenacity wait strategies (exponential with jitter by default, any tenacity
``wait_*`` composition accepted). A provider's ``Retry-After`` hint is honoured, and a hint longer
than the policy allows fails fast with the value exposed. This module decides; it never sleeps and
never counts attempts: the loop draws every attempt from the run's shared budgets and refuses any
wait that would cross the deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying
from tenacity.wait import wait_base, wait_exponential_jitter

from ownloop.exceptions import ConfigurationError, ProviderError, TransientToolError

__all__ = ["GiveUp", "RetryPolicy", "Wait", "is_transient_model_error", "retry_after_hint"]

# tenacity's wait strategies read the attempt number from a call state; one inert engine serves
# every state we build, so computing a delay allocates nothing else and starts no timer.
_ENGINE = Retrying()


@dataclass(frozen=True, slots=True)
class Wait:
    """Retry after waiting.

    Attributes:
        seconds: How long to wait first.
        honoured_retry_after: Whether the delay came from the failure's own hint.
    """

    seconds: float
    honoured_retry_after: bool = False


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Do not retry.

    Attributes:
        reason: Why, in words an operator can act on.
    """

    reason: str


@dataclass(frozen=True)
class RetryPolicy:
    """How the runtime backs off between attempts of one model or tool call.

    Args:
        wait: A tenacity wait strategy; defaults to exponential backoff with jitter
            (0.5 s, doubling, at most 8 s, plus up to 0.25 s of jitter).
        max_retry_after_s: The longest ``Retry-After`` hint honoured; a longer one gives up at
            once rather than hold the run hostage.
    """

    wait: wait_base = field(
        default_factory=lambda: wait_exponential_jitter(multiplier=0.5, max=8.0, jitter=0.25)
    )
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retry_after_s < 0:
            raise ConfigurationError("RetryPolicy.max_retry_after_s must not be negative")

    def next_wait(self, failed_attempt: int, retry_after: float | None = None) -> Wait | GiveUp:
        """Decide the wait before the attempt after ``failed_attempt``.

        Args:
            failed_attempt: The number (from 1) of the attempt that just failed.
            retry_after: The failure's own hint in seconds, if it gave one.

        Returns:
            `Wait` with the delay, or `GiveUp` when the hint exceeds ``max_retry_after_s``.
        """
        if retry_after is not None:
            if retry_after > self.max_retry_after_s:
                return GiveUp(
                    f"asked to retry after {retry_after:g}s, more than the policy's maximum "
                    f"of {self.max_retry_after_s:g}s"
                )
            return Wait(max(retry_after, 0.0), honoured_retry_after=True)
        state = RetryCallState(_ENGINE, None, (), {})
        state.attempt_number = failed_attempt
        return Wait(max(float(self.wait(state)), 0.0))


def is_transient_model_error(error: BaseException) -> bool:
    """Return whether a model-port failure is worth retrying.

    Provider errors say so themselves (``retryable``); a timeout or a lost connection raised by a
    custom model port is transient; anything else is permanent.

    Args:
        error: What the model port raised.

    Returns:
        ``True`` when retrying may succeed.
    """
    if isinstance(error, ProviderError):
        return error.retryable
    return isinstance(error, TimeoutError | ConnectionError)


def retry_after_hint(error: BaseException) -> float | None:
    """Return the wait an error asked for, if it carries one.

    Args:
        error: A model or tool failure.

    Returns:
        Seconds to wait, or ``None`` when the error gives no hint (a NaN or a value that is not
        a number is no hint; a negative one means "now").
    """
    if not isinstance(error, ProviderError | TransientToolError):
        return None
    hint: object = error.retry_after
    if isinstance(hint, bool) or not isinstance(hint, int | float) or math.isnan(hint):
        return None
    return max(float(hint), 0.0)
