"""Records of operating a store: `RunStats`, what a store holds (``ownloop runs stats``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RunStats"]


class RunStats(BaseModel):
    """A summary of a store: runs by state, status and stop reason, what waits, what is unknown.

    Attributes:
        runs: How many runs, by snapshot state (``running``, ``paused``, ``finished``).
        statuses: How many paused or finished runs, by result status.
        stop_reasons: How many paused or finished runs, by stop reason.
        oldest_paused_at: When the longest-waiting paused run was last saved.
        unknown_effects: Journaled writes whose effect is unknown (no receipt, or ``unknown``).
        leased: Runs a worker holds now.
        usage: Usage counters summed over every stored run (`USAGE_FIELDS`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: dict[str, int] = Field(default_factory=dict)
    statuses: dict[str, int] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    oldest_paused_at: datetime | None = None
    unknown_effects: int = 0
    leased: int = 0
    usage: dict[str, float] = Field(default_factory=dict)

    def paused_age_s(self, now: datetime) -> float:
        """Return how long the longest-waiting paused run has waited (0 when none waits).

        Args:
            now: The present.
        """
        if self.oldest_paused_at is None:
            return 0.0
        return max((now - self.oldest_paused_at).total_seconds(), 0.0)
