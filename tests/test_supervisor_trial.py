"""What a supervisor trial met. The supervisor kept its restart intensity in
`[on_state_change]`: a restart opens a window when the last one has closed, counts in an open
one, or escalates. The coverage search knew only the events' own branches, so no trace ever
waited for a window to close, the long runs repeated nothing that did, and a class that gave a
child up after its fifth restart in all (a leftover hard limit) passed `ci`. Each arm of each
`if` of the hook is a branch now: searched, repeated by the long runs, and a coverage test of
its own; and `mutate` mutates the hook, which it left alone. A binding that leaves the state
unread (`observe = false`, a class that shows it through queries only) crashed `gen` and made
conform blame the class: the state is compared where it is read, and only there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledgercheck.codegen.coverage import HOOK, branches, search
from ledgercheck.model.cli import main
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "supervisor"
api_class = "Supervisor"
api_policy_class = "SupervisorPolicy"
state_field = "state"
default_shards = 1

[enums.ChildState]
members = ["RUNNING", "RESTARTING"]
api_values = "lower"

[policy]
max_restarts = { default = 2, min = 1, max = 3, doc = "restarts allowed within one window" }
window = { default = 3, min = 1, max = 4, type = "duration", doc = "the intensity window, in seconds" }

[clock]
unit = "s"
steps = [1]
drive = { param = "clock" }

[fields]
state = { type = "ChildState", initial = "RUNNING" }
restarts = { type = "int", initial = 0, doc = "restarts of this child over its life" }

[globals]
window_restarts = { type = "int", initial = 0 }
window_age = { type = "timer", initial = 0 }
escalated = { type = "bool", initial = false }

[on_state_change]
body = \"\"\"
if new == RESTARTING:
    if window_restarts == 0 or window_age >= window:
        window_restarts = 1
        window_age = 0
    elif window_restarts >= max_restarts:
        escalated = True
    else:
        window_restarts = window_restarts + 1
\"\"\"

[events.child_crashed]
call = "child_crashed(i)"
ignore_when = "escalated or state != RUNNING"
body = \"\"\"
over = window_restarts > 0 and window_age < window and window_restarts >= max_restarts
state = RESTARTING
if over:
    state = RUNNING
else:
    restarts = restarts + 1
\"\"\"

[events.restart_done]
call = "restart_done(i)"
ignore_when = "escalated or state != RESTARTING"
body = "state = RUNNING"

[environments.ledger]
any_call = true

[properties.intensity_is_bounded]
kind = "invariant"
scope = "fleet"
assert = "window_restarts <= max_restarts"
message = "more than max_restarts restarts in one window"
expect = { base = "holds" }

[implementation]
target = "supervisor.py:Supervisor"
instances = "indexed"
construct = { n_children = "instances", max_restarts = "max_restarts", window = "window" }

[implementation.fields]
state = "state_of(index)"
restarts = "restarts_of(index)"
"""

CLASS = """\
import enum


class ChildState(enum.Enum):
    RUNNING = "running"
    RESTARTING = "restarting"


class Child:
    def __init__(self):
        self.state = ChildState.RUNNING
        self.restarts = 0


class Supervisor:
    def __init__(self, n_children, max_restarts, window, clock):
        self.max_restarts, self.window, self.clock = max_restarts, window, clock
        self.children = [Child() for _ in range(n_children)]
        self.escalated = False
        self.window_start = None
        self.window_restarts = 0

    def child_crashed(self, i):
        child = self.children[i]
        if self.escalated or child.state is not ChildState.RUNNING:
            return
        now = self.clock()
        if self.window_restarts == 0 or now - self.window_start >= self.window:
            self.window_start, self.window_restarts = now, 1
        elif self.window_restarts >= self.max_restarts:
            self.escalated = True
            return
        else:
            self.window_restarts += 1
        CAPPED
        child.restarts += 1
        child.state = ChildState.RESTARTING

    def restart_done(self, i):
        child = self.children[i]
        if not self.escalated and child.state is ChildState.RESTARTING:
            child.state = ChildState.RUNNING

    def state_of(self, i):
        return self.children[i].state

    def restarts_of(self, i):
        return self.children[i].restarts
"""

