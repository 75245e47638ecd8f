"""Budgets for the tests of what happens when one runs out."""

from __future__ import annotations

from ledgercheck.model import budget


class Tripping(budget.Budget):
    """A budget that runs out at its `after`-th check (deterministic, unlike a clock)."""

    def __init__(self, after: int) -> None:
        super().__init__(None, None)
        self.left = after

    def exhausted(self, memory: bool = True) -> str | None:
        self.left -= 1
        if self.left < 0 and self.spent is None:
            self.spent = "time budget (test)"
        return self.spent
