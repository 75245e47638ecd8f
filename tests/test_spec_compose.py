"""Specs that compose: `extends`, variants that start `from` another, patch environment
actions, override or remove tables, and share expectations (`expect_like`); and a spec's
declared default environment. Every bad input is a SpecError naming the file that wrote it,
its line, and what is wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_EXAMPLES, LEDGER_SPEC

from ledgercheck.model import cli
from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec

NEXT = LEDGER_EXAMPLES / "fleet_health_next.toml"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """The pinned ledger spec in a scratch directory, for children to extend."""
    return Path(shutil.copy(LEDGER_SPEC, tmp_path / "fleet_health.toml"))


def child(tmp_path: Path, text: str, name: str = "child.toml") -> Path:
    return write(tmp_path, name, 'extends = "fleet_health.toml"\n' + text)


def refused(path: Path) -> SpecError:
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    return caught.value


def line_of(path: Path, marker: str) -> int:
    lines = path.read_text(encoding="utf-8").split("\n")
    return next(number for number, line in enumerate(lines, 1) if marker in line)


ACTION_PATCH = """
[variants.next]
from = "fixed"
expect_like = "fixed"

[[variants.next.patch]]
action = "controller.supervisor_tick"
when = "phase == RUNNING and exists(state == DEAD)"
"""


def test_a_child_inherits_everything_and_patches_an_action(ledger: Path, tmp_path: Path) -> None:
    spec_file = load_spec(child(tmp_path, ACTION_PATCH))
    assert spec_file.variants == ("as_written", "fixed", "refit_keeps_streak", "next")
    fixed, nxt = spec_file.variant("fixed"), spec_file.variant("next")
    assert nxt.events["mark_loaded"].body == fixed.events["mark_loaded"].body  # `from` carried the fix over
    assert (
        nxt.environment("controller").action("supervisor_tick").when
        != fixed.environment("controller").action("supervisor_tick").when
    )
    assert all(p.expect["next"] == p.expect["fixed"] for p in nxt.properties.values())
    # the parent's own verdicts are untouched, and the spec's digest covers the parent's text
    base = load_spec(ledger)
    old, new = base.variant("as_written"), spec_file.variant("as_written")
    assert (new.events, new.environments) == (old.events, old.environments)
    assert {n: {v: p.expect[v] for v in old.variants} for n, p in new.properties.items()} == {
        n: dict(p.expect) for n, p in old.properties.items()
    }
    assert spec_file.variant().sha256 != base.variant().sha256


def test_a_property_may_name_the_new_variant_over_expect_like(ledger: Path, tmp_path: Path) -> None:
    text = ACTION_PATCH + '\n[properties.retire_retires]\nexpect = { next = "violated" }\n'
    spec = load_spec(child(tmp_path, text)).variant("next")
    assert spec.properties["retire_retires"].expect["next"] == "violated"
    assert spec.properties["retire_retires"].expect["fixed"] == "holds"


def test_an_error_in_an_inherited_table_names_the_parent_file(ledger: Path, tmp_path: Path) -> None:
    text = ledger.read_text(encoding="utf-8").replace('body = "report_success(i)"', 'body = "report_succes(i)"')
    ledger.write_text(text, encoding="utf-8")
    error = refused(child(tmp_path, ACTION_PATCH))
    assert error.where.path == str(ledger)
    assert error.where.line == line_of(ledger, "report_succes(i)")


def test_an_override_error_names_the_child_file(ledger: Path, tmp_path: Path) -> None:
    path = child(
        tmp_path,
        '[variants.next]\nexpect_like = "fixed"\n\n[variants.next.override.queries]\n'
        'serving = { when = "state in SERVNG", api = "serving_shards" }\n',
    )
    error = refused(path)
    assert (error.where.path, error.where.line) == (str(path), line_of(path, "SERVNG"))
    assert "did you mean 'SERVING'" in error.message


def test_overrides_add_and_replace_tables_and_remove_removes(ledger: Path, tmp_path: Path) -> None:
    path = child(
        tmp_path,
        """
[variants.next]
expect_like = "fixed"
remove = ["events.retire", "properties.retire_retires", "properties.retirement_is_final"]

[variants.next.override.policy]
unhealthy_threshold = { default = 4, min = 1, max = 8 }