HIDDEN_CAP = "if child.restarts >= 4:  # a leftover hard limit: given up after four restarts in all\n            return"


def _project(tmp_path: Path) -> Path:
    """The spec, the class it binds (`supervisor.py`) and the class with the hidden cap
    (`capped.py`)."""
    (tmp_path / "supervisor.toml").write_text(SPEC)
    (tmp_path / "supervisor.py").write_text(CLASS.replace("CAPPED", "pass"))
    (tmp_path / "capped.py").write_text(CLASS.replace("CAPPED", HIDDEN_CAP))
    return tmp_path / "supervisor.toml"


def _generated_tests_pass_on_the_class(out_dir: Path) -> None:
    """The generated tests of `out_dir`, run by pytest on the class beside them."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir)]
    done = subprocess.run(
        [*command, "--impl", "supervisor.py:Supervisor"], capture_output=True, text=True, cwd=out_dir.parent
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_arm_of_each_if_of_the_hook_is_a_branch_at_its_line(tmp_path: Path) -> None:
    spec_file = load_spec_text(SPEC, str(tmp_path / "supervisor.toml"))
    hook = [b for b in branches(spec_file, spec_file.variant()) if b.event == HOOK]
    lines = SPEC.splitlines()
    assert [(b.taken, b.part) for b in hook] == [
        (True, 0),
        (False, 0),
        (True, 1),
        (True, 2),
        (False, 0),
        (True, 0),
        (False, 0),
    ]
    assert all(lines[b.line - 1].lstrip().startswith(("if ", "elif ")) for b in hook), [b.line for b in hook]
    assert hook[3].describe.startswith("`window_age >= window` holds (the parts before it are false)")
    assert hook[3].source("base") == "[on_state_change] body: if window_restarts == 0 or window_age >= window:"
    # an `elif` is named as written (it was `if window_restarts >= max_restarts:`), its test as before
    assert hook[5].describe == (
        "`elif window_restarts >= max_restarts:` holds: its body runs (the conditions above it are false)"
    )
    assert hook[5].slug == "if3_window_restarts_max_restarts_then"


def test_the_search_waits_for_a_window_to_close(tmp_path: Path) -> None:
    """The branch where a closed window opens a new one needs the clock to move on: three
    ticks between two restarts, which no event's own branch asks for."""
    spec_file = load_spec_text(SPEC, str(tmp_path / "supervisor.toml"))
    found = search(spec_file, spec_file.variant())
    closed = next(b for b in found.branches if b.event == HOOK and b.text == "window_age >= window")
    assert [name for name, _ in found.traces[closed]] == [
        "child_crashed",
        "restart_done",
        "tick",
        "tick",
        "tick",
        "child_crashed",
    ]
    assert not found.unreached


def test_a_hidden_lifetime_cap_is_found_by_repeating_the_trace_through_a_closed_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _project(tmp_path)
    assert main(["conform", str(spec), "--jobs", "1"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    capped = f"{tmp_path / 'capped.py'}:Supervisor"
    assert main(["conform", str(spec), "--jobs", "1", "--random", "0", "--impl", capped]) == 1
    out = capsys.readouterr().out
    assert "diverges from the model of 'base'" in out and "child_crashed(0):" in out, out
    assert "found by a long run: the trace to branch" in out, out


@pytest.mark.slow  # gen, and pytest in a process of its own, end to end
def test_gen_writes_a_coverage_module_of_the_hook_that_passes_on_the_class(tmp_path: Path) -> None:

    spec = _project(tmp_path)
    out_dir = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out_dir)]) == 0
    module = out_dir / f"test_branches_of_{HOOK}.py"
    text = module.read_text()
    assert text.count("\ndef test_on_state_change_") == 7
    assert '"""Coverage tests of `[on_state_change]`, which every call that changes a shard\'s state runs' in text
    _generated_tests_pass_on_the_class(out_dir)


