"""The conformance package's parts through its public API: the one normaliser, the one loader
and the one builder (which the generated tests, `--ledger-conform` and `ledgercheck conform`
share), the model's public state API conformance drives it through, and the pytest plugin's
promise to import nothing heavy when none of its options or fixtures is used."""

from __future__ import annotations

import enum
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledgercheck.model.conformance import (
    Implementation,
    ImplementationError,
    Normaliser,
    Observer,
    fixed_clock,
    load_implementation,
    load_target,
    model_implementation,
    normalise,
)
from ledgercheck.model.interpreter import LedgerModel
from ledgercheck.model.spec import Spec, load_spec
from ledgercheck.model.trace import base_url

ROOT = Path(__file__).resolve().parent.parent
CLEAN = ROOT / "tests" / "impl" / "fleet_health_clean.py"


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec().variant("fixed")


# --- the normaliser -------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "r"


def test_normaliser_names_states_and_enum_members(spec: Spec) -> None:
    state_enum = spec.enums[spec.state_enum]
    member = state_enum.members[0]
    api_value = state_enum.api_values[member]
    assert api_value != member  # the bundled spec's states have lower-case API values
    norm = Normaliser(spec)
    assert norm(api_value) == member
    assert norm(member) == member
    assert norm(Colour.RED) == "RED"
    assert norm("not a state") == "not a state"
    assert norm(3) == 3 and norm(None) is None and norm(True) is True
    assert normalise(api_value, spec) == member


def test_an_implementations_states_read_as_the_models(spec: Spec) -> None:
    """The clean implementation's `str` enum and the model's state enum normalise alike."""
    impl = load_implementation(f"{CLEAN}:GenerationFleetHealth", spec)
    policy = spec.resolve_policy({})
    observer = Observer(spec, ())
    ledger = impl.build(2, policy, quiet=True)
    model = model_implementation(spec).build(2, policy, echo=False)
    assert observer.observe(ledger, 2) == observer.observe(model, 2)
    assert observer.observe(model, 2)[("state_of", 0)] in spec.enums[spec.state_enum].members


# --- the loader -----------------------------------------------------------------------------


def test_loader_takes_the_class_and_the_spec_policy_class_from_a_file(spec: Spec) -> None:
    impl = load_implementation(f"{CLEAN}:GenerationFleetHealth", spec)
    assert impl.ledger_class.__name__ == "GenerationFleetHealth"
    assert impl.policy_class is not None and impl.policy_class.__name__ == spec.api_policy_class
    again = load_implementation(f"{CLEAN}:GenerationFleetHealth", spec)
    assert again.ledger_class is impl.ledger_class  # a file is loaded once


def test_loader_without_a_policy_class_uses_the_models(tmp_path: Path, spec: Spec) -> None:
    module = tmp_path / "bare_ledger.py"
    module.write_text("class Ledger:\n    def __init__(self, **kwargs):\n        self.kwargs = kwargs\n")
    impl = load_implementation(f"{module}:Ledger", spec)
    assert impl.policy_class is None
    assert impl.policy_class_name == spec.api_policy_class
    built = impl.build(1, spec.resolve_policy({}))
    assert type(built.kwargs["policy"]) is impl.model_policy_class


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no-colon-here", "--ledger-impl wants module:Class"),
        ("no_such_ledger_module_xyz:Ledger", "cannot import 'no_such_ledger_module_xyz'"),
        ("does/not/exist.py:Ledger", "no such file"),
        (f"{CLEAN}:NoSuchClass", "has no class 'NoSuchClass'"),
    ],
)
def test_loader_says_what_is_wrong(spec: Spec, target: str, message: str) -> None:
    with pytest.raises(ImplementationError, match=message.replace("(", r"\(")):
        load_implementation(target, spec)


def test_conform_front_door_names_the_target_and_its_option(spec: Spec) -> None:
    with pytest.raises(ImplementationError, match="--impl wants module:Class"):
        load_target("no-colon-here", spec)
    with pytest.raises(ImplementationError, match="cannot load the implementation no_such_mod_q:L: cannot import"):
        load_target("no_such_mod_q:L", spec)
    assert ImplementationError("x").exit_code == 2


def test_a_module_that_fails_to_import_is_reported(tmp_path: Path, spec: Spec) -> None:
    broken = tmp_path / "broken_ledger_unit.py"
    broken.write_text("raise RuntimeError('broken on purpose')\n")
    with pytest.raises(ImplementationError, match="RuntimeError: broken on purpose"):
        load_implementation(f"{broken}:Ledger", spec)


# --- the builder ----------------------------------------------------------------------------


