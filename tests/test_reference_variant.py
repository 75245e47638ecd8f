"""`[spec] reference_variant`: the variant the implementation is meant to be.

A spec of a third-party breaker had the library's behaviour as one variant and the behaviour
its owner wanted as another, with a property the library is known to violate. conform compared
the class with the first variant (none held every property) and found no divergence, while the
generated tests against the class expected the other variant and failed: ci could never pass
on the real, conforming class (new-user trial). With the variant declared, conform compares
with it, the tests of what it is expected to violate are strict xfails against the class, and
ci passes on it; a class that does what the other variant does fails ci."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from caches import own_caches

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text, reference_variant

pytestmark = pytest.mark.slow

SPEC = """\
[spec]
name = "meter"
api_class = "Meter"
state_field = "state"
default_shards = 1
REFERENCE

[enums.State]
members = ["CLOSED", "OPEN"]

[policy]
trip_after = { default = 2, min = 1, max = 3 }

[fields]
state = { type = "State", initial = "CLOSED" }
failures = { type = "int", initial = 0 }

[events.fail]
call = "fail(i)"
body = \"\"\"
failures = failures + 1
if failures >= trip_after:
    state = OPEN
\"\"\"

[events.excluded]
call = "excluded(i)"
body = "failures = 0"

[events.reset]
call = "reset(i)"
body = \"\"\"
failures = 0
state = CLOSED
\"\"\"

[environments.ledger]
any_call = true

[variants.library]
doc = "what the library does: an excluded error counts as a success"

[variants.wanted]
doc = "an excluded error leaves the count alone"
[[variants.wanted.patch]]
event = "excluded"
replace = "failures = 0"
insert = "pass"

[properties.excluded_errors_keep_the_count]
kind = "step"
on = ["excluded"]
assert = "after.failures == before.failures"
expect = { library = "violated", wanted = "holds" }

[properties.excluded_errors_reset_the_count]
kind = "step"
on = ["excluded"]
assert = "after.failures == 0"
expect = { library = "holds", wanted = "violated" }

[properties.never_opens]
kind = "invariant"
assert = "state == CLOSED"
expect = { default = "violated" }

[implementation]
target = "meter.py:Meter"
instances = "indexed"
construct = { trip_after = "trip_after" }

[implementation.fields]
state = "state"
failures = "failures"
"""

CLASS = """\
class Meter:
    def __init__(self, trip_after):
        self.trip_after = trip_after
        self.state = "CLOSED"
        self.failures = 0

    def fail(self, i):
        self.failures += 1
        if self.failures >= self.trip_after:
            self.state = "OPEN"

    def excluded(self, i):
        EXCLUDED

    def reset(self, i):
        self.failures = 0
        self.state = "CLOSED"