def test_mutate_mutates_the_hook_as_an_override_of_its_body(tmp_path: Path) -> None:
    """The hook held the whole restart intensity, and `mutate` changed only the events: nine
    mutants more here, each the hook's body with one change, loadable as a spec."""
    from ledgercheck.model import mutate
    from ledgercheck.model.spec import load_spec

    spec_file = load_spec(_project(tmp_path))
    hooked = [m for m in mutate.spec_mutants(spec_file, "base") if m.event == HOOK]
    assert [m.kind for m in hooked] == [
        "negate a condition",
        "negate a condition",
        "off by one",
        "drop an update",
        "drop a reset",
        "negate a condition",
        "off by one",
        "drop an update",
        "drop an update",
    ]
    for mutant in hooked:
        assert mutant.patch.startswith("\n[variants.base.override.on_state_change]\nbody = ")
        mutated = load_spec_text(SPEC + mutant.patch, str(tmp_path / "supervisor.toml")).variant("base")
        assert mutated.on_state_change != spec_file.variant("base").on_state_change, mutant.ident


@pytest.mark.slow  # gen, and pytest in a process of its own, end to end
def test_a_state_the_binding_leaves_unread_is_compared_through_the_queries_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`state = { observe = false }`: `gen` raised KeyError: 'state', and conform said the class
    raised AttributeError when its state was read. The queries still show the state."""

    spec = _project(tmp_path)
    text = SPEC.replace('state = "state_of(index)"', "state = { observe = false }")
    text += '\n[queries]\nrestarting = { when = "state == RESTARTING", api = "restarting_children" }\n'
    spec.write_text(text)
    for name in ("supervisor.py", "capped.py"):
        path = tmp_path / name
        path.write_text(
            path.read_text()
            + "\n    def restarting_children(self):\n"
            + "        return [i for i, c in enumerate(self.children) if c.state is ChildState.RESTARTING]\n"
        )
    out_dir = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out_dir)]) == 0, capsys.readouterr().out
    module = (out_dir / "test_branches_of_child_crashed.py").read_text()
    assert "state=" not in module and "check.expect(0, restarts=1)" in module
    _generated_tests_pass_on_the_class(out_dir)
    capsys.readouterr()
    assert main(["conform", str(spec), "--jobs", "1", "--random", "0"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    capped = f"{tmp_path / 'capped.py'}:Supervisor"
    assert main(["conform", str(spec), "--jobs", "1", "--random", "0", "--impl", capped]) == 1
    out = capsys.readouterr().out
    assert "restarting_children()" in out and "state_of" not in out, out


def test_an_indexed_class_can_be_given_the_unknown_index_to_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class that took `self.children[i]` unchecked restarted the last child on
    `child_crashed(-1)`, and passed: the binding refuses an unknown index before the class
    sees it. `unknown_index = "refused"` hands it over; the class must raise (any exception)."""
    spec = _project(tmp_path)
    args = ["conform", str(spec), "--jobs", "1", "--random", "0"]
    assert main(args) == 0  # the binding refuses -1 and 1 for the class
    capsys.readouterr()
    spec.write_text(SPEC.replace('instances = "indexed"\n', 'instances = "indexed"\nunknown_index = "refused"\n'))
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "at call 1 of 1, child_crashed(-1):\n  exception raised: model KeyError, implementation None" in out, out
    assert "  supervisor.child_crashed(-1)  # the model raises KeyError here" in out, out
    checked = (
        (tmp_path / "supervisor.py")
        .read_text()
        .replace(
            "        child = self.children[i]\n",
            "        if not 0 <= i < len(self.children):\n"
            "            raise IndexError(i)\n"
            "        child = self.children[i]\n",
        )
    )
    (tmp_path / "checked.py").write_text(checked)
    assert main([*args, "--impl", f"{tmp_path / 'checked.py'}:Supervisor"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('unknown_index = "class"', "unknown_index must be 'binding' or 'refused', not 'class'"),
        ('unknown_index = "refused"\ninstances = "each"', 'unknown_index = "refused" needs instances = "indexed"'),
    ],
)
def test_a_bad_unknown_index_is_refused_at_its_line(tmp_path: Path, line: str, message: str) -> None:
    from ledgercheck.model.errors import SpecError

    text = SPEC.replace('instances = "indexed"\n', "").replace("[implementation]\n", f"[implementation]\n{line}\n")
    with pytest.raises(SpecError, match=re.escape(message)) as raised:
        load_spec_text(text, str(tmp_path / "supervisor.toml")).variant()
    assert "supervisor.toml:" in str(raised.value)


