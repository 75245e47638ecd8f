"""`ledgercheck conform`: kept for `model.cli`, which finds a command's module by its name.
The conformance code lives in the `model.conformance` package."""

from model.conformance.command import register, run

__all__ = ["register", "run"]
