"""The coverage search's argument values, and the honesty of what it says it did not reach.

An `int` argument was once tried with the value 1 only, yet a branch it missed was reported
"unreachable ... the search exhausted every reachable state": a proof the search did not
have (`if args.c == 0:` is reachable). Now the search tries the values the spec compares an
argument with (`model.reduction.argument_use`), and calls a branch unreachable only when
those values are as good as every value; otherwise it is uncovered, and the report says
which values were tried.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledgercheck.codegen import coverage, render
from ledgercheck.model import reduction
from ledgercheck.model.spec import load_spec, load_spec_text

HEAD = """
[spec]
name = "counts"
title = "Int arguments in branches"
api_class = "Counts"
api_policy_class = "CountsPolicy"
state_field = "state"
default_shards = 1

[enums.Mode]
members = ["IDLE", "BUSY", "DONE"]
api_values = "lower"

[policy]
limit = { default = 3, min = 1, max = 6 }

[fields]
state = { type = "Mode", initial = "IDLE" }
lease_epoch = { type = "int", initial = 5 }

[environments.ledger]
doc = "any call at any time"
any_call = true

[properties.epoch_is_positive]
doc = "a property every variant holds, for the monitor"
kind = "invariant"
assert = "lease_epoch >= 0"
message = "a negative epoch"
expect = { base = "holds" }
"""

# A branch on each of 0 and 2 (not 1), and a guard that needs the field's current value (5,
# then 6 after `acquire`: never a value the spec writes down).
INT_EVENTS = """
[events.acquire]
call = "acquire(i)"
ignore_when = "state == DONE"
body = \"\"\"
lease_epoch = lease_epoch + 1
state = BUSY
\"\"\"

[events.record]
call = "record(i, c: int)"
body = \"\"\"
if args.c == 0:
    state = IDLE
elif args.c == 2:
    state = DONE
\"\"\"

[events.fail]
call = "fail(i, epoch: int)"
ignore_when = "args.epoch != lease_epoch"
body = \"\"\"
if state == BUSY and args.epoch > 5:
    state = IDLE
\"\"\"
"""


def _spec(tmp_path: Path, events: str) -> Path:
    path = tmp_path / "counts.toml"
    path.write_text(HEAD + events, encoding="utf-8")
    return path


def _report(path: Path) -> tuple[coverage.Coverage, list[str]]:
    spec_file = load_spec(path)
    found = coverage.search(spec_file, spec_file.variant())
    covered = coverage.covered_by(spec_file.variant(), list(found.traces.values()), found.branches)
    return found, found.report(spec_file.path, covered)


def test_a_branch_that_needs_an_int_other_than_1_is_covered_and_its_test_passes(tmp_path: Path) -> None:
    path = _spec(tmp_path, INT_EVENTS)
    found, report = _report(path)
    # `fail`'s `args.epoch > 5` is false with `state == BUSY` holding in no state the guard lets
    # through (BUSY comes with an epoch of 6 or more): a part of the condition that never
    # decides alone, reported and left out of the tests, never dropped.
    assert [u.branch.slug for u in found.unreached] == ["if1_args_epoch_5_else"] and not found.gaps
    assert not found.unreached[0].proved
    assert report[0] == (
        "branch coverage of base: 10/11 branches covered (90 %), 1 uncovered (not proved unreachable), "
        "0 unreachable, 11 in all"
    )
    by_slug = {(b.event, b.slug): trace for b, trace in found.traces.items()}
    assert by_slug[("record", "if1_args_c_0_then")] == (("record", (("c", 0),)),)
    assert by_slug[("record", "if2_args_c_2_then")] == (("record", (("c", 2),)),)
    assert by_slug[("fail", "not_ignored")] == (("fail", (("epoch", 5),)),)  # the field's value
    assert by_slug[("fail", "if1_state_busy_and_args_epoch_5_then")] == (
        ("acquire", ()),
        ("fail", (("epoch", 6),)),
    )
    # The generated tests make those calls, and pass against the model.
    out = tmp_path / "generated"
    out.mkdir()
    for name, text in render.render_coverage(load_spec(path), out, found).items():
        (out / name).write_text(text, encoding="utf-8")
    assert 'check.call("record", 0, c=2)' in (out / "test_branches_of_record.py").read_text(encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "10 passed" in run.stdout


def test_a_dead_branch_is_still_proved_unreachable_over_full_domains(tmp_path: Path) -> None:
    """Bool and enum arguments are tried with every value (an enum argument once got a
    placeholder), and an int only compared with constants with one value per class: an
    exhausted search over those is a proof."""
    events = """
[events.stop]
call = "stop(i, mode: Mode, hard: bool)"
body = \"\"\"
if args.hard and args.mode == DONE:
    state = DONE
