"""What a lease trial and a rollout trial found: `conform` on a class whose state is partly
hidden, text arguments, guards split per part, fleet values a class does not keep, calls on
another shard, `diff SPEC A B`, and the figure of a fleet property.

A lease manager with fencing tokens whose binding leaves the token unread (`observe = false`)
passed `ci` with a bug: a holder that re-acquired its expired lease kept its old token, so a
stale write was accepted. The prefixes `acquire, tick, acquire` and `acquire, release,
acquire` bring the model to one state, so the enumeration merged the first away, and the
class's lagging token showed only in a later call's answer. With state hidden, a merged
prefix is expanded one call further. And every call of the enumeration passed one address
per instance, every random call a new one: the holder never called again at random, and no
other client ever called in the enumeration (a release by a client that does not hold the
lease went unseen there). Text arguments now also take the strings the instance holds and
one it does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgercheck.model import conformance as conform
from ledgercheck.model.cli import main
from ledgercheck.model.conformance import enumeration
from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "lease"
state_field = "state"
default_shards = 1

[enums.LState]
members = ["FREE", "HELD", "EXPIRED"]
api_values = "lower"

[policy]
ttl = {{ default = 1, min = 1, max = 3 }}

[fields]
state = {{ type = "LState", initial = "FREE" }}
holder = {{ type = "str?", initial = "None" }}
token = {{ type = "int", initial = 0 }}
ttl_left = {{ type = "int", initial = 0 }}

[events.acquire]
call = "acquire(i, client: str)"
ignore_when = "state == HELD"
returns = "old.state != HELD"
body = \"\"\"
token = token + 1
state = HELD
holder = args.client
ttl_left = ttl
\"\"\"

[events.release]
call = "release(i, client: str)"
ignore_when = "state != HELD or holder != args.client"
returns = "old.state == HELD and state == FREE"
body = \"\"\"
state = FREE
holder = None
ttl_left = 0
\"\"\"

[events.tick]
call = "tick(i)"
ignore_when = "state != HELD"
body = \"\"\"
ttl_left = ttl_left - 1
if ttl_left <= 0:
    state = EXPIRED
    ttl_left = 0
\"\"\"

[events.write]
call = "write(i, client: str, token: int)"
returns = "state == HELD and holder == args.client and args.token == token"
body = "pass"

[environments.ledger]
any_call = true

[properties.write_needs_live_lease]
kind = "step"
on = ["write"]
when = "result"
assert = "before.state == HELD and before.holder == args.client"
expect = {{ default = "holds" }}

[implementation]
instances = "indexed"
construct = {{ n = "instances", ttl = "ttl" }}

[implementation.fields]
state = "leases[i].state"
holder = "leases[i].holder"
token = {token}
ttl_left = "leases[i].ttl_left"
"""

HIDDEN = SPEC.format(token="{ observe = false }")
SHOWN = SPEC.format(token='"leases[i].token"')

CLASS = """\
from enum import Enum


class LState(Enum):
    FREE = "free"
    HELD = "held"
    EXPIRED = "expired"


class Lease:
    def __init__(self):
        self.state = LState.FREE
        self.holder = None
        self.token = 0
        self.ttl_left = 0


class Leases:
    def __init__(self, n, ttl):
        self.ttl = ttl
        self.leases = [Lease() for _ in range(n)]

    def acquire(self, i, client):
        lease = self.leases[i]
        if lease.state == LState.HELD:
            return False
{resume}        lease.state = LState.HELD
        lease.holder = client
        lease.token += 1
        lease.ttl_left = self.ttl
        return True

    def release(self, i, client):
        lease = self.leases[i]
        if lease.state != LState.HELD{holder_check}:
            return False
        lease.state = LState.FREE
        lease.holder = None
        lease.ttl_left = 0
        return True

    def tick(self, i):
        lease = self.leases[i]
        if lease.state == LState.HELD:
            lease.ttl_left -= 1
            if lease.ttl_left <= 0:
                lease.state = LState.EXPIRED
                lease.ttl_left = 0

    def write(self, i, client, token):
        lease = self.leases[i]
        return lease.state == LState.HELD and lease.holder == client and token == lease.token
"""

RESUME = """\
        if lease.state == LState.EXPIRED and lease.holder == client:  # no new token: the bug
            lease.state = LState.HELD
            lease.ttl_left = self.ttl
            return True
"""
CLEAN = CLASS.format(resume="", holder_check=" or lease.holder != client")
STALE_TOKEN = CLASS.format(resume=RESUME, holder_check=" or lease.holder != client")
ANYONE_RELEASES = CLASS.format(resume="", holder_check="")

