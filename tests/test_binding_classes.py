"""Binding a user's own class (`[implementation]`), the way users write one: an indexed job
table (one object, the instance index first) read through a getter, called by the event's
own method name or through a call path that names the spec's `i`, built with the number of
instances. Each test names the mistake a user met before it was fixed."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledgercheck.model.binding import bound_class
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.implementation import load_implementation
from ledgercheck.model.conformance.observation import Normaliser
from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "jobs"
api_class = "JobTable"
state_field = "state"
default_shards = 2

[enums.JobState]
members = ["PENDING", "LEASED", "DONE"]

[enums.Outcome]
members = ["NONE", "SUCCEEDED", "CRASHED"]
api_values = "lower"

[policy]
max_attempts = { default = 2, min = 1, max = 3 }

[fields]
state = { type = "JobState", initial = "PENDING" }
epoch = { type = "int", initial = 0 }
outcome = { type = "Outcome", initial = "NONE" }

[events.lease]
call = "lease(i)"
raises = [{ when = "state != PENDING", error = "NotLeasable" }]
returns = "epoch"
body = \"\"\"
epoch = epoch + 1
state = LEASED
\"\"\"

[events.finish]
call = "finish(i, epoch: int = 1)"
ignore_when = "state != LEASED or args.epoch != epoch"
body = \"\"\"
state = DONE
outcome = SUCCEEDED
\"\"\"

[events.crash]
call = "crash(i)"
ignore_when = "state != LEASED"
returns = "outcome"
body = \"\"\"
state = PENDING
outcome = CRASHED
\"\"\"

[environments.ledger]
any_call = true

[properties.done_succeeded]
kind = "invariant"
assert = "state != DONE or outcome == SUCCEEDED"
expect = { base = "holds" }

[implementation]
instances = "indexed"
construct = { n = "instances", max_attempts = "max_attempts" }

[implementation.fields]
state = "job(i).state"
epoch = "job(index).epoch"
outcome = "job(i).outcome"

[implementation.events]
finish = "finish(i, epoch)"
"""

CLASS = """\
class NotLeasable(Exception):
    pass


class Job:
    def __init__(self):
        self.state = "PENDING"
        self.epoch = 0
        self.outcome = "none"


class JobTable:
    def __init__(self, n, max_attempts=2):
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.jobs = [Job() for _ in range(n)]

    def job(self, i):
        return self.jobs[i]

    def lease(self, i):
        job = self.jobs[i]
        if job.state != "PENDING":
            raise NotLeasable(i)
        job.epoch += 1
        job.state = "LEASED"
        return job.epoch

    def finish(self, i, epoch):  # no default of its own: the binding passes the spec's
        job = self.jobs[i]
        if job.state == "LEASED" and {check}:
            job.state = "DONE"
            job.outcome = "succeeded"

    def crash(self, i):
        job = self.jobs[i]
        if job.state == "LEASED":
            job.state = "PENDING"
            job.outcome = "crashed"
        return job.outcome
"""
GOOD = CLASS.format(check="epoch == job.epoch")
STALE = CLASS.format(check="True")  # a completion with a stale epoch is accepted