[variants.next.override.events.drain]
call = "drain(i)"
body = "state = RETIRED"
""",
    )
    spec_file = load_spec(path)
    nxt, fixed = spec_file.variant("next"), spec_file.variant("fixed")
    assert nxt.policy["unhealthy_threshold"].default == 4 and fixed.policy["unhealthy_threshold"].default == 3
    assert "drain" in nxt.events and "retire" not in nxt.events and "retire" in fixed.events
    assert "retire_retires" not in nxt.properties


BAD_CHILDREN = {
    "missing-parent": ('extends = "nowhere.toml"\n', "extends", ("'nowhere.toml'", "no such spec file")),
    "extends-not-a-string": ("extends = 3\n", "extends", ("extends must be the path",)),
    "unknown-action": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'action = "controller.supervisor_tock"\nwhen = "True"\n',
        "supervisor_tock",
        ("unknown action 'controller.supervisor_tock'", "did you mean 'controller.supervisor_tick'"),
    ),
    "action-without-environment": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'action = "supervisor_tick"\nwhen = "True"\n',
        "action =",
        ("environment.action",),
    ),
    "action-patch-with-event-guard": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'action = "controller.recovery"\nrequires = "True"\n',
        "requires",
        ("'requires' patches an event",),
    ),
    "action-anchor-missing": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'action = "controller.recovery"\nremove = "phase = STOPPED"\n',
        "remove =",
        ("no statement(s) of action 'controller.recovery'",),
    ),
    "event-patch-with-when": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'event = "retire"\nwhen = "True"\n',
        "when =",
        ("'when' patches an action's guard",),
    ),
    "event-and-action": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\n[[variants.n.patch]]\n'
        'event = "retire"\naction = "controller.recovery"\nwhen = "True"\n',
        "[[variants.n.patch]]",
        ("exactly one of 'event' or 'action'",),
    ),
    "from-unknown": (
        'extends = "fleet_health.toml"\n[variants.n]\nfrom = "fixd"\nexpect_like = "fixed"\n',
        "from",
        ("from names no variant", "did you mean 'fixed'"),
    ),
    "from-cycle": (
        'extends = "fleet_health.toml"\n[variants.n]\nfrom = "m"\nexpect_like = "fixed"\n'
        '[variants.m]\nfrom = "n"\nexpect_like = "fixed"\n',
        'from = "n"',
        ("variants start from one another in a cycle",),
    ),
    "expect-like-unknown": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixd"\n',
        "expect_like",
        ("expect_like names no other variant", "did you mean 'fixed'"),
    ),
    "remove-unknown": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_like = "fixed"\nremove = ["events.retier"]\n',
        "remove",
        ("no 'events.retier' to remove", "did you mean 'retire'"),
    ),
    "unknown-variant-key": (
        'extends = "fleet_health.toml"\n[variants.n]\nexpect_lik = "fixed"\n',
        "expect_lik",
        ("unknown key 'expect_lik'", "did you mean 'expect_like'"),
    ),
    "default-environment-unknown": (
        'extends = "fleet_health.toml"\n[spec]\ndefault_environment = "controler"\n',
        "default_environment",
        ("is not an environment", "did you mean 'controller'"),
    ),
}


@pytest.mark.parametrize("case", list(BAD_CHILDREN), ids=list(BAD_CHILDREN))
def test_bad_composition_is_refused_with_location(case: str, ledger: Path, tmp_path: Path) -> None:
    text, marker, says = BAD_CHILDREN[case]
    path = write(tmp_path, "child.toml", text)
    error = refused(path)
    assert (error.where.path, error.where.line) == (str(path), line_of(path, marker)), error
    for fragment in says:
        assert fragment in error.message


def test_an_extends_cycle_names_the_file_and_line(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", '# a\nextends = "b.toml"\n')
    write(tmp_path, "b.toml", 'extends = "a.toml"\n')
    error = refused(a)
    assert error.where.path == str(tmp_path / "b.toml") and error.where.line == 1
    assert "cycle: a.toml -> b.toml -> a.toml" in error.message


def test_extends_is_relative_to_the_file(ledger: Path, tmp_path: Path) -> None:
    path = write(tmp_path, "deep/er/child.toml", 'extends = "../../fleet_health.toml"\n')
    assert load_spec(path).variants == load_spec(ledger).variants


def test_a_declared_default_environment_is_the_default() -> None:
    base = load_spec(LEDGER_SPEC).variant()
    assert base.declared_default_environment is None and base.default_environment == "ledger"


def test_replay_uses_the_declared_default_environment(ledger: Path, tmp_path: Path) -> None:
    path = child(tmp_path, '[spec]\ndefault_environment = "controller"\n')
    assert load_spec(path).variant().default_environment == "controller"
    assert cli.main(["replay", "--format", "json", str(path), "request_fails(0)"]) == 0
    # the ledger's default is its any-call environment, which has no request_fails action
    assert cli.main(["replay", "--format", "json", str(ledger), "request_fails(0)"]) == 2


@pytest.mark.slow
def test_the_next_version_example_checks(tmp_path: Path) -> None:
    """The bundled example that extends the ledger spec: `check` runs on its new variant (read
    against the pinned ledger, so an edit of the bundled one does not change this test)."""
    shutil.copy(LEDGER_SPEC, tmp_path / "fleet_health.toml")
    path = Path(shutil.copy(NEXT, write(tmp_path, "examples/.keep", "").parent / NEXT.name))
    argv = ["check", str(path), "--variant", "next", "--environment", "controller", "--shards", "2"]
    assert cli.main([*argv, "--property", "no_condemnation_by_inherited_streak"]) == 0