elif args.mode == BUSY and state == DONE:
    state = IDLE
\"\"\"

[events.start]
call = "start(i, c: int)"
ignore_when = "state == DONE"
body = \"\"\"
if args.c == 3 and state == DONE:
    state = BUSY
\"\"\"
"""
    found, report = _report(_spec(tmp_path, events))
    dead = [(u.branch.event, u.branch.slug) for u in found.unreached]
    assert dead == [("start", "if1_args_c_3_and_state_done_then")]
    assert all(u.proved for u in found.unreached) and not found.gaps
    assert report[0] == "branch coverage of base: 10/10 reachable branches covered (100 %), 1 unreachable, 11 in all"
    assert report[1].startswith("  unreachable  counts.toml:")
    assert report[2].startswith("    no call sequence reaches it: the search exhausted every reachable state")
    by_slug = {(b.event, b.slug): trace for b, trace in found.traces.items()}
    assert by_slug[("stop", "if1_args_hard_and_args_mode_done_then")] == (("stop", (("mode", "DONE"), ("hard", True))),)


def test_a_branch_missed_by_an_under_approximated_int_domain_is_uncovered_not_unreachable(tmp_path: Path) -> None:
    """`args.c + args.c == 40` holds for c = 20, which no constant of the spec suggests: the
    search misses it, and says so without claiming a proof."""
    events = """
[events.add]
call = "add(i, c: int)"
body = \"\"\"
if args.c + args.c == 40:
    state = BUSY
\"\"\"
"""
    found, report = _report(_spec(tmp_path, events))
    assert report[0] == (
        "branch coverage of base: 1/2 branches covered (50 %), 1 uncovered (not proved unreachable), "
        "0 unreachable, 2 in all"
    )
    assert [(u.branch.slug, u.proved) for u in found.unreached] == [("if1_args_c_args_c_40_then", False)]
    assert not found.unreachable
    assert report[1].startswith("  uncovered  counts.toml:") and "add: `if args.c + args.c == 40:` holds" in report[1]
    why = report[2]
    assert "add(c) tried with 0, 1, 39, 40, 41 only (c is used in a sum or difference)" in why
    assert why.endswith("an under-approximation, not a proof") and "unreachable" not in why
    assert found.gaps and "no call sequence reaches it" not in why


def test_the_events_int_example_is_tried(tmp_path: Path) -> None:
    events = """
[events.add]
call = "add(i, c: int)"
examples = { c = "20" }
body = \"\"\"
if args.c + args.c == 40:
    state = BUSY
\"\"\"
"""
    found, report = _report(_spec(tmp_path, events))
    assert not found.unreached
    (then,) = [b for b in found.traces if b.taken]
    assert found.traces[then] == (("add", (("c", 20),)),)
    assert report[0] == "branch coverage of base: 2/2 reachable branches covered (100 %), 0 unreachable, 2 in all"


@pytest.mark.parametrize(
    ("body", "decides", "constants", "variables", "exact"),
    [
        ("if args.c == limit - 1:\n    state = BUSY", True, (1, 2, 3), (), True),
        ("if args.c >= lease_epoch:\n    state = BUSY", True, (), ((("field", "lease_epoch"), 0),), True),
        # a field plus a constant: the boundary is there, and the classes are as exact
        ("if args.c > lease_epoch + 2:\n    state = BUSY", True, (2,), ((("field", "lease_epoch"), 2),), True),
        # compared with a field the call assigns before: its value then is not the state's
        (
            "lease_epoch = 0\nif args.c == lease_epoch:\n    state = BUSY",
            True,
            (),
            ((("field", "lease_epoch"), 0),),
            False,
        ),
        # copied into a field a branch reads
        ("lease_epoch = args.c\nif lease_epoch == 4:\n    state = BUSY", True, (), (), False),
        ("if args.c + 1 == 4:\n    state = BUSY", True, (1, 4), (), False),
        # no branch reads it, wherever it goes
        ("state = BUSY", False, (), (), True),
    ],
)
def test_argument_use_says_when_its_classes_are_exact(
    body: str,
    decides: bool,
    constants: tuple[int, ...],
    variables: tuple[tuple[tuple[str, str], int], ...],
    exact: bool,
) -> None:
    events = f'\n[events.put]\ncall = "put(i, c: int)"\nbody = """\n{body}\n"""\n'
    spec = load_spec_text(HEAD + events, "counts.toml").variant()
    use = reduction.argument_use(spec, spec.events["put"], "c", spec.default_policy(), reduction.decision_cone(spec))
    assert (use.decides, use.constants, use.variables, not use.inexact) == (decides, constants, variables, exact)
