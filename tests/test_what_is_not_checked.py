"""What a run does not check is said, not left to be noticed: a property that holds of nothing
(its `when` never true where it was checked: a pool trial's `when = "idle > capacity + 100"`
with `assert = "False"` was PROVED), a liveness counterexample no test can show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

SPEC = """\
[spec]
name = "door"
state_field = "state"
default_shards = 1

[enums.State]
members = ["SHUT", "OPEN", "JAMMED"]

[fields]
state = {{ type = "State", initial = "SHUT" }}

[events.open]
call = "open(i)"
body = "state = OPEN"

[events.shut]
call = "shut(i)"
body = "state = SHUT"

[environments.ledger]
any_call = true

[properties.jammed_never]
kind = "invariant"
when = "{when}"
assert = "False"
expect = {{ base = "holds" }}
"""


def _check(tmp_path: Path, capsys: Any, when: str, *more: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    spec = tmp_path / "door.toml"
    spec.write_text(SPEC.format(when=when), encoding="utf-8")
    code = main(["check", str(spec), "--no-cache", *more])
    return code, capsys.readouterr().out


def test_a_when_never_true_is_reported_as_vacuous(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED")
    assert code == 0, out  # a vacuous property changes no exit code
    assert "VACUOUS   jammed_never (ledger; base): holds, but its when is never true in any reachable state" in out


def test_a_when_that_happens_is_not(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED or state == SHUT")
    assert code == 1, out  # assert False where the when holds: violated, as it should be
    code, out = _check(tmp_path, capsys, "state == JAMMED and state == OPEN")
    assert "VACUOUS" in out


def test_json_names_it(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED", "--format", "json")
    assert code == 0
    results = json.loads(out)["results"] if isinstance(json.loads(out), dict) else json.loads(out)
    assert results[0]["vacuous"] == "in any reachable state"


LIVE = """\
[spec]
name = "job"
state_field = "state"
default_shards = 1

[enums.State]
members = ["WAITING", "DONE"]

[fields]
state = { type = "State", initial = "WAITING" }

[events.poke]
call = "poke(i)"
body = "pass"

[events.finish]
call = "finish(i)"
requires = "False"
body = "state = DONE"

[environments.ledger]
any_call = true

[properties.ends]
kind = "eventually"
when = "state == WAITING"
assert = "state == DONE"
expect = { base = "violated" }
"""


def test_gen_says_a_liveness_counterexample_has_no_test(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    spec = tmp_path / "job.toml"
    spec.write_text(LIVE, encoding="utf-8")
    code = main(["gen", str(spec), "--out", str(tmp_path / "generated_tests")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ends: a liveness counterexample (a lasso) has no generated test" in out


SYMBOLIC_HEADLINE = [
    "--symbolic-policy",
    "--variant",
    "as_written",
    "--property",
    "no_condemnation_by_inherited_streak",
]


def test_a_symbolic_policy_trace_names_the_policy_it_found(capsys: Any) -> None:
    from ledgercheck.model.cli import main

    main(["check", *SYMBOLIC_HEADLINE, "--environment", "ledger"])
    flat = " ".join(capsys.readouterr().out.split())  # the line wraps at the terminal's width
    assert re.search(r"broken at step 7, at unhealthy_threshold=\d+, healthy_threshold=\d+", flat), flat


@pytest.mark.slow
def test_a_symbolic_policy_proof_names_the_policy_of_its_shortest_trace(capsys: Any) -> None:
    from ledgercheck.model.cli import main

    main(["prove", *SYMBOLIC_HEADLINE, "--environment", "ledger"])
    flat = " ".join(capsys.readouterr().out.split())
    assert re.search(r"shortest trace \(7 steps, at unhealthy_threshold=\d+", flat), flat


def test_ci_fails_a_property_that_checks_nothing(tmp_path: Path, capsys: Any) -> None:
    """Vacuous in every variant and environment, proved: the property checks nothing (a pool
    trial's `when = "idle > capacity + 100"`; a red-team trial's `when` written as a
    contradiction passed ci with a note, whatever the ledger then did)."""
    from ledgercheck.model.cli import main

    spec = tmp_path / "door.toml"
    spec.write_text(SPEC.format(when="state == JAMMED"), encoding="utf-8")
    out_dir = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out_dir)]) == 0  # the spec's expectations hold: gen writes
    assert (
        "ledgercheck gen: warning: jammed_never: holds, but its when is never true in any reachable state, in every "
        "variant: it checks nothing (a when that cannot happen, or a misread field?); `ledgercheck ci` fails on it"
    ) in capsys.readouterr().out
    assert main(["ci", str(spec), "--out", str(out_dir)]) == 1
    out = capsys.readouterr().out
    head = out.split("\n\n", 1)[0]
    assert "ledgercheck ci door.toml: FAILED, 1 problem(s):" in head, out
    assert (
        "  VACUOUS   jammed_never: holds, but its when is never true in any reachable state, in every variant: it "
        "checks nothing" in head
    ), out
    assert "vacuous (below)" not in out


JAMS = (
    SPEC.replace('expect = {{ base = "holds" }}', 'expect = {{ base = "holds", jams = "violated" }}')
    + """