"""

LIBRARY = "self.failures = 0"
WANTED = "pass"


def _project(tmp_path: Path, reference: str, excluded: str) -> Path:
    (tmp_path / "spec").mkdir()
    spec = tmp_path / "spec" / "meter.toml"
    spec.write_text(SPEC.replace("REFERENCE", reference))
    (tmp_path / "spec" / "meter.py").write_text(CLASS.replace("EXCLUDED", excluded))
    gen = _run(tmp_path, "gen", str(spec))
    assert gen.returncode == 0, gen.stdout + gen.stderr
    return spec


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = own_caches(tmp_path / "cache", {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")})
    return subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_a_property_no_variant_holds_does_not_choose_the_reference() -> None:
    """A known limitation every variant shares (never_opens) tells no variant apart: the
    reference is the first variant every other property holds in. A trial that documented
    one in the ledger saw `gen` and `conform` move to the first variant, the one with the bug,
    and ci fail the correct class."""
    from ledgercheck.model.spec import known_limitations, reference_reason

    text = SPEC.replace("REFERENCE", "")
    both = load_spec_text(text, "meter.toml")
    assert reference_variant(both) == "library" and known_limitations(both) == ("never_opens",)
    assert reference_reason(both).startswith("the first variant: none holds every property")
    start = text.index("[properties.excluded_errors_reset_the_count]")
    one = load_spec_text(text[:start] + text[text.index("[properties.never_opens]") :], "meter.toml")
    assert reference_variant(one) == "wanted"
    assert reference_reason(one) == "the first variant every property holds in but never_opens, which no variant holds"


def test_the_declared_variant_is_the_reference_and_a_wrong_name_is_refused() -> None:
    declared = load_spec_text(SPEC.replace("REFERENCE", 'reference_variant = "library"'), "meter.toml")
    assert reference_variant(declared) == "library"
    with pytest.raises(SpecError) as caught:
        load_spec_text(SPEC.replace("REFERENCE", 'reference_variant = "librari"'), "meter.toml")
    assert "meter.toml:6" in str(caught.value)
    assert "reference_variant 'librari' is not a variant of the spec (did you mean 'library'?)" in str(caught.value)


def test_undeclared_the_class_of_the_known_violation_still_fails_its_tests(tmp_path: Path) -> None:
    """No declaration: the tests of the fix keep failing on the class that has the bug (the
    ledger's PR head), whatever conform compares it with; ci says which variant that was."""
    spec = _project(tmp_path, "", LIBRARY)
    run = _run(tmp_path, "ci", str(spec))
    assert run.returncode == 1, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert "tests vs implementation" in head, run.stdout
    # where the failing tests are those of what the variant conform found it to be violates: a hint
    assert "ledgercheck ci meter.toml: FAILED, 1 problem(s):" in head, head
    assert (
        "NOTE      these tests expect what another variant does of excluded_errors_keep_the_count; "
        "conformance found the class to be 'library'" in head
    ), head
    assert "if the class is meant to be 'library' (a library with a known flaw), [spec] reference_variant = " in head
    assert "if it is not, the class has the bug the other variant fixes" in head, head
    conform = _run(tmp_path, "conform", str(spec))
    assert "against the model of 'library' (the first variant: none holds every property; [spec] reference_variant" in (
        conform.stdout
    ), conform.stdout


def test_declared_the_class_of_its_variant_passes_ci(tmp_path: Path) -> None:
    spec = _project(tmp_path, 'reference_variant = "library"', LIBRARY)
    run = _run(tmp_path, "ci", str(spec))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "xfailed" in run.stdout, run.stdout  # the tests of the known violation, documented
    # a green run says which violations it accepted (not never_opens: no variant holds it)
    assert (
        "accepted: the implementation is declared to be 'library' ([spec] reference_variant), which the spec "
        "expects to violate excluded_errors_keep_the_count: their tests pass against it when it does (xfailed)"
    ) in run.stdout, run.stdout


def test_declared_a_class_that_does_the_other_variant_fails_ci(tmp_path: Path) -> None:
    spec = _project(tmp_path, 'reference_variant = "library"', WANTED)
    run = _run(tmp_path, "ci", str(spec))
    assert run.returncode == 1, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert "diverges from the model of 'library' at call 2 of 2, excluded(0)" in head, head
    assert "[XPASS(strict)] the implementation is meant to be library ([spec] reference_variant)" in head, head


def test_a_test_failing_on_the_way_names_its_trace_not_a_break(tmp_path: Path) -> None:
    """A class that counts a failure twice fails the counterexample test of another property
    at its first step. The failure led with that property's message, as if it had broken (a
    queue's test of stale receipts failed so for a visibility bug: message-queue trial); it now
    says the class left the property's trace, on the first line that ci and pytest quote."""
    spec = _project(tmp_path, "", WANTED)
    (tmp_path / "spec" / "meter.py").write_text(
        CLASS.replace("EXCLUDED", WANTED).replace("self.failures += 1", "self.failures += 2")
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "generated_tests/test_excluded_errors_keep_the_count.py",
            "--ledger-impl",
            f"{spec.parent / 'meter.py'}:Meter",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST")},
        timeout=300,
    )
    assert run.returncode == 1, run.stdout
    assert "the implementation does not do what wanted does, on the trace of excluded_errors_keep_the_count (" in (
        run.stdout
    ), run.stdout
    assert "excluded_errors_keep_the_count: " not in run.stdout, run.stdout
