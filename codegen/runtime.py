"""What a generated test needs at run time, kept here for the renderer's import: the check
that watches the calls (`LedgerCheck`) and the normaliser live in `model.conformance`."""

from ledgercheck.model.conformance.monitor import LedgerCheck, PropertyViolated
from ledgercheck.model.conformance.observation import normalise

__all__ = ["LedgerCheck", "PropertyViolated", "normalise"]
