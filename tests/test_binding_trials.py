"""What a user binding a connection pool met: a read path that read a policy constant instead
of the pool, a bool passed for an int, an enum argument handed over by its member name, and a
divergence the implementation did not repeat (state shared between instances) that crashed
the figure. Each was a pass where something was wrong, or a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SPEC = """\
[spec]
name = "pool"
api_class = "Pool"
state_field = "status"
default_shards = 1

[enums.Status]
members = ["OPEN", "CLOSED"]

[enums.Release]
members = ["OK", "BROKEN"]
api_values = "lower"

[policy]
max_size = { default = 2, min = 1, max = 4 }

[fields]
status = { type = "Status", initial = "OPEN" }
capacity = { type = "int", initial = 2 }
in_use = { type = "int", initial = 0 }
broken = { type = "int", initial = 0 }

[events.acquire]
call = "acquire(i)"
returns = "in_use"
body = \"\"\"
if status == OPEN and in_use < capacity:
    in_use = in_use + 1
\"\"\"

[events.release]
call = "release(i, how: Release = 'OK')"
body = \"\"\"
if in_use > 0:
    in_use = in_use - 1
    if args.how == BROKEN:
        broken = broken + 1
\"\"\"

[events.close]
call = "close(i)"
body = "status = CLOSED"

[environments.ledger]
any_call = true

[properties.bounded]
kind = "invariant"
assert = "in_use <= capacity"
expect = { base = "holds" }

[implementation]
instances = "each"
construct = { max_size = "max_size" }

[implementation.fields]
capacity = "{capacity}"
"""

CLASS = """\
class Pool:
    def __init__(self, max_size):
        self.status = "OPEN"
        self.max_size = max_size
        self.capacity = 2
        self.in_use = 0
        self.broken = 0

    def acquire(self):
        if self.status == "OPEN" and self.in_use < self.capacity:
            self.in_use += 1
        return {returned}

    def release(self, how="ok"):
        if how not in ("ok", "broken"):
            raise ValueError(how)
        if self.in_use > 0:
            self.in_use -= 1
            if how == "broken":
                self.broken += 1

    def close(self):
        self.status = "CLOSED"
        {on_close}
"""


def _conform(tmp_path: Path, capsys: Any, capacity: str = "capacity", **changes: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    source = CLASS.format(**{"returned": "self.in_use", "on_close": "pass", **changes})
    (tmp_path / "pool.toml").write_text(SPEC.replace("{capacity}", capacity), encoding="utf-8")
    (tmp_path / "pool.py").write_text(source, encoding="utf-8")
    target = f"{tmp_path / 'pool.py'}:Pool"
    code = main(["conform", str(tmp_path / "pool.toml"), "--impl", target, "--depth", "3", "--random", "100"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_pool_conforms(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(tmp_path, capsys)
    assert code == 0, out


def test_an_enum_argument_reaches_the_class_as_its_api_value(tmp_path: Path, capsys: Any) -> None:
    """`release(0, how=BROKEN)` hands the class "broken" (api_values = "lower"), its default
    "ok": the class raises ValueError on anything else."""
    code, out = _conform(tmp_path, capsys)
    assert code == 0, out
    assert "ValueError" not in out


def test_a_read_path_that_would_read_a_policy_constant_is_refused(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(tmp_path, capsys, capacity="max_size", on_close="self.max_size = 0")
    assert code == 2, out
    assert "field capacity's read path 'max_size' starts from 'max_size', which is the policy constant" in out
    assert "write self.max_size" in out
    code, out = _conform(tmp_path, capsys, capacity="self.max_size", on_close="self.max_size = 0")
    assert code == 1, out  # read off the pool: close zeroes it, and conform says so
    assert "capacity: model 2, implementation 0" in out


def test_a_read_path_that_reads_nothing_of_the_class_is_refused(tmp_path: Path, capsys: Any) -> None:
    spec = SPEC.replace("max_size = { default", "limit = { default").replace('"max_size" }', '"limit" }')
    (tmp_path / "pool.toml").write_text(spec.replace("{capacity}", "limit"), encoding="utf-8")
    (tmp_path / "pool.py").write_text(CLASS.format(returned="self.in_use", on_close="pass"), encoding="utf-8")
    from ledgercheck.model.cli import main

    code = main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"])
    out = capsys.readouterr()
    assert code == 2
    assert "reads nothing of the implementation" in out.err + out.out


@pytest.mark.parametrize(
    ("returned", "shown"),
    [("self.in_use > 0", "(a bool)"), ("float(self.in_use)", "(a float)")],
)
def test_a_value_of_another_type_python_calls_equal_is_a_divergence(
    tmp_path: Path, capsys: Any, returned: str, shown: str
) -> None:
    code, out = _conform(tmp_path, capsys, returned=returned)
    assert code == 1, out
    assert "value returned: model 1, implementation" in out
    assert shown in out


def test_a_divergence_the_implementation_does_not_repeat_is_reported_not_crashed(tmp_path: Path, capsys: Any) -> None:
    """A class attribute shared by every pool: the second close anywhere in the process breaks
    it, so the calls, run again for the figure, do not diverge where they did."""
    shared = (
        "type(self).closes = getattr(type(self), 'closes', 0) + 1\n        if type(self).closes == 2: self.in_use = 5"
    )
    code, out = _conform(tmp_path, capsys, on_close=shared)
    assert code == 1, out
    assert "Traceback" not in out
    assert "(no figure: run again on a new instance, the implementation" in out
    assert "reproduce:" in out


def test_ci_reads_test_results_from_pytest_s_summary_only() -> None:
    """A line the class under test logged at ERROR level, in pytest's captured-log section,
    is not a test's result (ci reported `1 failed` for it, a problem made up)."""
    from ledgercheck.model.ci import _refused, _test_failures

    output = [
        "F.",
        "=" * 30 + " FAILURES " + "=" * 30,
        "_" * 20 + " test_a " + "_" * 20,
        "----- Captured log call -----",
        "ERROR    scheduler:scheduler.py:169 task 0 dead-lettered after 3 attempts",
        "=" * 20 + " short test summary info " + "=" * 20,
        "FAILED generated_tests/test_x.py::test_a - the implementation does not do what base does",
        "1 failed, 1 passed in 0.1s",
    ]
    assert _test_failures("tests vs implementation", output) == [
        "TESTS     tests vs implementation: generated_tests/test_x.py: 1 failed "
        "(the implementation does not do what base does)"
    ]
    assert _refused(output) == []


