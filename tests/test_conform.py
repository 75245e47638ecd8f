"""`ledgercheck conform`: an implementation against the executable model, call by call.

The three clean-room implementations of `tests/impl/` are the fixtures: the clean one (the
seed's fix) conforms to `fixed`; the as-written copy (no fix in `mark_loaded`) and the
subtle copy (`report_success` ignored unless SERVING) must each be caught, with the shortest
divergent trace. Then the command's bad input, and the pytest plugin's `--ledger-conform`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import fast_slice

from ledgercheck.model import conformance as conform
from ledgercheck.model.cli import main
from ledgercheck.model.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
IMPL = ROOT / "tests" / "impl"
SERVING = {"HEALTHY", "SUSPECT"}


def target(stem: str, cls: str = "GenerationFleetHealth") -> str:
    return f"{IMPL / stem}.py:{cls}"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's counterexample cache."""
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(tmp_path / "cache"))


def shortest(stem: str) -> tuple[conform.Conformance, conform.Divergence]:
    spec_file = load_spec()
    spec = spec_file.variant("fixed")
    checker = conform.Conformance(spec, conform.load_target(target(stem), spec), spec.resolve_policy({}))
    summary = conform.check(checker, spec_file, {}, depth=4, random_calls=300, counterexamples=False)
    assert summary.divergence is not None, f"{stem} was not told from the model of 'fixed'"
    return checker, summary.divergence


def states_before_each_call(divergence: conform.Divergence) -> list[str]:
    """The model's state of each call's shard just before the call."""
    spec = load_spec().variant("fixed")
    checker = conform.Conformance(spec, conform.load_target(target("fleet_health_clean"), spec), {})
    model = checker.new_model(divergence.script.shards)
    states = []
    for call in divergence.script.calls:
        states.append(str(model.state_of(call.shard)))
        conform.invoke(model, call, spec.events[call.event])
    return states


def test_default_variant_is_the_one_whose_properties_hold() -> None:
    assert conform.default_variant(load_spec()) == "refit_keeps_streak"


