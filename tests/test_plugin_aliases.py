"""The pytest plugin's neutral names: every `--ledger-*` option also without `ledger-`
(`--impl`, `--variant`, `--conform`, ...), and the fixture `impl_factory` beside
`ledger_factory`; the old names stay."""

from __future__ import annotations

import pytest
from _pytest.config.argparsing import Parser

from ledgercheck.codegen import plugin

OPTIONS = [
    ("--ledger-variant", "--variant", "fixed"),
    ("--ledger-impl", "--impl", "pkg.mod:Ledger"),
    ("--ledger-conform", "--conform", "pkg.mod:Ledger"),
    ("--ledger-conform-spec", "--conform-spec", "spec.toml"),
    ("--ledger-conform-depth", "--conform-depth", 3),
    ("--ledger-conform-shards", "--conform-shards", 2),
    ("--ledger-conform-random", "--conform-random", 40),
    ("--ledger-conform-seed", "--conform-seed", 7),
    ("--ledger-outcomes", "--outcomes", "/tmp/notes"),
]


def _parse(*args: str) -> object:
    parser = Parser(_ispytest=True)  # the parser pytest builds, without a whole session
    plugin.pytest_addoption(parser)
    return parser.parse(list(args))


@pytest.mark.parametrize(("old", "new", "value"), OPTIONS)
def test_each_option_has_its_neutral_name(old: str, new: str, value: object) -> None:
    dest = old.removeprefix("--").replace("-", "_")
    assert getattr(_parse(old, str(value)), dest) == value
    assert getattr(_parse(new, str(value)), dest) == value


def test_every_ledger_option_has_an_alias() -> None:
    parser = Parser(_ispytest=True)  # the parser pytest builds, without a whole session
    plugin.pytest_addoption(parser)
    names = [name for group in parser._groups for option in group.options for name in option.names()]
    old = [n for n in names if n.startswith("--ledger-")]
    assert len(old) == 11 and all(n.replace("--ledger-", "--", 1) in names for n in old)
    assert _parse("--conform-counterexamples").ledger_conform_counterexamples is True  # type: ignore[attr-defined]


def test_impl_factory_is_ledger_factory(request: pytest.FixtureRequest) -> None:
    assert request.getfixturevalue("impl_factory") is request.getfixturevalue("ledger_factory")