[events.jam]
call = "jam(i)"
body = "pass"

[variants.base]

[variants.jams]
[variants.jams.override.events.jam]
call = "jam(i)"
body = "state = JAMMED"
"""
)


def test_ci_names_a_property_vacuous_in_one_variant_and_passes(tmp_path: Path, capsys: Any) -> None:
    """Where another variant reaches the `when` (and breaks the property, as expected), the
    property checks something: vacuity in `base` alone is a note under the table."""
    from ledgercheck.model.cli import main

    spec = tmp_path / "door.toml"
    spec.write_text(JAMS.format(when="state == JAMMED"), encoding="utf-8")
    out_dir = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out_dir)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["ci", str(spec), "--out", str(out_dir)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "1 vacuous (below)" in out
    assert "  VACUOUS   jammed_never (ledger; base): holds, but its when is never true in any reachable state" in out


CONTRACTED = SPEC.format(when="state == JAMMED").replace(
    'body = "state = OPEN"', 'requires = "state == SHUT"\nbody = "state = OPEN"'
) + (
    """
[properties.opened_twice]
kind = "step"
on = ["open"]
when = "WHEN"
assert = "after.state == OPEN"
expect = { base = "holds" }
"""
)
"""The door, whose callers open it only when it is shut, and a property of opening it."""


@pytest.mark.parametrize(
    ("when", "where"),
    [
        ("before.state == OPEN", "at any call within the callers' contracts"),
        ("before.state == OPEN and before.state == SHUT", "at any call, also outside the callers' contracts"),
    ],
)
def test_vacuity_within_the_contracts_is_told_from_vacuity_everywhere(
    tmp_path: Path, capsys: Any, when: str, where: str
) -> None:
    """A `when` only a call outside the contracts meets (opening an open valve) is exercised
    by the lax traces; a contradiction is met by no call at all."""
    spec = tmp_path / "door.toml"
    spec.write_text(CONTRACTED.replace("WHEN", when), encoding="utf-8")
    from ledgercheck.model.cli import main

    assert main(["check", str(spec), "--property", "opened_twice", "--no-cache", "--format", "json"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    results = loaded["results"] if isinstance(loaded, dict) else loaded
    assert results[0]["vacuous"] == where


def test_what_checks_nothing_is_judged_per_variant_from_the_environment_that_calls_anything() -> None:
    """The `ledger` environment (any call) proved the `when` never true at any call at all: the
    controller, which only makes such calls, meets it nowhere either, where its own search
    said nothing. A `when` that reads a policy constant may come true at another policy."""
    from types import SimpleNamespace

    from ledger_fixture import LEDGER_SPEC

    from ledgercheck.codegen.gate import checking_nothing as _checking_nothing
    from ledgercheck.model.spec import load_spec

    spec_file = load_spec(LEDGER_SPEC)
    also = "at any call, also outside the callers' contracts"

    def results(ledger: str, controller: str, variants: tuple[str, ...] = spec_file.variants) -> list[Any]:
        return [
            SimpleNamespace(property="suspicion_survives_abort", variant=v, environment=e, vacuous=w)
            for v in variants
            for e, w in (("ledger", ledger), ("controller", controller))
        ]

    assert _checking_nothing(spec_file, results(also, "")) == {"suspicion_survives_abort": also}
    assert _checking_nothing(spec_file, results("at any call within the callers' contracts", "")) == {}
    assert _checking_nothing(spec_file, results("up to depth 12", "")) == {}
    mixed = results(also, "", spec_file.variants[:2]) + results("", "", spec_file.variants[2:])
    assert _checking_nothing(spec_file, mixed) == {}  # the reference variant meets it
    policy = "[policy]\njam_limit = { default = 0, min = 0, max = 2 }\n\n[fields]"
    text = SPEC.format(when="state == JAMMED and jam_limit > 0").replace("[fields]", policy)
    from ledgercheck.model.spec import load_spec_text

    door = load_spec_text(text, "door.toml")
    nowhere = [
        SimpleNamespace(property="jammed_never", variant="base", environment="ledger", vacuous="in any reachable state")
    ]
    assert _checking_nothing(door, nowhere) == {}


def test_a_step_property_whose_event_its_environments_never_call_checks_nothing(tmp_path: Path, capsys: Any) -> None:
    """`retire_retires` (no `when`) moved to the controller, whose actions never call
    `retire`: it held of no call, and ci passed without a word (red-team trial)."""
    from types import SimpleNamespace

    from ledger_fixture import LEDGER_SPEC

    from ledgercheck.codegen.gate import checking_nothing as _checking_nothing
    from ledgercheck.codegen.gate import nothing_line as _nothing_line
    from ledgercheck.model.cli import main
    from ledgercheck.model.spec import load_spec

    text = LEDGER_SPEC.read_text(encoding="utf-8")
    block = text[text.index("[properties.retire_retires]") :]
    block = block[: block.index('environments = ["ledger"]') + len('environments = ["ledger"]')]
    assert "when =" not in block
    spec = tmp_path / "fleet_health.toml"
    spec.write_text(text.replace(block, block.replace('["ledger"]', '["controller"]')), encoding="utf-8")
    args = ["check", str(spec), "--property", "retire_retires", "--variant", "fixed", "--no-cache", "--format", "json"]
    assert main(args) == 0
    loaded = json.loads(capsys.readouterr().out)
    (result,) = loaded["results"] if isinstance(loaded, dict) else loaded
    assert result["environment"] == "controller" and result["vacuous"] == "at any call"
    spec_file = load_spec(spec)
    found = [
        SimpleNamespace(property="retire_retires", variant=v, environment="controller", vacuous="at any call")
        for v in spec_file.variants
    ]
    assert _checking_nothing(spec_file, found) == {"retire_retires": "at any call"}
    assert _nothing_line(spec_file, "retire_retires", "at any call", found) == (
        "retire_retires: holds, but no call of retire is ever made (controller), in every variant: it checks "
        "nothing (an environment whose actions never call it?)"
    )


def test_ci_says_which_conform_settings_of_the_spec_search_less_than_the_defaults() -> None:
    """`[conform] depth = 0, random = 0` in the spec passed three classes the defaults catch;
    ci took the settings as the spec owner's and said nothing but a smaller trace count."""
    from ledger_fixture import LEDGER_SPEC

    from ledgercheck.model.ci import PASSED, Step, _weaker_conformance_note
    from ledgercheck.model.spec import load_spec_text

    text = LEDGER_SPEC.read_text(encoding="utf-8")
    weak = load_spec_text(text + "\n[conform]\ndepth = 0\nrandom = 0\nshards = 1\nrun_calls = 500\n", "f.toml")
    steps = [Step("conformance", PASSED)]
    _weaker_conformance_note(weak, steps)
    assert steps[0].notes == [
        "conformance: ran with the spec's [conform] depth = 0, random = 0, shards = 1, less than conform's defaults "
        "(depth 4, random 1000, shards 4): a divergence only those would reach is not looked for"
    ]
    deeper = load_spec_text(text + "\n[conform]\ndepth = 5\n", "f.toml")
    steps = [Step("conformance", PASSED)]
    _weaker_conformance_note(deeper, steps)
    assert steps[0].notes == []