@pytest.mark.slow
def test_clean_implementation_conforms_to_fixed(capsys: pytest.CaptureFixture[str]) -> None:
    """Every source, none finding a divergence. At enumeration depth 3: depth 4 took 46 s alone
    (136 s in a loaded full suite, the suite's largest item) and runs no code depth 3 does not."""
    code = main(
        [
            "conform",
            "--impl",
            target("fleet_health_clean"),
            "--variant",
            "fixed",
            "--depth",
            "3",
            "--random",
            "300",
            "--cex-depth",
            "6",
            "--cex-traces",
            "1",
            "--jobs",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^\d+ traces, \d+ calls compared, no divergence$", out, re.M), out
    assert re.search(r"any call, depth 3: \d+ call sequences", out), out
    assert "300 calls in 6 traces" in out, out
    found = re.search(r"counterexamples\s+(\d+) traces of the checker", out)
    assert found and int(found.group(1)) >= 2, out  # the as_written violations at depth 6, lax traces


def test_as_written_diverges_at_mark_loaded_of_a_restarted_shard(capsys: pytest.CaptureFixture[str]) -> None:
    checker, divergence = shortest("fleet_health_as_written")
    calls = divergence.script.calls
    last = calls[-1]
    assert last.event == "mark_loaded", [c.label() for c in calls]
    assert len(calls) <= 4, [c.label() for c in calls]
    assert any(c.event == "mark_restarting" and c.shard == last.shard for c in calls[:-1]), calls
    assert divergence.within_contract  # a caller that keeps the contracts meets it
    fields = {d.key[2] for d in divergence.differences if d.key[0] == "field"}
    assert fields & {"consecutive_reported_failures", "state_before_partial"}, divergence.differences
    report = checker.report(divergence, "fixed", width=200)
    assert "> consecutive_reported_failures" in report or "> state_before_partial" in report, report
    assert "(impl: " in report and "ledger.mark_loaded(" in report, report

    args = ["--variant", "fixed", "--no-counterexamples", "--random", "0"]
    code = main(["conform", "--impl", target("fleet_health_as_written"), *args])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "diverges from the model of 'fixed'" in out and "mark_loaded(" in out, out


@pytest.mark.slow
def test_subtle_copy_is_caught_with_its_shortest_trace() -> None:
    _, divergence = shortest("fleet_health_subtle")
    calls = divergence.script.calls
    assert calls[-1].event == "report_success", [c.label() for c in calls]
    assert len(calls) == 3, [c.label() for c in calls]  # fail, leave SERVING, succeed
    assert states_before_each_call(divergence)[-1] not in SERVING
    assert not divergence.within_contract
    assert any(d.key[0] == "field" and d.key[2] == "consecutive_reported_failures" for d in divergence.differences)


def test_full_merge_finds_the_same_shortest_divergence() -> None:
    spec = load_spec().variant("fixed")
    checker = conform.Conformance(
        spec, conform.load_target(target("fleet_health_subtle"), spec), spec.resolve_policy({})
    )
    result = checker.enumerate(2, 3, merge="full")
    assert result.divergence is not None and len(result.divergence.script.calls) == 3


def test_missing_method_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "partial_ledger.py"
    clean = str(IMPL / "fleet_health_clean.py")
    module.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_conform_partial_base', {clean!r})\n"
        "base = importlib.util.module_from_spec(spec)\n"
        "sys.modules[spec.name] = base\n"
        "spec.loader.exec_module(base)\n"
        "FleetHealthPolicy = base.FleetHealthPolicy\n"
        "GenerationFleetHealth = type('GenerationFleetHealth', (), {k: v for k, v in "
        "vars(base.GenerationFleetHealth).items() if k not in ('mark_restart_failed', '__dict__', '__weakref__')})\n",
        encoding="utf-8",
    )
    code = main(["conform", "--impl", f"{module}:GenerationFleetHealth", "--no-counterexamples"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the implementation has no mark_restart_failed (needed by event mark_restart_failed)" in err, err


def test_unloadable_targets_exit_2_with_the_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", "--impl", "no_such_ledger_module_xyz:GenerationFleetHealth"]) == 2
    assert "No module named 'no_such_ledger_module_xyz'" in capsys.readouterr().err
    broken = tmp_path / "broken_ledger.py"
    broken.write_text("raise RuntimeError('the ledger module is broken')\n", encoding="utf-8")
    assert main(["conform", "--impl", f"{broken}:GenerationFleetHealth"]) == 2
    assert "RuntimeError: the ledger module is broken" in capsys.readouterr().err
    assert main(["conform", "--impl", "no-colon-here"]) == 2
    assert "module:Class" in capsys.readouterr().err
    assert main(["conform", "--impl", target("fleet_health_clean", "NoSuchClass")]) == 2
    assert "no class 'NoSuchClass'" in capsys.readouterr().err


def test_counterexample_traces_replay_as_calls() -> None:
    """The checker's traces become the ledger calls their steps made, shards and arguments kept."""
    from ledgercheck.model import bmc

    spec = load_spec().variant("as_written")
    prop = spec.properties["restarted_engine_refits_healthy"]
    result = bmc.check_property(
        spec, "controller", prop, shards=2, policy=spec.resolve_policy({}), max_depth=6, max_traces=1, lax=False
    )
    script = conform.trace_script(result.traces[0], spec, "test")
    expected = [c.event for step in result.traces[0].steps[1:] for c in step.calls]
    assert [c.event for c in script.calls] == expected
    assert script.calls[-1].event == "report_refit"
    fixed = load_spec().variant("fixed")
    checker = conform.Conformance(fixed, conform.load_target(target("fleet_health_clean"), fixed), {})
    assert checker.run(script) is None


def run_pytest(tmp_path: Path, stem: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEDGERCHECK_CACHE": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--ledger-conform",
            target(stem),
            "--ledger-conform-depth",
            "3",
            "--ledger-conform-random",
            "200",
            "--ledger-variant",
            "fixed",  # the clean implementation is `fixed`, not the reference variant
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_pytest_plugin_runs_conformance_traces(tmp_path: Path) -> None:
    passing = run_pytest(tmp_path, "fleet_health_clean")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert re.search(r"\b6 passed\b", passing.stdout), passing.stdout  # 2 enumerations, 4 random traces

    failing = run_pytest(tmp_path, "fleet_health_as_written")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "FAILED ledgercheck-conform::conformance[enumerate-any-depth3-shards2]" in failing.stdout
    assert "diverges from the model of 'fixed'" in failing.stdout, failing.stdout
    assert "mark_loaded(" in failing.stdout and "(impl: " in failing.stdout, failing.stdout


def _masked(lines: list[str]) -> list[str]:
    return [re.sub(r"\d+\.\d s\b", "X s", line) for line in lines]


def test_the_enumeration_beside_the_checks_reads_as_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledgercheck.model.conformance import session, sources
    from ledgercheck.model.executor import Beside

    beside = []
    original = session._beside_checks
    monkeypatch.setattr(session, "_beside_checks", lambda *a: beside.append(original(*a)) or beside[-1])
    spec_file = load_spec(str(ROOT / "spec" / "examples" / "listener_breaker.toml"))
    spec = spec_file.variant(conform.default_variant(spec_file))
    impl = conform.load_target(f"{IMPL / 'listener_breaker.py'}:ListenerBreaker", spec)
    summaries = []
    for jobs in (1, 2):
        sources._COUNTEREXAMPLES.clear()
        checker = conform.Conformance(spec, impl, spec.resolve_policy({}))
        summaries.append(conform.check(checker, spec_file, {}, depth=3, random_calls=50, cex_depth=6, jobs=jobs))
    assert len(beside) == 1  # with two workers only
    assert beside[0] is None if not Beside.possible() else beside[0].scripts  # found beside the enumeration
    one, two = summaries
    assert one.divergence is None and two.divergence is None
    firsts = [line.split()[0] for line in one.lines[:-1] if not line.startswith("   ")]  # not a policy listed
    # listener_breaker has no contracts: the enumeration makes one pass, of any call
    assert firsts == [
        "enumeration",
        "random",
        "runs",
        "branches",
        "probes",
        "around",
        "branches",
        "probes",
        "around",
        "policies",
        "counterexamples",
    ]
    assert _masked(one.lines) == _masked(two.lines)  # the counts of traces and calls compared too


def test_a_divergence_the_enumeration_finds_beside_the_checks_stops_them() -> None:
    from ledgercheck.model.conformance import sources

    spec_file = load_spec()
    spec = spec_file.variant("fixed")
    found = []
    for jobs in (1, 2):
        sources._COUNTEREXAMPLES.clear()
        checker = conform.Conformance(spec, conform.load_target(target("fleet_health_as_written"), spec), {})
        summary = conform.check(checker, spec_file, {}, depth=4, random_calls=0, jobs=jobs, cache=None)
        assert summary.divergence is not None
        assert not sources._COUNTEREXAMPLES  # the 96 checks were stopped (one after the other: never started)
        found.append((summary.lines, summary.divergence.script, checker.report(summary.divergence, "fixed", width=200)))
    assert found[0] == found[1]
    assert "divergence at depth" in found[0][0][-1]


def test_a_divergence_that_does_not_pickle_is_found_again_in_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enumeration's process sends its result back by pickle; a divergence holding a value
    that does not pickle (here an object of a class local to a method) is found again by the
    command's own process, and reads as one after the other."""
    from ledgercheck.model.conformance import session, sources
    from ledgercheck.model.executor import Beside

    beside = []
    original = session._beside_checks
    monkeypatch.setattr(session, "_beside_checks", lambda *a: beside.append(original(*a)) or beside[-1])

    source = (IMPL / "listener_breaker.py").read_text()
    broken = source.replace(
        "        self.failures += 1\n",
        "        self.failures += 1\n        if self.failures == 2:\n"
        "            class Count(int):  # local to the method: pickle cannot name it\n                pass\n\n"
        "            self.failures = Count(3)\n",
    )
    assert broken != source
    module = tmp_path / "listener_breaker_local_count.py"
    module.write_text(broken)
    spec_file = load_spec(str(ROOT / "spec" / "examples" / "listener_breaker.toml"))
    spec = spec_file.variant(conform.default_variant(spec_file))
    found = []
    for jobs in (1, 2):
        sources._COUNTEREXAMPLES.clear()
        checker = conform.Conformance(spec, conform.load_target(f"{module}:ListenerBreaker", spec), {})
        summary = conform.check(checker, spec_file, {}, depth=3, random_calls=0, cex_depth=6, jobs=jobs, cache=None)
        assert summary.divergence is not None
        found.append((summary.lines, summary.divergence.script, [d.key for d in summary.divergence.differences]))
    assert found[0] == found[1]
    assert any(key[-1] == "failures" for key in found[0][2]), found[0][2]
    if Beside.possible():  # the enumeration beside the checks diverged, and could not say how
        assert len(beside) == 1 and beside[0] is not None
        assert beside[0].enumerated is None and beside[0].scripts is None


def _split_enumerations(
    where: str, depth: int, monkeypatch: pytest.MonkeyPatch, splits: tuple[int, ...] = (2, 16)
) -> list:
    """The enumeration of the implementation at `where` (at 2 shards, every call) in one pass and split into
    `splits` runs a level (2: as many as the workers here; 16: more runs than a level's first
    frontier has nodes, in uneven shares), every level split (`SPLIT_FROM` = 1): each result
    with the session's counts, and the prefixes the merging process expanded itself (the other
    runs are forked)."""
    import os

    from ledgercheck.model.conformance import enumeration

    here = os.getpid()
    expanded: list[tuple] = []
    original = enumeration.Enumerator.expand

    def expand(self, nodes, seen, level, keep):  # type: ignore[no-untyped-def]
        if os.getpid() == here:
            expanded.extend(prefix for prefix, *_ in nodes)
        return original(self, nodes, seen, level, keep)

    monkeypatch.setattr(enumeration, "SPLIT_FROM", 1)
    monkeypatch.setattr(enumeration.Enumerator, "expand", expand)
    spec = load_spec().variant("fixed")
    results = []
    for parts in (1, *splits):  # 16: the shortest divergences lie past the frontier's first run
        checker = conform.Conformance(spec, conform.load_target(where, spec), spec.resolve_policy({}))
        expanded.clear()
        result = checker.enumerate(2, depth, parts=parts)
        results.append((parts, result, checker.traces, checker.calls_compared, list(expanded)))
    return results


def _same_as_one_pass(results: list) -> None:
    _, one, traces, compared, _ = results[0]
    for parts, split, split_traces, split_compared, _ in results[1:]:
        assert (split.depth, split.sequences, split.states, split.exhausted) == (
            one.depth,
            one.sequences,
            one.states,
            one.exhausted,
        ), parts
        assert (split_traces, split_compared) == (traces, compared), parts
        if one.divergence is None:
            assert split.divergence is None, parts
        else:
            assert split.divergence is not None, parts
            assert split.divergence.script == one.divergence.script, parts
            assert [d.key for d in split.divergence.differences] == [d.key for d in one.divergence.differences]
            assert split.divergence.within_contract == one.divergence.within_contract


def test_a_split_enumeration_is_the_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each level's runs expanded at once (`parts`) give the states, the counts and the first
    divergence of one pass: for an implementation that conforms (every level merged), and for
    two that diverge, at least once in a run another process expanded."""
    import multiprocessing

    from ledgercheck.model.executor import Beside

    clean = _split_enumerations(target("fleet_health_clean"), 3, monkeypatch, (2,))
    _same_as_one_pass(clean)
    assert clean[0][1].divergence is None and clean[0][1].sequences > 1000
    forked = 0
    # 16 runs a level on the shallow divergence only (forking 16 runs a level took 3 s on the deeper one)
    for stem, splits in (("fleet_health_subtle", (2,)), ("fleet_health_as_written", (2, 16))):
        results = _split_enumerations(target(stem), 4, monkeypatch, splits)
        _same_as_one_pass(results)
        for _, split, _, _, expanded in results[1:]:
            forked += split.divergence is not None and split.divergence.script.calls[:-1] not in expanded
    assert not multiprocessing.active_children()  # every run's process ended, the stopped ones too
    if Beside.possible():
        assert forked, "no divergence was found by a forked run: the merge of their results went untested"
        assert all(len(expanded) < len(clean[0][4]) for *_, expanded in clean[1:])


@pytest.mark.parametrize("jobs", fast_slice(["1", "2"], keep=(1,)))  # the fast lane keeps the forked runs
def test_the_enumeration_stops_when_the_budget_runs_out_and_says_so(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The enumeration looks at the command's budget as it goes (in one pass and in a split
    level's forked runs): a time budget that runs out part way through ends `conform` with
    exit 3 and a line saying the depth compared in full, never a pass (depth 5 at 2 shards
    takes about a minute: it used to run to the end, then say the budget had run out)."""
    code = main(
        ["conform", "--impl", target("fleet_health_clean"), "--variant", "fixed", "--no-counterexamples"]
        + ["--depth", "5", "--jobs", jobs, "--time-budget", "2", "--no-cache"]
    )
    out, err = capsys.readouterr()
    assert code == 3, out + err
    assert "the time budget (2 s) ran out during the enumeration" in err, err
    assert re.search(r"enumeration .* depth \d: .*; stopped at depth \d", out), out
    assert "no divergence" not in out


def _ending_implementation(folder: Path, once: bool, ending: str = "__import__('os')._exit(7)") -> str:
    """The clean implementation, in a new `folder`, but a success that ends shard 1's streak
    of two ends its process (`os._exit(7)`, or the statement `ending`); with `once`, only the
    first time (a marker file in `folder` says it happened)."""
    folder.mkdir()
    source = (IMPL / "fleet_health_clean.py").read_text()
    marker = folder / "ended"
    condition = "i == 1 and self._shard(i).consecutive_reported_failures == 2"
    if once:
        condition += f" and not __import__('os').path.exists({str(marker)!r})"
    ending = source.replace(
        "        self._shard(i).consecutive_reported_failures = 0\n",
        f"        if {condition}:\n"
        f"            open({str(marker)!r}, 'w').close()\n"
        f"            {ending}\n"
        "        self._shard(i).consecutive_reported_failures = 0\n",
    )
    assert ending != source
    module = folder / "fleet_health_ending.py"
    module.write_text(ending)
    return f"{module}:GenerationFleetHealth"


def test_an_implementation_that_ends_a_forked_runs_process_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked run whose process the implementation ends is run once more in a fork that
    names each call sequence first: if it ends again, `ProcessDied` (exit 3, a message, no
    traceback) names the calls; if it lives this time, its result is the one pass's."""
    from ledgercheck.model.conformance import enumeration
    from ledgercheck.model.errors import EXIT_UNKNOWN, ProcessDied

    monkeypatch.setattr(enumeration, "SPLIT_FROM", 1)
    spec = load_spec().variant("fixed")

    def enumerate_(where: str, parts: int) -> conform.Enumeration:
        checker = conform.Conformance(spec, conform.load_target(where, spec), spec.resolve_policy({}))
        return checker.enumerate(2, 3, parts=parts)

    always = _ending_implementation(tmp_path / "always", once=False)
    with pytest.raises(ProcessDied) as died:
        enumerate_(always, 16)
    assert died.value.exit_code == EXIT_UNKNOWN
    message = str(died.value)
    assert "exited with code 7 while the implementation ran the calls report_failure(1" in message, message
    assert message.split(" (the enumeration")[0].endswith("report_success(1)"), message
    assert "2 shards, depth 3" in message

    once = _ending_implementation(tmp_path / "once", once=True)
    lived = enumerate_(once, 16)
    assert (tmp_path / "once" / "ended").exists()  # its first run did end
    clean = enumerate_(target("fleet_health_clean"), 1)
    assert (lived.divergence, lived.sequences, lived.states) == (None, clean.sequences, clean.states)


def test_a_split_run_whose_divergence_does_not_pickle_is_expanded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked run sends its result back by pickle; one whose divergence holds a value of a
    class local to a method (here a streak shard 1 keeps after a success ends it) is expanded again by
    the merging process, with the one pass's result."""
    source = (IMPL / "fleet_health_clean.py").read_text()
    broken = source.replace(
        "        self._shard(i).consecutive_reported_failures = 0\n",
        "        had = self._shard(i).consecutive_reported_failures\n"
        "        self._shard(i).consecutive_reported_failures = 0\n        if i == 1 and had:\n"
        "            class Count(int):  # local to the method: pickle cannot name it\n                pass\n\n"
        "            self._shard(i).consecutive_reported_failures = Count(5)\n",
    )
    assert broken != source
    module = tmp_path / "fleet_health_unpicklable_streak.py"
    module.write_text(broken)
    results = _split_enumerations(f"{module}:GenerationFleetHealth", 2, monkeypatch)
    one = results[0][1].divergence
    assert one is not None and one.script.calls[-1].shard == 1, one
    _same_as_one_pass(results)
    prefix = one.script.calls[:-1]
    before = [p for p in results[0][4][: results[0][4].index(prefix)] if len(p) == len(prefix)]
    # The merging process expanded the diverging node each time, and at least once where a run
    # before it was forked: the node's run was expanded again, its own process unable to say how.
    assert all(prefix in expanded for *_, expanded in results[1:])
    assert any(p not in expanded for *_, expanded in results[1:] for p in before)


QUICK = ["--variant", "fixed", "--depth", "3", "--random", "0", "--no-counterexamples"]
"""A short conform: the enumeration to depth 3 alone (where each of these implementations ends,
loops or raises: after report_failure(1) twice), none of the phases after it."""
QUICK += ["--no-runs", "--no-branches", "--no-probes", "--no-policies"]


def _conform_process(impl: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`ledgercheck conform` in a process of its own: the implementation may end it (in this
    one, a regression would end the test run, with its exit code)."""
    command = [sys.executable, "-m", "ledgercheck.model.cli", "conform", "--impl", impl, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("code", [0, 7])
def test_an_implementation_that_ends_the_command_s_process_is_named_never_its_exit_code(
    tmp_path: Path, code: int
) -> None:
    """With one job nothing was forked: an implementation calling `os._exit(0)` ended the
    command with exit 0 and no verdict, a pass. The comparison now runs in a process of its
    own; its death is exit 3, naming the calls (found by a second, watched run)."""
    always = _ending_implementation(tmp_path / "always", once=False, ending=f"__import__('os')._exit({code})")
    run = _conform_process(always, "--jobs", "1", *QUICK)
    assert run.returncode == 3, run.stdout + run.stderr
    err = run.stderr
    assert f"ledgercheck: the process running conform's comparison exited with code {code} while the " in err
    assert "implementation ran the calls report_failure(1), report_failure(1), report_success(1) (the enumeration " in (
        err
    )
    assert "no divergence and no conformance established" in err


def test_an_implementation_that_ends_the_process_once_only_is_still_undecided(tmp_path: Path) -> None:
    """A death the watched run does not repeat (a flaky crash, the system out of memory) is
    still no verdict: exit 3, saying the second run lived."""
    once = _ending_implementation(tmp_path / "once", once=True, ending="__import__('os')._exit(0)")
    run = _conform_process(once, "--jobs", "1", *QUICK)
    assert run.returncode == 3, run.stdout + run.stderr
    err = run.stderr
    assert "exited with code 0; a second run, told every call to name the one it ended on, did not end" in err


def test_an_implementation_calling_sys_exit_diverges_on_that_call(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`sys.exit(0)` in a method raised SystemExit through the command: exit 0, a pass. It is
    compared like any exception the implementation raises: a divergence on that call."""
    exiting = _ending_implementation(tmp_path / "exiting", once=False, ending="__import__('sys').exit(0)")
    assert main(["conform", "--impl", exiting, "--jobs", "1", *QUICK]) == 1
    out = capfd.readouterr().out
    assert "at call 3 of 3, report_success(1):" in out
    assert "exception raised: model None, implementation SystemExit: 0" in out


@pytest.mark.parametrize("jobs", fast_slice(["1", "2"]))  # each waits out the budget and its grace: 7 s
def test_an_implementation_call_that_never_returns_ends_in_the_budget_naming_the_calls(
    tmp_path: Path, jobs: str
) -> None:
    """A method that loops forever kept `conform` running past its budget, in silence, for
    ever (the budget is looked at between calls). Past the deadline and its grace period the
    comparison's processes are told to stop, and the one the implementation loops in (with
    two jobs, a forked run of the enumeration) names the calls it did not return from."""
    looping = _ending_implementation(tmp_path / "looping", once=False, ending="while True: pass")
    run = _conform_process(looping, "--jobs", jobs, "--time-budget", "2", *QUICK, timeout=120)
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stderr.endswith(
        "ledgercheck: the time budget (2 s) ran out: the implementation did not return from the calls "
        "report_failure(1), report_failure(1), report_success(1) (the last call, or the reading of its state "
        "after it); no conformance established\n"
    ), run.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sys_exit_while_the_state_is_read_is_named_never_the_exit_it_asks_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: str
) -> None:
    """`state_of` raising SystemExit(0) (outside a compared call) ended the command with exit
    0. It is exit 3, naming the calls after which the state was read, in the comparison's own
    process and in a forked run of the enumeration alike."""
    source = (IMPL / "fleet_health_clean.py").read_text()
    reading = "    def state_of(self, i: int) -> ShardState:\n"
    module = tmp_path / "fleet_health_exiting_reader.py"
    module.write_text(
        source.replace(
            reading,
            reading + "        if i == 1 and self._shard(i).consecutive_reported_failures == 2:\n"
            "            raise SystemExit(0)\n",
        )
    )
    assert main(["conform", "--impl", f"{module}:GenerationFleetHealth", "--jobs", jobs, *QUICK]) == 3
    assert capsys.readouterr().err == (
        "ledgercheck: the implementation raised SystemExit(0) while its state was read after the calls "
        "report_failure(1), report_failure(1), outside the calls conform compares; no conformance established\n"
    )


@pytest.mark.slow  # waits out the budget and its grace (7 s)
def test_a_second_run_to_name_a_death_is_bound_by_the_budget_too(tmp_path: Path) -> None:
    """The implementation ends the process the first time and loops for ever the second: the
    watched second run (which names the calls of a death) waited without limit. It is bound
    by the budget too, and says what stopped it: exit 3."""
    marker = tmp_path / "ended"
    ending = (
        f"__import__('os')._exit(0) if not __import__('os').path.exists({str(marker)!r}) "
        f"and open({str(marker)!r}, 'w').close() is None else any(False for _ in iter(int, 1))"
    )
    flaky = _ending_implementation(tmp_path / "flaky", once=False, ending=ending)
    run = _conform_process(flaky, "--jobs", "1", "--time-budget", "2", *QUICK, timeout=120)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "exited with code 0; a second run, to name the calls, ended otherwise (the time budget (2 s) ran out" in (
        run.stderr
    ), run.stderr