LEASE = """\
[spec]
name = "lease"
api_class = "Lease"
state_field = "state"
default_shards = 1

[enums.State]
members = ["FREE", "HELD"]

[policy]
ttl = { default = 2, min = 1, max = 5 }

[clock]
unit = "s"
steps = [1]
drive = { patch = "leasing.monotonic" }

[fields]
state = { type = "State", initial = "FREE" }
held_for = { type = "timer", initial = 0 }

[events.acquire]
call = "acquire(i)"
body = \"\"\"
if state == FREE:
    state = HELD
    held_for = 0
\"\"\"

[events.expire]
call = "expire(i)"
body = \"\"\"
if state == HELD and held_for >= ttl:
    state = FREE
\"\"\"

[environments.ledger]
any_call = true

[properties.free_or_held]
kind = "invariant"
assert = "state == FREE or state == HELD"
expect = { base = "holds" }

[implementation]
target = "leasing.py:Lease"
instances = "each"
construct = { ttl = "ttl" }
[implementation.fields]
held_for = { observe = false }
"""

LEASING = """\
from time import monotonic


class Lease:
    def __init__(self, ttl):
        self.ttl = ttl
        self.state = "FREE"
        self.since = 0.0

    def acquire(self):
        if self.state == "FREE":
            self.state = "HELD"
            self.since = monotonic()

    def expire(self):
        if self.state == "HELD" and monotonic() - self.since >= self.ttl:
            self.state = "FREE"
"""


