"""The committed generated tests (`generated_tests/`) against our clean-room implementations.

Each run is a fresh `python -m pytest generated_tests --ledger-impl TARGET` in a subprocess,
the way a user points the tests at their own ledger (README, "Pointing the generated tests
at your implementation"). The tests take their expectations from the variant where every
property holds (`refit_keeps_streak`). The clean implementation is `fixed`: it passes every
generated test except those of the properties `fixed` itself violates; the implementation as
written at the PR head fails every one (it violates every property tests are generated for),
each saying its property's message. A target that cannot be loaded fails the tests with a message naming it.
These runs take the counterexample modules only; the coverage tests (`test_branches_of_*.py`)
are run against the reference implementation and its mutants by tests/test_coverage_tests.py.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_GENERATED
from tiers import fast_slice

from ledgercheck.codegen.coverage import MODULE_PREFIX
from ledgercheck.model.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
IMPL_DIR = ROOT / "tests" / "impl"
GENERATED = LEDGER_GENERATED
# How pytest names a generated module in its "FAILED ..." lines (run from ROOT).
GENERATED_REL = re.escape(GENERATED.relative_to(ROOT).as_posix())

CLEAN_PATH = "tests/impl/fleet_health_clean.py:GenerationFleetHealth"
AS_WRITTEN_PATH = "tests/impl/fleet_health_as_written.py:GenerationFleetHealth"
CLEAN_MODULE = "fleet_health_clean:GenerationFleetHealth"
AS_WRITTEN_MODULE = "fleet_health_as_written:GenerationFleetHealth"


def count_tests(path: Path) -> int:
    return len(re.findall(r"^def test_", path.read_text(), flags=re.MULTILINE))


def property_modules() -> list[Path]:
    """The generated modules of counterexample tests (not the coverage tests of the
    reference variant's branches, `test_branches_of_*.py`: tests/test_coverage_tests.py)."""
    return [p for p in sorted(GENERATED.glob("test_*.py")) if not p.name.startswith(MODULE_PREFIX)]


def generated_modules() -> dict[str, int]:
    """Property name -> number of generated tests, for every counterexample module."""
    modules = {}
    for path in property_modules():
        modules[path.stem.removeprefix("test_")] = count_tests(path)
    return modules


def total_generated() -> int:
    return sum(generated_modules().values())


@functools.cache
def run_generated(target: str, on_path: bool = False) -> tuple[int, str]:
    """Exit code and combined output of the generated tests run against `target`."""
    env = dict(os.environ)
    if on_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(IMPL_DIR), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *(str(p) for p in property_modules()),
            "-q",
            "-rf",
            "-p",
            "no:cacheprovider",
            "--ledger-impl",
            target,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


def summary(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("3 failed, 2 passed in 0.2s")."""
    lines = [line for line in output.splitlines() if re.search(r"\bin [\d.]+s\b", line)]
    assert lines, f"no pytest summary line in:\n{output}"
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", lines[-1])}


def test_there_are_generated_tests() -> None:
    modules = generated_modules()
    assert modules, "generated_tests/ holds no test modules"
    assert all(n > 0 for n in modules.values()), modules
    fixed = load_spec().variant("fixed")
    for name in modules:
        assert name in fixed.properties, f"generated module for unknown property {name!r}"


# The fast lane runs the clean implementation imported by module name, the as-written one by
# path, and one bad target; the full suite every combination.
@pytest.mark.parametrize(
    ("target", "on_path"),
    fast_slice([pytest.param(CLEAN_PATH, False, id="path"), pytest.param(CLEAN_MODULE, True, id="module")], keep=[1]),
)
def test_clean_implementation_passes_every_generated_test_of_what_fixed_holds(target: str, on_path: bool) -> None:
    """The clean implementation is `fixed`: it passes the tests of every property `fixed`
    is expected to hold, and fails exactly the tests of the ones it is expected to violate
    (whose expectations come from a later fix, `refit_keeps_streak`), each with its message."""
    code, output = run_generated(target, on_path)
    fixed = load_spec().variant("fixed")
    modules = generated_modules()
    broken = {name: n for name, n in modules.items() if fixed.properties[name].expect.get("fixed") == "violated"}
    assert broken, "no generated test tells fixed apart from a later fix"
    assert code == 1, output
    expected = {"passed": total_generated() - sum(broken.values()), "failed": sum(broken.values())}
    assert summary(output) == expected, output
    for name, count in broken.items():
        failed = re.findall(rf"^FAILED {GENERATED_REL}/test_{name}\.py::", output, flags=re.MULTILINE)
        assert len(failed) == count, f"{name}: {len(failed)} of {count} tests failed"
        message = fixed.properties[name].message  # broken (`name: message`), or its trace left (`name (message)`)
        assert output.count(f"{name}: {message}") + output.count(f"{name} ({message})") >= count, output


@pytest.mark.parametrize(
    ("target", "on_path"),
    fast_slice([pytest.param(AS_WRITTEN_PATH, False, id="path"), pytest.param(AS_WRITTEN_MODULE, True, id="module")]),
)
def test_as_written_implementation_fails_every_generated_test(target: str, on_path: bool) -> None:
    code, output = run_generated(target, on_path)
    as_written = load_spec().variant("as_written")
    modules = generated_modules()
    not_violated = [name for name in modules if as_written.properties[name].expect.get("as_written") != "violated"]
    assert not not_violated, f"tests generated for properties as_written is not expected to violate: {not_violated}"
    assert code == 1, output
    assert summary(output) == {"failed": total_generated()}, output
    fixed = load_spec().variant("fixed")
    for name, count in modules.items():
        message = fixed.properties[name].message
        assert message in output, f"{name}: its message {message!r} is not in the output"
        # Every one of the module's tests fails with its property's own message: broken, or its
        # trace left on the way (`... does not do what fixed does, on the trace of name (message)`).
        said = output.count(f"{name}: {message}") + output.count(f"{name} ({message})")
        assert said >= count, f"{name}: fewer than {count} failures say {message!r}"
        failed = re.findall(rf"^FAILED {GENERATED_REL}/test_{name}\.py::", output, flags=re.MULTILINE)
        assert len(failed) == count, f"{name}: {len(failed)} of {count} tests failed"


BAD_TARGETS = [
    ("nope.py:X", "nope.py"),
    ("no_such_module:X", "no_such_module"),
    ("tests/impl/fleet_health_clean.py:NoSuchClass", "NoSuchClass"),
]
BAD_TARGET_CASES = [pytest.param(target, named, id=target) for target, named in BAD_TARGETS]


@pytest.mark.parametrize(("target", "named"), fast_slice(BAD_TARGET_CASES, keep=[2]))
def test_bad_target_fails_with_a_clear_message(target: str, named: str) -> None:
    code, output = run_generated(target)
    assert code == 1, output
    assert summary(output) == {"failed": total_generated()}, output
    # Every test says why, naming what could not be loaded.
    lines = [line for line in output.splitlines() if line.startswith("ledgercheck: ") and named in line]
    assert len(lines) >= total_generated(), output
    # ... and does not show the plugin's traceback.
    for debris in ("Traceback", "plugin.py", "runtime.py", "codegen/", "raise ", "def make("):
        assert debris not in output, f"{debris!r} in the output of a bad target:\n{output}"


@pytest.mark.parametrize(("target", "named"), fast_slice(BAD_TARGET_CASES, keep=[2]))
def test_bad_target_message_has_no_exception_chain(target: str, named: str) -> None:
    _, output = run_generated(target)
    assert "During handling of the above exception" not in output
    assert "The above exception was the direct cause" not in output


@pytest.mark.parametrize("ending", ["__import__('os')._exit(0)", "__import__('os').kill(__import__('os').getpid(), 9)"])
def test_an_implementation_that_ends_pytest_s_process_is_no_pass(tmp_path: Path, ending: str) -> None:
    """`report_failure` ends the process: pytest ended with exit 0 (or was killed) and no
    summary, `os._exit(0)` reading as a pass. The plugin now runs such a run in a child it
    watches: exit 3, naming the test the process ended in."""
    module = tmp_path / "ending_ledger.py"
    reference = str(IMPL_DIR / "fleet_health_refit_keeps_streak.py")
    module.write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('reference', {reference!r})\n"
        "reference = importlib.util.module_from_spec(spec)\nsys.modules['reference'] = reference\n"
        "spec.loader.exec_module(reference)\n\n\n"
        "class Ending(reference.GenerationFleetHealth):\n"
        f"    def report_failure(self, *args, **kwargs):\n        {ending}\n",
        encoding="utf-8",
    )
    code, output = run_generated(f"{module}:Ending")
    assert code == 3, output
    found = re.search(
        r"ledgercheck: pytest's process ended \((exit code 0|signal SIGKILL)\) before its run did, "
        r"in the test (\S+): the implementation under test ended it",
        output,
    )
    assert found, output
    assert found.group(2).split("::")[0].endswith(".py"), output


def test_a_run_against_an_implementation_passes_through_the_watch_with_its_own_code() -> None:
    """The watching parent adds nothing to a run that ends: the same summary and exit code."""
    code, output = run_generated("tests/impl/fleet_health_refit_keeps_streak.py:GenerationFleetHealth")
    assert code == 0 and "pytest's process ended" not in output, output
    assert summary(output) == {"passed": total_generated()}