def test_a_fleet_property_s_figure_shows_the_fleet_values_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`window_restarts <= max_restarts` broken, and the figure showed shard 0's fields only:
    the one value the property reads was in the JSON alone."""
    spec = tmp_path / "supervisor.toml"
    spec.write_text(SPEC.replace("elif window_restarts >= max_restarts:", "elif window_restarts > max_restarts:"))
    args = ["check", str(spec), "--property", "intensity_is_bounded", "--max-traces", "1"]
    assert main(args) == 1
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("fleet window_restarts ")]
    assert rows[-1].split("|")[-1].strip() == "[3*]", out  # read at the breaking step, and changed by it
    assert "fleet window_age" not in out and "fleet escalated" not in out  # not read: left out
    assert main([*args, "--all-fields"]) == 1
    out = capsys.readouterr().out
    assert "fleet window_age " in out and "fleet escalated " in out


def test_diff_compares_the_fleet_values_and_names_two_files_of_one_variant_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window that closes one tick late: `diff` compared shard fields only, so it reported
    the first disagreement steps after the fleet values parted, and called both sides
    `base`."""
    left = _project(tmp_path)
    right = tmp_path / "late" / "supervisor.toml"
    right.parent.mkdir()
    right.write_text(SPEC.replace("window_age >= window:", "window_age > window:"))
    assert main(["diff", str(left), str(right), "--environment", "ledger"]) == 0
    out = capsys.readouterr().out
    header, first = out.splitlines()[:2]
    assert header == f"ledgercheck diff: {left} against {right} (ledger, 1 shard, max_restarts=2, window=3; " + (
        "--policy NAME=VALUE compares at another policy)"
    )
    assert first.startswith(f"{left} and {right} first disagree after 6 steps, on the fleet value window_restarts"), out
    assert "fleet window_restarts << " in out and "| 1 / 2" in out, out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            SPEC.replace(
                "if new == RESTARTING:\n", "if new == RESTARTING:\n    if restarts > 3:\n        escalated = True\n", 1
            ),
            "on_state_change: 'restarts' is a per-shard field, and no shard is named here",
        ),
        (
            SPEC
            + '\n[properties.p]\nkind = "step"\non = ["child_crashed"]\nassert = "not before.escalated"\n'
            + 'expect = { base = "holds" }\n',
            "'escalated' is a fleet value ([globals]), not a field of before: read it bare, escalated "
            "(in a step property, as the call begins)",
        ),
    ],
)
def test_a_hint_never_leads_to_another_error(tmp_path: Path, text: str, message: str) -> None:
    """The hook said `name the shard (s.restarts)`, which it refuses in turn (no shard is named
    there); `before.escalated` was answered `did you mean 'escalated_here'?`, a history field."""
    from ledgercheck.model.errors import SpecError

    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec_text(text, str(tmp_path / "supervisor.toml")).variant()


def test_diff_compares_at_the_policy_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A majority test off by one differs only at an even cluster size: diff had no --policy
    and said the two agreed (a Raft trial). Both sides take the policy asked."""
    left = _project(tmp_path)
    right = tmp_path / "late" / "supervisor.toml"
    right.parent.mkdir()
    right.write_text(SPEC.replace("elif window_restarts >= max_restarts:", "elif window_restarts >= max_restarts + 1:"))
    at_one = [
        "diff",
        str(left),
        str(right),
        "--environment",
        "ledger",
        "--max-depth",
        "4",
        "--policy",
        "max_restarts=1",
    ]
    assert main(at_one) == 0
    out = capsys.readouterr().out
    assert "max_restarts=1, window=3;" in out and "first disagree" in out, out
    assert main(["diff", str(left), str(right), "--format", "json", "--max-depth", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policy"] == {"max_restarts": 2, "window": 3} and data["difference"] is None
    assert (data["a_spec"], data["b_spec"]) == (str(left), str(right))
