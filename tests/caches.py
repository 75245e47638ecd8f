"""A command run by a test with caches of its own, as a user's runs have them.

The test run turns the cache of results off (`tests/conftest.py`: the tests are about solving).
A test about what a user's second command does (`gen --check` after `gen`, `ci` run again)
turns it back on for its subprocesses, in a folder of its own, so no other test's answers
reach it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def own_caches(folder: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (the test run's environment by default) with every cache, the cache of results
    included, in `folder`."""
    env = {key: value for key, value in (os.environ if base is None else base).items() if key != "LEDGERCHECK_RESULTS"}
    env["LEDGERCHECK_CACHE"] = str(folder)
    return env