def _write(tmp_path: Path, spec: str = SPEC, source: str = GOOD) -> tuple[Path, str]:
    (tmp_path / "jobs.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "jobtable.py").write_text(source, encoding="utf-8")
    return tmp_path / "jobs.toml", f"{tmp_path / 'jobtable.py'}:JobTable"


def _spec(text: str = SPEC) -> Any:
    return load_spec_text(text, "jobs.toml").variant()


def _fleet(tmp_path: Path, spec_text: str = SPEC, shards: int = 2) -> Any:
    _, target = _write(tmp_path, spec_text)
    spec = _spec(spec_text)
    return load_implementation(target, spec).build(shards, spec.default_policy())


def _line(text: str, start: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def _conform(capsys: Any, spec: Path, target: str, *more: str) -> tuple[int, str]:
    """`ledgercheck conform` as a user runs it: its exit code, and what it printed."""
    from ledgercheck.model.cli import main

    code = main(["conform", str(spec), "--impl", target, "--depth", "3", "--random", "40", *more])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# --- 1. an indexed binding passes the index, by any of its names ---------------------------


def test_an_event_the_binding_does_not_list_gets_the_index_first(tmp_path):
    fleet = _fleet(tmp_path)
    assert fleet.lease(1) == 1  # JobTable.lease(self, i): the index, then the arguments
    assert fleet.state_of(1) == "LEASED" and fleet.state_of(0) == "PENDING"


def test_a_call_path_names_the_index_as_the_spec_does(tmp_path):
    text = SPEC.replace('finish = "finish(i, epoch)"', 'finish = "finish(i, epoch)"\nlease = "lease(i)"')
    fleet = _fleet(tmp_path, text)
    assert fleet.lease(0) == 1  # `i`: the spec's own name for the instance parameter
    fleet.finish(0, 1)
    assert [r.state for r in fleet.snapshot()] == ["DONE", "PENDING"]  # read as job(i).state


# --- 2. a left-out argument reaches the call with the spec's default -----------------------


def test_an_argument_left_out_reaches_the_call_path_with_its_default(tmp_path):
    fleet = _fleet(tmp_path)
    fleet.lease(0)
    fleet.finish(0)  # as the generated tests call it: epoch left out, the spec's default 1
    assert fleet.state_of(0) == "DONE"


# --- 3. construct reads the number of instances ---------------------------------------------


@pytest.mark.parametrize("name", ["instances", "shard_count"])
def test_construct_reads_the_number_of_instances(tmp_path, name):
    fleet = _fleet(tmp_path, SPEC.replace('n = "instances"', f'n = "{name}"'), shards=3)
    assert len(fleet._objects) == 1 and len(fleet._objects[0].jobs) == 3


def test_a_construct_path_naming_something_unknown_is_refused_with_its_line():
    text = SPEC.replace('n = "instances"', 'n = "shard_cont"')
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "jobs.toml")
    assert caught.value.where.line == _line(text, "construct =")
    assert "'shard_cont'" in caught.value.message and "did you mean 'shard_count'?" in caught.value.message


# --- 4. a path the class cannot follow is bad input, naming the binding's line -------------


@pytest.mark.parametrize(
    ("old", "new", "wanted"),
    [
        (
            'finish = "finish(i, epoch)"',
            'finish = "finsh(i, epoch)"',
            "the implementation has no finsh (needed by event finish: 'finsh(i, epoch)'): JobTable has no "
            "attribute 'finsh' (did you mean 'finish'?)",
        ),
        (
            'state = "job(i).state"',
            'state = "job(i).stat"',
            "the implementation has no job(i).stat (needed by field state: 'job(i).stat'): job(i), a Job, has no "
            "attribute 'stat' (did you mean 'state'?)",
        ),
        (
            'finish = "finish(i, epoch)"',
            'finish = "finish(i, epoh)"',
            "the implementation has no epoh (needed by event finish: 'finish(i, epoh)'): JobTable has no "
            "attribute 'epoh' (did you mean 'epoch'?)",
        ),
    ],
)
def test_a_path_the_class_cannot_follow_is_a_binding_error(tmp_path, old, new, wanted, capsys):
    text = SPEC.replace(old, new)
    spec, target = _write(tmp_path, text)
    code, message = _conform(capsys, spec, target)
    assert code == 2, message
    assert f"jobs.toml:{_line(text, new)}:" in message and wanted in message
    assert "<missing>" not in message and "diverges" not in message


def test_a_method_the_class_lacks_for_an_unbound_event_is_a_binding_error(tmp_path, capsys):
    spec, target = _write(tmp_path, source=GOOD.replace("def crash(", "def crash_job("))
    code, message = _conform(capsys, spec, target)
    assert code == 2 and "the implementation has no crash (needed by event crash" in message, message
    assert "did you mean 'crash_job'?" in message


def test_a_construct_keyword_the_class_does_not_take_is_a_binding_error(tmp_path, capsys):
    text = SPEC.replace('n = "instances"', 'nn = "instances"')
    spec, target = _write(tmp_path, text)
    code, message = _conform(capsys, spec, target)
    assert code == 2 and f"jobs.toml:{_line(text, 'construct =')}:" in message, message
    assert "construct passes nn=, which JobTable(n, max_attempts) does not take (did you mean 'n'?)" in message


def test_a_construction_that_fails_names_the_binding_and_the_class(tmp_path, capsys):
    text = SPEC.replace('max_attempts = "max_attempts"', 'max_attempts = "0"')
    spec, target = _write(tmp_path, text)
    code, message = _conform(capsys, spec, target)
    assert code == 2 and f"jobs.toml:{_line(text, 'construct =')}:" in message, message
    assert "JobTable(n=2, max_attempts=0), as the binding constructs it, raised ValueError" in message
    assert "shard_count=" not in message and "the ledger's API" not in message


# --- 5. every enum's api_values, fields and returned values ---------------------------------


def test_every_enum_s_api_values_are_read_for_its_fields_and_returns():
    normalise = Normaliser(_spec())
    assert normalise.field("outcome", "crashed") == "CRASHED"
    assert normalise.returned("crash", "crashed") == "CRASHED"
    assert normalise.field("state", "PENDING") == "PENDING" and normalise.returned("lease", 2) == 2


def test_conform_passes_the_class_bound_as_users_write_it(tmp_path, capsys):
    spec, target = _write(tmp_path)
    code, out = _conform(capsys, spec, target)
    assert code == 0 and "no divergence" in out, out


# --- 6. a spec without contracts: its reports say nothing of them -------------------------


def test_a_divergence_of_a_spec_without_contracts_says_nothing_of_them(tmp_path):
    """The spec has no `requires`: every call is within contracts that rule nothing out, and
    saying so (`every call is one the callers' contracts allow`) read as if it declared some."""
    _, target = _write(tmp_path, source=STALE)
    spec = _spec()
    checker = Conformance(spec, load_implementation(target, spec), spec.default_policy())
    found = checker.enumerate(2, 3, contract=False).divergence
    assert found is not None and found.within_contract and not checker.has_contracts
    report = checker.report(checker.shrink(found), "base")
    assert "contracts" not in report


# --- 7. the reproducer is the user's own code ----------------------------------------------


def test_the_reproducer_builds_and_calls_the_user_s_class(tmp_path, capsys, monkeypatch):
    spec, target = _write(tmp_path, source=STALE)
    code, out = _conform(capsys, spec, target, "--no-counterexamples")
    assert code == 1, out
    reproducer = out.split("reproduce:\n", 1)[1]
    lines = textwrap.dedent(reproducer).splitlines()
    assert lines == [
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})  # the class's folder",
        f"from jobtable import JobTable  # {tmp_path / 'jobtable.py'}",
        "job_table = JobTable(n=1, max_attempts=2)",
        "job_table.lease(0)",
        "job_table.finish(0, 0)",
        *lines[5:],
    ]
    assert lines[5:] and all(line.startswith("print(job_table.") and "# the model: " in line for line in lines[5:])
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(reproducer), namespace)  # run from anywhere: it puts the class's folder first
    assert namespace["job_table"].job(0).state == "DONE"  # the divergence: the model ignores the stale epoch
    capsys.readouterr()