def test_a_clock_patched_in_a_class_loaded_from_a_file_is_the_one_it_reads(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`target = "leasing.py:Lease"` with `drive = { patch = "leasing.monotonic" }`: the clock
    is patched in the module the class was loaded into (before: `leasing` could not be
    imported, or a second copy was patched, and a correct class diverged on every expiry)."""
    from ledgercheck.model.cli import main

    (tmp_path / "lease.toml").write_text(LEASE, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(LEASING, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main(["conform", "lease.toml", "--depth", "5", "--random", "200"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "no divergence" in out.out


@pytest.mark.parametrize(
    ("change", "found_by"),
    [
        # one tick late: deeper than the enumeration's depth 1 here, met by the trace to the branch
        # (the runs source makes that trace over and over first)
        ("monotonic() - self.since >= self.ttl", "(found by a long run: the trace to branch"),
        # a ttl of 5 or more taken for "never expires": only the largest policy the spec allows meets it
        ("monotonic() - self.since >= self.ttl and self.ttl < 5", "at the largest policy (ttl=5)"),
    ],
)
def test_conform_follows_a_trace_to_every_branch_at_the_default_and_the_largest_policy(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, change: str, found_by: str
) -> None:
    from ledgercheck.model.cli import main

    wrong = change if " and " in change else change.replace(">=", ">", 1)
    late = LEASING.replace("monotonic() - self.since >= self.ttl", wrong)
    (tmp_path / "lease.toml").write_text(LEASE, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(late, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    quick = ["--depth", "1", "--random", "0", "--no-counterexamples"]
    code = main(["conform", "lease.toml", *quick])
    out = capsys.readouterr().out
    assert code == 1, out
    assert found_by in out
    code = main(["conform", "lease.toml", *quick, "--no-branches"])
    out = capsys.readouterr().out
    assert code == 0, out  # what the branches source adds: without it, no divergence


def test_ci_folds_a_stale_suite_into_one_line() -> None:
    from ledgercheck.model.ci import _test_failures

    stale = "Failed: pool.toml: event release changed since these tests were generated; run `ledgercheck gen`"
    output = [
        "=" * 20 + " short test summary info " + "=" * 20,
        *(f"FAILED generated_tests/test_{m}.py::test_{n} - {stale}" for m in ("a", "b", "c") for n in range(2)),
    ]
    assert _test_failures("tests vs model", output) == [f"TESTS     tests vs model: 6 failed in 3 modules ({stale})"]


def test_a_clock_parameter_the_class_does_not_take_names_the_drive_line(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledgercheck.model.cli import main

    spec = LEASE.replace('drive = { patch = "leasing.monotonic" }', 'drive = { param = "clck" }')
    (tmp_path / "lease.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(LEASING.replace("def __init__(self, ttl)", "def __init__(self, ttl, clock)"))
    monkeypatch.chdir(tmp_path)
    assert main(["conform", "lease.toml"]) == 2
    err = capsys.readouterr().err
    line = next(n for n, text in enumerate(spec.splitlines(), 1) if text.startswith("drive"))
    assert f"lease.toml:{line}:" in err
    assert "[clock] drive passes clck=, which Lease(ttl, clock) does not take (did you mean 'clock'?)" in err


def test_a_clock_patch_on_a_class_is_bad_input_not_a_divergence(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`drive = { patch = "leasing.datetime" }` where the class reads `datetime.now()`: the
    patch replaced the class with a clock function and every expiry raised AttributeError,
    reported as a divergence of the class (exit 1, new-user trial on pybreaker). It is the
    binding that cannot work: exit 2, its line, and why."""
    from ledgercheck.model.cli import main

    spec = LEASE.replace('drive = { patch = "leasing.monotonic" }', 'drive = { patch = "leasing.datetime" }')
    source = "from datetime import datetime\n" + LEASING.replace("monotonic()", "datetime.now().timestamp()")
    (tmp_path / "lease.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(source, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["conform", "lease.toml"]) == 2
    err = capsys.readouterr().err
    assert "clock patch 'leasing.datetime': leasing.datetime is the class datetime, not a function returning" in err


def test_replay_reads_an_enum_member_by_its_bare_name_and_refuses_a_misspelt_one(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    (tmp_path / "pool.toml").write_text(SPEC.replace("{capacity}", "capacity"), encoding="utf-8")
    spec = str(tmp_path / "pool.toml")
    assert main(["replay", spec, "acquire(0)", "release(0, how=BROKEN)", "--format", "json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed[0]["steps"][-1]["after"]["shards"][0]["broken"] == 1
    assert main(["replay", spec, "acquire(0)", "release(0, how=BROKN)"]) == 2
    assert "how = 'BROKN' is not a member of Release (OK, BROKEN) (did you mean 'BROKEN'?)" in capsys.readouterr().err


def test_an_event_method_that_cannot_take_the_call_is_a_binding_error(tmp_path: Path, capsys: Any) -> None:
    """`instances = "indexed"` on a class of one pool per object: every call passes an index
    its methods do not take. A binding error (exit 2) naming the call and the method, where
    it was a divergence of every trace (`TypeError: ... takes 1 positional argument`)."""
    from ledgercheck.model.cli import main

    spec = SPEC.replace("{capacity}", "capacity").replace('instances = "each"', 'instances = "indexed"')
    (tmp_path / "pool.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pool.py").write_text(CLASS.format(returned="self.in_use", on_close="pass"), encoding="utf-8")
    code = main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert 'event acquire is called as acquire(index) (instances = "indexed" passes the index first)' in err
    assert "Pool.acquire() does not take (too many positional arguments)" in err


def test_a_call_path_names_the_class_s_own_module_enum(tmp_path: Path, capsys: Any) -> None:
    """`release = "release(how=Release(how))"`: `Release` is the module's enum, not an
    attribute of the class; the reproducer imports it beside the class."""
    from ledgercheck.model.cli import main

    source = "import enum\n\n\nclass Release(enum.Enum):\n    OK = 'ok'\n    BROKEN = 'broken'\n\n\n" + CLASS.format(
        returned="self.in_use", on_close="pass"
    ).replace('if how not in ("ok", "broken"):', "if not isinstance(how, Release):").replace(
        'how="ok"', "how=Release.OK"
    ).replace('if how == "broken":', "if how is Release.BROKEN:")
    spec = SPEC.replace("{capacity}", "capacity") + '\n[implementation.events]\nrelease = "release(how=Release(how))"\n'
    (tmp_path / "pool.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pool.py").write_text(source, encoding="utf-8")
    target = f"{tmp_path / 'pool.py'}:Pool"
    code = main(["conform", str(tmp_path / "pool.toml"), "--impl", target, "--depth", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    (tmp_path / "leaky.py").write_text(source.replace("self.broken += 1", "pass"), encoding="utf-8")
    code = main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'leaky.py'}:Pool", "--depth", "3"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "from leaky import Release" in out
    assert "pool_0.release(how=Release('broken'))" in out


def test_what_the_implementation_logs_stays_out_of_conform_s_report(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "lease.toml").write_text(LEASE, encoding="utf-8")
    noisy = LEASING.replace("from time import monotonic", "import logging\nfrom time import monotonic").replace(
        'self.state = "HELD"', 'self.state = "HELD"\n            logging.getLogger("lease").warning("lease taken")'
    )
    (tmp_path / "leasing.py").write_text(noisy, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", "conform", "lease.toml", "--depth", "2", "--random", "50"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "lease taken" not in run.stdout + run.stderr


def test_a_divergence_of_a_class_that_never_read_the_clock_says_so(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class took `monotonic` as a default argument before the binding patched it: it
    reads the real clock, and its leases never expire under conform's ticks. The report says
    the clock never reached it, where it read as a timeout bug of the class."""
    from ledgercheck.model.cli import main

    captured = (
        LEASING.replace("def __init__(self, ttl):", "def __init__(self, ttl, now=monotonic):")
        .replace("        self.since = 0.0\n", "        self.since = 0.0\n        self.now = now\n")
        .replace("monotonic() - self.since", "self.now() - self.since")
        .replace("self.since = monotonic()", "self.since = self.now()")
    )
    (tmp_path / "lease.toml").write_text(LEASE, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(captured, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["conform", "lease.toml", "--depth", "4"]) == 1
    out = capsys.readouterr().out
    assert "note: time passed in these calls, and the implementation never read the clock conform moves" in out


def test_an_enum_default_is_written_as_an_expression_names_a_member() -> None:
    from ledgercheck.model.errors import SpecError
    from ledgercheck.model.spec import load_spec_text

    text = SPEC.replace("{capacity}", "capacity")
    bare = load_spec_text(text.replace("how: Release = 'OK'", "how: Release = OK"), "pool.toml").variant()
    assert bare.events["release"].signature.params[0].default == "OK"
    with pytest.raises(SpecError, match="'OKK' is not a member of Release \\(did you mean 'OK'\\?\\)"):
        load_spec_text(text.replace("how: Release = 'OK'", "how: Release = OKK"), "pool.toml")


def test_an_enum_field_read_as_no_member_says_how_to_map_it(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    spec = SPEC.replace("{capacity}", "capacity") + 'status = "in_use"\n'
    (tmp_path / "pool.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pool.py").write_text(CLASS.format(returned="self.in_use", on_close="pass"), encoding="utf-8")
    assert main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"]) == 1
    out = capsys.readouterr().out
    assert "shard 0 status: model OPEN, implementation 0" in out
    assert "(status is a Status, and the class shows 0, no member of it: map its values" in out


def test_ci_s_headline_of_a_divergence_right_after_construction() -> None:
    from ledgercheck.model.ci import _divergence

    lines = [
        "ledgercheck conform: pool.py:Pool against the model of 'base' (pool.toml)",
        "  enumeration      1 shard, calls the callers' contracts allow: divergence at depth 1 (1 call sequence)",
        "",
        "pool.py:Pool differs from the model of 'base' right after construction:",
        "  shard 0 waiters: model 0, implementation false (a bool)",
    ]
    assert _divergence(lines, "last") == (
        "pool.py:Pool differs from the model of 'base' right after construction: "
        "shard 0 waiters: model 0, implementation false (a bool)"
    )


def test_a_divergence_only_at_the_largest_policy_says_what_may_be_wrong(tmp_path: Path, capsys: Any) -> None:
    """The spec's capacity starts at 2 whatever max_size is (an initial value cannot name a
    policy constant), the class's at max_size: at max_size=4 they part, and the report says
    which side may be wrong and what to do about the spec's."""
    from ledgercheck.model.cli import main

    (tmp_path / "pool.toml").write_text(SPEC.replace("{capacity}", "capacity"), encoding="utf-8")
    source = CLASS.format(returned="self.in_use", on_close="pass").replace(
        "self.capacity = 2", "self.capacity = max_size"
    )
    (tmp_path / "pool.py").write_text(source, encoding="utf-8")
    assert main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"]) == 1
    out = capsys.readouterr().out
    assert "capacity: model 2, implementation 4" in out
    assert "at the largest policy (max_size=4)" in out
    assert "these calls agree at the policy asked" in out


def test_a_read_path_calling_what_is_no_function_is_a_binding_error(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    spec = SPEC.replace("{capacity}", "capacity") + 'in_use = "in_use()"\n'
    (tmp_path / "pool.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pool.py").write_text(CLASS.format(returned="self.in_use", on_close="pass"), encoding="utf-8")
    assert main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"]) == 2
    err = capsys.readouterr().err
    assert "field in_use's path 'in_use()' calls in_use, which is a int (0), not a function: drop the ()" in err


def test_an_enum_value_the_binding_s_values_miss_names_them(tmp_path: Path, capsys: Any) -> None:
    """`values = { CLOSED = 7 }` where the class shows 1 (a misspelt entry, as `half_open` for
    pybreaker's "half-open"): the hint quotes the mapping instead of asking for one."""
    from ledgercheck.model.cli import main

    spec = SPEC.replace("{capacity}", "capacity") + 'status = { read = "in_use", values = { OPEN = 0, CLOSED = 7 } }\n'
    (tmp_path / "pool.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pool.py").write_text(CLASS.format(returned="self.in_use", on_close="pass"), encoding="utf-8")
    assert main(["conform", str(tmp_path / "pool.toml"), "--impl", f"{tmp_path / 'pool.py'}:Pool"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "which the binding's values (OPEN = 0, CLOSED = 7) map to no member: a misspelt values entry" in out, out


def test_a_call_that_changes_only_an_unobserved_field_is_not_reused(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`renew` restarts a timer the binding does not observe (`held_for = { observe = false }`)
    and shows no change: the enumeration kept that object for the next sibling call, which then
    ran on a renewed lease, and a correct class diverged (`expire(0)`: model FREE, implementation
    HELD; message-queue trial). The model's own state changed: the object is built afresh."""
    from ledgercheck.model.cli import main

    spec = LEASE.replace(  # renew before expire: its sibling, called next on the same object
        "[events.expire]",
        '[events.renew]\ncall = "renew(i)"\nbody = """\nif state == HELD:\n    held_for = 0\n"""\n\n[events.expire]',
    )
    renew = '\n    def renew(self):\n        if self.state == "HELD":\n            self.since = monotonic()\n'
    source = LEASING + renew
    (tmp_path / "lease.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(source, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main(["conform", "lease.toml", "--depth", "5", "--random", "0", "--no-policies", "--no-counterexamples"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err


def test_a_timeout_capped_below_the_largest_policy_is_walked_to(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ttl the class caps at 4 where the spec allows 5: the lease expires one tick early at
    ttl = 5 only. The branch traces jump the whole ttl at once and the enumeration at other
    policies is 4 calls deep: it passed conform (a `transitions` job's timeout, new-user trial).
    Ticking one unit at a time after each branch trace, calling each event, meets it; so do
    the probes, which call `expire` at every state the branch traces pass through."""
    from ledgercheck.model.cli import main

    capped = LEASING.replace("monotonic() - self.since >= self.ttl", "monotonic() - self.since >= min(self.ttl, 4)")
    (tmp_path / "lease.toml").write_text(LEASE, encoding="utf-8")
    (tmp_path / "leasing.py").write_text(capped, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    quick = ["--random", "0", "--no-counterexamples", "--no-policies"]
    assert main(["conform", "lease.toml", *quick]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "found by a call where a trace to a branch passes at the largest policy (ttl=5)" in out, out
    assert main(["conform", "lease.toml", *quick, "--no-probes"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "found by a walk of the clock at the largest policy (ttl=5)" in out, out
    assert main(["conform", "lease.toml", *quick, "--no-runs", "--no-probes"]) == 0  # what the two add
    capsys.readouterr()