ENUMERATION_ONLY = ["--random", "0", "--no-runs", "--no-branches", "--no-probes", "--no-policies"]
ENUMERATION_ONLY += ["--no-counterexamples", "--jobs", "1", "--no-cache"]


def _write(tmp_path: Path, spec: str, source: str) -> tuple[Path, str]:
    """The spec and the class in a folder of their own (a module once imported stays so)."""
    folder = tmp_path / f"lease{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "lease.toml").write_text(spec, encoding="utf-8")
    module = folder / f"leases_{folder.name}.py"
    module.write_text(source, encoding="utf-8")
    return folder / "lease.toml", f"{module}:Leases"


def _conform(spec: Path, target: str, *more: str) -> list[str]:
    return ["conform", str(spec), "--impl", target, *ENUMERATION_ONLY, *more]


def test_a_hidden_token_that_lags_is_found_by_probing_a_merged_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, target = _write(tmp_path, HIDDEN, STALE_TOKEN)
    assert main(_conform(spec, target)) == 1
    out = capsys.readouterr().out
    assert "found by enumeration of every sequence of any call" in out, out
    calls = ["acquire(0, 'http://shard-0.new')", "tick(0)", "acquire(0, 'http://shard-0.new')"]
    assert "\n".join(f"  leases.{call}" for call in [*calls, "write(0, 'http://shard-0.new', 1)"]) in out, out

    spec, target = _write(tmp_path, HIDDEN, CLEAN)
    assert main(_conform(spec, target)) == 0
    out = capsys.readouterr().out
    assert "each merged prefix probed one call further (token not observed)" in out, out
    assert "no divergence" in out


def test_a_shown_token_needs_no_probe_and_diverges_where_it_lags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, target = _write(tmp_path, SHOWN, STALE_TOKEN)
    assert main(_conform(spec, target)) == 1
    out = capsys.readouterr().out
    assert "at call 3 of 3, acquire(0, client=http://shard-0.new)" in out, out
    spec, target = _write(tmp_path, SHOWN, CLEAN)
    assert main(_conform(spec, target)) == 0
    assert "probed" not in capsys.readouterr().out


def test_a_release_by_a_client_that_holds_nothing_is_tried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The enumeration passes the string the instance holds and one it does not."""
    spec, target = _write(tmp_path, SHOWN, ANYONE_RELEASES)
    assert main(_conform(spec, target)) == 1
    out = capsys.readouterr().out
    assert "release(0, client=http://shard-0.new.another)" in out, out


def test_random_calls_pass_the_holder_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Random traces alone: half the text arguments are a string the instance holds."""
    spec, target = _write(tmp_path, HIDDEN, STALE_TOKEN)
    random_only = ["--depth", "1", "--random", "1000", "--no-runs", "--no-branches", "--no-probes", "--no-policies"]
    random_only += ["--no-counterexamples", "--jobs", "1", "--no-cache"]
    assert main(["conform", str(spec), "--impl", target, *random_only]) == 1
    assert "found by a random trace" in capsys.readouterr().out


def test_a_text_example_is_passed_too() -> None:
    text = SHOWN.replace(
        'call = "release(i, client: str)"', 'call = "release(i, client: str)"\nexamples = { client = "\'alice\'" }'
    )
    spec = load_spec_text(text, "lease.toml").variant()
    event = spec.events["release"]
    assert conform.enumeration_domain(spec, event.signature.params[0], event, 0) == ["http://shard-0.new", "alice"]
    # The coverage search passes the example itself (the generated tests' calls read as the
    # user's: a pool trial's `examples = { owner = "'worker-1'" }` changed nothing), then in
    # each state the strings held and one more.
    from ledgercheck.model.arguments import argument_domain
    from ledgercheck.model.reduction import decision_cone

    domain = argument_domain(spec, event, event.signature.params[0], decision_cone(spec))
    assert domain.fixed == ("alice",)
    assert domain.values({(0, "holder"): "alice"})[0] == ("alice", "alice.another")
    assert domain.values({(0, "holder"): "bob"})[0] == ("alice", "bob")