def test_builder_passes_the_api_arguments_and_a_clock_when_taken(tmp_path: Path, spec: Spec) -> None:
    module = tmp_path / "clocked_ledger.py"
    module.write_text(
        "class Ledger:\n"
        "    def __init__(self, *, shard_count, policy, base_urls, clock=None):\n"
        "        print('built')\n"
        "        self.args = (shard_count, policy, base_urls, clock)\n"
    )
    impl = load_implementation(f"{module}:Ledger", spec)
    assert impl.accepts_clock
    built = impl.build(3, spec.resolve_policy({}), clock=fixed_clock, quiet=True)
    shards, _, urls, clock = built.args
    assert shards == 3 and len(urls) == 3 and len(set(urls)) == 3
    assert clock is fixed_clock and clock() == 0.0
    assert impl.build(1, spec.resolve_policy({})).args[3] is None


def test_builder_quiet_swallows_what_the_constructor_prints(
    tmp_path: Path, spec: Spec, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "noisy_ledger.py"
    module.write_text("class Ledger:\n    def __init__(self, **kwargs):\n        print('constructed')\n")
    impl = load_implementation(f"{module}:Ledger", spec)
    impl.build(1, spec.resolve_policy({}), quiet=True)
    assert capsys.readouterr().out == ""
    impl.build(1, spec.resolve_policy({}))
    assert capsys.readouterr().out == "constructed\n"


def test_builder_error_names_the_api_it_tried(spec: Spec) -> None:
    impl = Implementation("demo:Ledger", dict, None, model_implementation(spec).model_policy_class)
    error = impl.cannot_build(TypeError("unexpected keyword"), clock=True)
    assert str(error) == (
        "demo:Ledger cannot be constructed with the ledger's API (shard_count=, policy=, base_urls=, clock=): "
        "TypeError: unexpected keyword"
    )


def test_the_model_is_built_like_any_implementation(spec: Spec) -> None:
    model = model_implementation(spec).build(2, spec.resolve_policy({}), echo=False)
    assert isinstance(model, LedgerModel) and model.shard_count == 2
    assert [r.base_url for r in model.snapshot()] == [base_url(0), base_url(1)]


# --- the model's public state API ------------------------------------------------------------


def test_model_state_can_be_read_saved_and_restored(spec: Spec) -> None:
    model = model_implementation(spec).build(2, spec.resolve_policy({}), echo=False)
    state_field = spec.state_field
    saved = model.save()
    first = model.value(0, state_field)
    model.report_failure(0, error=RuntimeError("x"))
    assert model.value(0, "consecutive_reported_failures") == 1
    assert model.variables()[(0, "consecutive_reported_failures")] == 1
    with pytest.raises(TypeError):
        model.variables()[(0, state_field)] = first  # type: ignore[index]
    model.restore(saved)
    assert model.value(0, "consecutive_reported_failures") == 0 and model.value(0, state_field) == first
    model.assign([((1, "consecutive_reported_failures"), 2)])
    assert model.snapshot()[1].consecutive_reported_failures == 2
    with pytest.raises(KeyError):
        model.assign([((7, "no_such_variable"), 0)])
    assert saved[(0, "consecutive_reported_failures")] == 0  # save() is a copy


# --- the pytest plugin imports nothing heavy until it is used ----------------------------------


def test_plugin_loads_without_importing_the_model_or_z3(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\n"
        "def test_plain():\n"
        "    assert 'ledgercheck.codegen.plugin' in sys.modules  # the plugin is loaded ...\n"
        "    heavy = sorted(m for m in sys.modules if m.startswith(('ledgercheck.model', 'z3')))\n"
        "    assert heavy == []  # ... and imported neither the model nor z3\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout


def test_the_command_line_shows_conforms_defaults_without_loading_the_package():
    """Every command builds the whole parser, `conform`'s included: its defaults come from
    `conformance.defaults`, so the rest of the package (and Z3) stays unloaded until used."""
    probe = (
        "import sys\n"
        "from ledgercheck.model import cli\n"
        "cli.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('ledgercheck.model.conformance') or m == 'z3')\n"
        "print(','.join(loaded))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "ledgercheck.model.conformance,ledgercheck.model.conformance.defaults"


def test_every_name_the_package_exports_is_its_modules_own():
    """The names re-exported lazily are the very objects of the modules that define them."""
    import importlib

    from ledgercheck.model import conformance

    for name in conformance.__all__:
        home = importlib.import_module(f"ledgercheck.model.conformance.{conformance._MODULE_OF[name]}")
        assert getattr(conformance, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        conformance.nothing_here  # noqa: B018


def test_random_calls_pass_enum_arguments_members() -> None:
    """A random call passed an enum argument its default (here CLOSED; None where it has
    none), so no random trace took a branch on another member; it passes every member."""
    from ledgercheck.model.conformance.sources import random_scripts
    from ledgercheck.model.spec import load_spec_text

    text = (Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml").read_text()
    text = text.replace('call = "record_success(i)"', "call = 'record_success(i, mode: Mode = \"CLOSED\")'")
    spec = load_spec_text(text, "timed_breaker.toml").variant()
    scripts = random_scripts(spec, 1, spec.default_policy(), 200, 0)
    modes = {dict(c.args).get("mode") for s in scripts for c in s.calls if c.event == "record_success"}
    assert modes == {"CLOSED", "OPEN", "HALF_OPEN"}, modes