def test_a_binding_shown_in_a_reproducer_reads_as_the_call_it_makes():
    spec = _spec()
    cls = bound_class(spec.binding, spec, SimpleNamespace)
    policy = spec.default_policy()
    assert cls.construction_code(3, policy) == ["simple_namespace = SimpleNamespace(n=3, max_attempts=2)"]
    assert cls.call_code("finish", 2, [], {}, 3, policy) == "simple_namespace.finish(2, 1)"
    assert cls.call_code("crash", 1, [], {}, 3, policy) == "simple_namespace.crash(1)"
    assert cls.call_code("crash", 3, [], {}, 3, policy).startswith("# crash(3): no instance 3")


# --- where the spec's own target is found ------------------------------------------------------


def test_the_spec_s_target_is_found_beside_the_spec_from_any_directory(tmp_path, capsys, monkeypatch):
    """`target = "jobtable.py:JobTable"` in a spec kept beside its class: conform from another
    directory said `no such file: jobtable.py`; the path is read from the working directory
    where the file is there, else from the spec's folder."""
    from ledgercheck.model.cli import main
    from ledgercheck.model.conformance.implementation import spec_target

    spec, _ = _write(
        tmp_path, SPEC.replace("[implementation]\n", '[implementation]\ntarget = "jobtable.py:JobTable"\n', 1)
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert spec_target("jobtable.py:JobTable", str(spec)) == f"{tmp_path / 'jobtable.py'}:JobTable"
    assert spec_target("jobtable:JobTable", str(spec)) == "jobtable:JobTable"  # a module: the import path's
    code = main(["conform", str(spec), "--depth", "2", "--random", "10"])
    out = capsys.readouterr().out
    assert code == 0 and "no divergence" in out, out


def test_a_class_misspelt_in_a_target_gets_a_suggestion_named_once(tmp_path, capsys):
    spec, target = _write(tmp_path)
    code, out = _conform(capsys, spec, target.replace(":JobTable", ":JobTabel"))
    assert code == 2, out
    assert "has no class 'JobTabel' (did you mean 'JobTable'?)" in out, out
    assert out.count("JobTabel") == 2, out  # the target once, the class once


def test_ci_names_a_binding_error_as_bad_input_not_a_divergence(tmp_path, capsys):
    """`ci` ran conform, which refused the binding (exit 2), and reported it as DIVERGES with
    exit 1; it is bad input: nothing about the class's behaviour was judged."""
    from ledgercheck.model.cli import main

    text = SPEC.replace('finish = "finish(i, epoch)"', 'finish = "finsh(i, epoch)"')
    spec, target = _write(tmp_path, text)
    out = tmp_path / "generated"
    assert main(["gen", str(spec), "--out", str(out)]) == 0
    capsys.readouterr()
    code = main(["ci", str(spec), "--out", str(out), "--impl", target, "--conform-depth", "2", "--jobs", "1"])
    summary = capsys.readouterr().out.split("\n\n", 1)[0]
    assert code == 2, summary
    assert summary.startswith("ledgercheck ci jobs.toml: BAD INPUT"), summary
    assert "BAD INPUT conformance: " in summary and "the implementation has no finsh" in summary, summary
    assert "DIVERGES" not in summary, summary


def test_a_python_enum_is_read_by_its_name_or_its_value():
    """A class's own `enum.Enum`: a member named as the spec's is that member; one named
    otherwise (`Outcome.Crashed = "crashed"`) is read by its value, through the enum's
    `api_values` (it was read as 'Crashed', which no member is)."""
    import enum

    class Outcome(enum.Enum):
        Crashed = "crashed"
        SUCCEEDED = "ok"

    normalise = Normaliser(_spec())
    assert normalise.field("outcome", Outcome.Crashed) == "CRASHED"
    assert normalise.returned("crash", Outcome.Crashed) == "CRASHED"
    assert normalise.field("outcome", Outcome.SUCCEEDED) == "SUCCEEDED"  # the name wins


def test_a_field_s_values_table_maps_a_python_enum_member(tmp_path):
    """`values = { CRASHED = "gone" }` maps what the class keeps: an `enum.Enum` member is
    found by its value (or name), not by its repr (which no table holds)."""
    source = GOOD.replace(
        "class Job:", 'import enum\n\n\nclass Exit(enum.Enum):\n    GONE = "gone"\n\n\nclass Job:'
    ).replace('job.outcome = "crashed"', "job.outcome = Exit.GONE")
    text = SPEC.replace(
        'outcome = "job(i).outcome"', 'outcome = { read = "job(i).outcome", values = { CRASHED = "gone" } }'
    )
    _, target = _write(tmp_path, text, source)
    spec = _spec(text)
    fleet = load_implementation(target, spec).build(1, spec.default_policy())
    fleet.lease(0)
    fleet.crash(0)
    assert Normaliser(spec).field("outcome", fleet.snapshot()[0].outcome) == "CRASHED"


def test_a_bound_class_s_state_is_compared_once(tmp_path, capsys):
    """A bound class's `state_of` is its state field's read: the figure showed the same
    values twice (a `state_of(0)` row beside `state`) and the differences named both."""
    spec, target = _write(tmp_path, source=STALE)
    code, out = _conform(capsys, spec, target, "--no-counterexamples")
    assert code == 1, out
    assert "state_of" not in out, out
    assert "shard 0 state: model LEASED, implementation DONE" in out, out


def test_a_misspelt_target_names_its_line(tmp_path, capsys, monkeypatch):
    """The spec's own `target` that cannot be loaded names the line that wrote it (it named
    the target only, as a --impl given on the command line is named)."""
    from ledgercheck.model.cli import main

    text = SPEC.replace("[implementation]\n", '[implementation]\ntarget = "jobtabel.py:JobTable"\n', 1)
    spec, _ = _write(tmp_path, text)
    monkeypatch.chdir(tmp_path)
    assert main(["conform", str(spec), "--depth", "1", "--random", "0"]) == 2
    err = capsys.readouterr()
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith("target = "))
    assert f"jobs.toml:{line}:" in err.out + err.err and "jobtabel.py" in err.out + err.err, err