@pytest.mark.parametrize("source", [CLEAN, STALE_TOKEN], ids=["clean", "stale-token"])
def test_a_split_enumeration_with_probes_is_the_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """Probe nodes merged across forked runs are those of one pass, in its order."""
    monkeypatch.setattr(enumeration, "SPLIT_FROM", 1)
    spec_path, target = _write(tmp_path, HIDDEN.replace("default_shards = 1", "default_shards = 2"), source)
    spec = load_spec_text(spec_path.read_text(encoding="utf-8"), str(spec_path)).variant()
    found = []
    for parts in (1, 2, 16):
        checker = conform.Conformance(spec, conform.load_target(target, spec), spec.resolve_policy({}))
        result = checker.enumerate(2, 4, parts=parts)
        divergence = None if result.divergence is None else result.divergence.script.calls
        found.append((result.sequences, result.states, result.depth, result.exhausted, divergence, checker.traces))
    assert found[0][0] > 0 and all(other == found[0] for other in found[1:]), found
    assert (found[0][4] is None) == (source is CLEAN)


def test_a_guard_that_is_a_disjunction_is_a_branch_per_part(tmp_path: Path) -> None:
    """`release`'s `ignore_when = "state != HELD or holder != args.client"` held on a free
    lease, the one test of it: a class that let any client release passed the generated
    tests. Each part that holds first is a branch with a test of its own now, and the second
    is a release of a held lease by a client that does not hold it."""
    import subprocess
    import sys

    from ledgercheck.codegen.coverage import search

    spec_file = load_spec_text(SHOWN, "lease.toml")
    found = search(spec_file, spec_file.variant())
    release = [b for b in found.branches if b.event == "release" and b.kind == "ignore_when"]
    assert [(b.taken, b.part, b.text) for b in release] == [
        (True, 1, "state != HELD"),
        (True, 2, "holder != args.client"),
        (False, 0, "state != HELD or holder != args.client"),
    ]
    assert all(b in found.traces for b in release), "a part of the guard was not reached"
    assert [name for name, _ in found.traces[release[1]]] == ["acquire", "release"]
    spec, clean = _write(tmp_path, SHOWN, CLEAN)
    assert main(["gen", str(spec), "--out", str(tmp_path / "tests"), "--jobs", "1"]) == 0
    text = (tmp_path / "tests" / "test_branches_of_release.py").read_text()
    assert "def test_release_ignored_holder_args_client(" in text
    flat = " ".join(text.split())
    assert "`holder != args.client` holds (the parts before it are false) in `ignore_when = state != HELD" in flat

    def pytest_on(target: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")]
        return subprocess.run([*command, "--impl", target], capture_output=True, text=True, timeout=300)

    assert pytest_on(clean).returncode == 0
    broken = pytest_on(_write(tmp_path, SHOWN, ANYONE_RELEASES)[1])
    assert broken.returncode == 1 and "test_release_ignored_holder_args_client" in broken.stdout, broken.stdout


HELD_COUNT = SHOWN.replace(
    "[events.acquire]",
    """[globals]
held = { type = "int", initial = 0 }

[on_state_change]
body = \"\"\"
if new == HELD and old != HELD:
    held = held + 1
elif old == HELD and new != HELD:
    held = held - 1
\"\"\"

[properties.held_count_is_exact]
kind = "invariant"
scope = "fleet"
assert = "held == count(state == HELD)"
expect = { default = "holds" }

[events.acquire]""",
    1,
)


def test_a_fleet_value_the_class_does_not_keep_is_the_models_in_the_generated_tests(tmp_path: Path) -> None:
    """A bound class with no attribute for a fleet value (a rollout's count of unavailable
    replicas): the generated tests' monitor read it as its initial value for ever, and the
    tests of a fleet property failed the class that was right. It reads the shadow model's."""
    import subprocess
    import sys

    spec, clean = _write(tmp_path, HELD_COUNT.replace("default_shards = 1", "default_shards = 2"), CLEAN)
    assert main(["gen", str(spec), "--out", str(tmp_path / "tests"), "--jobs", "1"]) == 0
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")]
    done = subprocess.run([*command, "--impl", clean], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout
    assert " passed" in done.stdout and "failed" not in done.stdout


CAPPED = (
    HELD_COUNT.replace("default_shards = 1", "default_shards = 2")
    .replace(
        "ttl = { default = 1, min = 1, max = 3 }",
        "ttl = { default = 3, min = 1, max = 3 }\nmax_held = { default = 1, min = 1, max = 2 }",
    )
    .replace(
        'ignore_when = "state == HELD"\nreturns = "old.state != HELD"',
        'ignore_when = "state == HELD or held >= max_held"\nreturns = "state == HELD and old.state != HELD"',
    )
    .replace(
        'construct = { n = "instances", ttl = "ttl" }',
        'construct = { n = "instances", ttl = "ttl", max_held = "max_held" }',
    )
)
CAPPED_CLASS = (
    CLEAN.replace(
        "    def __init__(self, n, ttl):\n",
        "    def __init__(self, n, ttl, max_held):\n        self.max_held = max_held\n",
    ).replace(
        "        if lease.state == LState.HELD:\n            return False\n",
        "        if lease.state == LState.HELD or self._taken(i) >= self.max_held:\n            return False\n",
    )
    + """
    def _taken(self, i):
        return sum(1 for j, lease in enumerate(self.leases) if lease.state == LState.HELD or {EXPIRED})
"""
)


def test_a_call_on_another_instance_where_a_trace_to_a_branch_ends_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cap on the leases held across the fleet, which a class also spends on another
    instance's expired lease: seen only by a call on another instance once a lease has
    expired (four calls on the first, past the two-instance enumeration's depth 3 here). The traces to the branches
    end there on instance 0, and every call on every instance is made from where they end."""
    assert "held >= max_held" in CAPPED and "max_held = " in CAPPED
    only = ["--depth", "3", "--random", "0", "--no-runs", "--no-policies", "--no-counterexamples", "--jobs", "1"]
    spec, wrong = _write(
        tmp_path, CAPPED, CAPPED_CLASS.replace("{EXPIRED}", "j != i and lease.state == LState.EXPIRED")
    )
    assert main(["conform", str(spec), "--impl", wrong, *only, "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "(found by every call at 2 shards where a trace to a branch ends" in out, out
    spec, right = _write(tmp_path, CAPPED, CAPPED_CLASS.replace("{EXPIRED}", "False"))
    assert main(["conform", str(spec), "--impl", right, *only, "--no-cache"]) == 0
    assert "  beside           2 shards: every call on every shard where each of the" in capsys.readouterr().out


def test_diff_takes_the_spec_first_of_three(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`diff lease.toml A B` was a usage error (the spec goes in --spec); it is the same as
    `diff --spec lease.toml A B`, and giving both is refused."""
    text = SHOWN + (
        "\n[variants.base]\n\n[variants.open_release]\n\n[variants.open_release.override.events.release]\n"
        'call = "release(i, client: str)"\nignore_when = "state != HELD"\n'
        'returns = "old.state == HELD and state == FREE"\nbody = "state = FREE"\n'
    )
    spec, _ = _write(tmp_path, text, CLEAN)
    args = ["--environment", "ledger", "--max-depth", "3", "--format", "json"]
    assert main(["diff", str(spec), "base", "open_release", *args]) == 0
    three = json.loads(capsys.readouterr().out)
    assert main(["diff", "--spec", str(spec), "base", "open_release", *args]) == 0
    assert json.loads(capsys.readouterr().out) == three
    assert [step["action"] for step in three["difference"]["a"]] == [None, "acquire", "release"]
    assert main(["diff", str(spec), "base", "open_release", "--spec", str(spec)]) == 2
    assert "diff takes the spec once" in capsys.readouterr().err


def test_a_fleet_propertys_figure_shows_the_shards_the_trace_calls(capsys: pytest.CaptureFixture[str]) -> None:
    """A fleet property's break is no shard's: the figure showed shard 0, untouched, while a
    rollout's calls went to shards 1 and 2. It shows the shard of the breaking call, and the
    fields the property reads of every other shard the trace calls."""
    from ledgercheck.model.figure import trace_figure
    from ledgercheck.model.runs import CheckRequest, run_checks

    text = SHOWN.replace("default_shards = 1", "default_shards = 3").replace(
        "[implementation]",
        '[properties.one_lease_at_a_time]\nkind = "invariant"\nscope = "fleet"\n'
        'assert = "count(state == HELD) <= 1"\nexpect = { default = "violated" }\n\n[implementation]',
    )
    spec_file = load_spec_text(text, "lease.toml")
    request = CheckRequest(spec_file, properties=("one_lease_at_a_time",), environment="ledger", max_depth=3)
    (result,) = run_checks(request.overlay(max_traces=1))
    spec = spec_file.variant()
    trace = result.traces[0]
    acted = [c.shard for s in trace.steps[1:] for c in s.calls]
    figure = trace_figure(trace, spec, prop=spec.properties["one_lease_at_a_time"], width=200)
    header, *rows = figure.splitlines()
    assert header.startswith(f"shard {acted[-1]} "), figure
    assert any(row.startswith(f"shard {acted[0]} state ") and "HELD" in row for row in rows), figure


def test_mutants_leave_out_a_part_of_a_guard_and_put_its_comparisons_off_by_one() -> None:
    """A rollout's `ignore_when = "paused or unavailable >= max_unavailable or ..."` was only
    negated or made False: no mutant dropped the pause. A guard's parts and comparisons are
    mutated as a `raises` condition's are, and each mutant is a spec that loads."""
    from ledgercheck.model import mutate

    spec_file = load_spec_text(CAPPED, "lease.toml")
    guards = [(m.kind, m.after) for m in mutate.spec_mutants(spec_file, "base") if m.event == "acquire"]
    assert [g for g in guards if g[1].startswith("ignore_when")] == [
        ("negate a guard", "ignore_when = 'not (state == HELD or held >= max_held)'"),
        ("weaken a guard", "ignore_when = 'False'"),
        ("drop a part of a disjunction", "ignore_when = 'held >= max_held'"),
        ("drop a part of a disjunction", "ignore_when = 'state == HELD'"),
        ("off by one", "ignore_when = 'state == HELD or held > max_held'"),
    ]
    for mutant in mutate.spec_mutants(spec_file, "base"):
        if mutant.event == "acquire" and mutant.after.startswith("ignore_when"):
            load_spec_text(CAPPED + mutant.patch, "lease.toml")  # a spec that loads


def test_a_small_specs_other_policies_get_the_fleet_enumeration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class whose fleet cap is 1 whatever the policy says differs only at two shards and
    at a policy that allows two: the other policies' enumerations kept to one shard (a rollout
    that ignored its pause passed `conform` so). Where the enumeration at the policy asked is
    small, it runs at every other policy too, at its shards and depth."""
    only = ["--random", "0", "--no-runs", "--no-branches", "--no-counterexamples", "--jobs", "1", "--no-cache"]
    hard_coded = CAPPED_CLASS.replace("{EXPIRED}", "False").replace(">= self.max_held", ">= 1")
    spec, wrong = _write(tmp_path, CAPPED, hard_coded)
    assert main(["conform", str(spec), "--impl", wrong, *only]) == 1
    out = capsys.readouterr().out
    assert "(found by enumeration of every sequence of any call at 2 shards at the largest policy" in out, out
    spec, right = _write(tmp_path, CAPPED, CAPPED_CLASS.replace("{EXPIRED}", "False"))
    assert main(["conform", str(spec), "--impl", right, *only]) == 0
    assert "every sequence of up to 4 calls at 2 shards at each;" in capsys.readouterr().out


def test_a_fleet_value_the_class_keeps_is_compared_and_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bound class's attribute named as a fleet value (`held`): the binding hid it, so
    conform compared it not and the generated tests read the model's (a pool class that never
    gave back a broken connection's slot passed the generated tests). It is read off the
    class now; a method of that name is no value, and a binding that names it as a field is
    told where fleet values come from."""
    import subprocess
    import sys

    keeps = CLEAN.replace(
        "        self.leases = [Lease() for _ in range(n)]\n",
        "        self.leases = [Lease() for _ in range(n)]\n        self.held = 0\n",
    )
    keeps = keeps.replace("        lease.token += 1\n", "        lease.token += 1\n        self.held += 1\n")
    right = keeps.replace(
        "        lease.holder = None\n", "        lease.holder = None\n        self.held -= 1\n"
    ).replace(
        "                lease.state = LState.EXPIRED\n",
        "                lease.state = LState.EXPIRED\n                self.held -= 1\n",
    )
    text = HELD_COUNT.replace("default_shards = 1", "default_shards = 2")
    for source, code in ((keeps, 1), (right, 0)):
        spec, target = _write(tmp_path, text, source)
        assert main(_conform(spec, target)) == code
        out = capsys.readouterr().out
        assert ("  held: model 0, implementation 1" in out) == (code == 1), out
        assert "not observed" not in out
    assert main(["gen", str(spec), "--out", str(tmp_path / "tests"), "--jobs", "1"]) == 0
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")]
    assert subprocess.run([*command, "--impl", target], capture_output=True, text=True, timeout=300).returncode == 0
    wrong = _write(tmp_path, text, keeps)[1]
    failed = subprocess.run([*command, "--impl", wrong], capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "held" in failed.stdout, failed.stdout
    with pytest.raises(SpecError, match="'held' is a fleet value"):
        load_spec_text(
            text.replace('ttl_left = "leases[i].ttl_left"', 'ttl_left = "leases[i].ttl_left"\nheld = "held"'), "l.toml"
        )