def test_the_reproducer_of_a_copy_of_an_installed_module_imports_the_copy(tmp_path):
    """A bug injected into a copy of an installed library (`buggy/pybreaker.py`): the pasted
    reproducer imported the library itself and showed nothing. It now puts the copy's folder
    first, as for any file (a script's own folder is where Python looks, not the shell's)."""
    from ledgercheck.model.conformance.divergence import _class_import

    copy = tmp_path / "json.py"  # a name the standard library has
    copy.write_text("class Ledger:\n    pass\n")
    lines = _class_import(f"{copy}:Ledger")
    assert lines == [
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})  # not the installed json",
        f"from json import Ledger  # {copy}",
    ]
    alone = tmp_path / "nowhere_else_4711.py"
    alone.write_text("class Ledger:\n    pass\n")
    assert _class_import(f"{alone}:Ledger") == [
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})  # the class's folder",
        f"from nowhere_else_4711 import Ledger  # {alone}",
    ]


def test_a_misspelt_keyword_a_class_takes_through_kwargs_is_a_binding_error(tmp_path, capsys):
    """A class whose constructor also takes `**kwargs` (a library's base class passes them on)
    swallowed `max_attempt=`: its own default applied, and conform reported a divergence at
    another policy, blaming the spec's initial values (python-statemachine trial). Nearly the
    name of a keyword it takes is taken for that mistake; a keyword like no other passes."""
    source = GOOD.replace("def __init__(self, n, max_attempts=2):", "def __init__(self, n, max_attempts=2, **kwargs):")
    assert source != GOOD
    text = SPEC.replace('max_attempts = "max_attempts"', 'max_attempt = "max_attempts"')
    spec, target = _write(tmp_path, text, source=source)
    code, message = _conform(capsys, spec, target)
    assert code == 2 and f"jobs.toml:{_line(text, 'construct =')}:" in message, message
    assert (
        "construct passes max_attempt=, which JobTable(n, max_attempts, **kwargs) takes only through **kwargs, "
        "where a misspelt keyword is swallowed (did you mean 'max_attempts'?)"
    ) in message
    extra = SPEC.replace('max_attempts = "max_attempts"', 'max_attempts = "max_attempts", label = "1"')
    spec, target = _write(tmp_path, extra, source=source)
    code, message = _conform(capsys, spec, target)
    assert "takes only through **kwargs" not in message and code != 2, message
