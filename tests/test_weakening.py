"""`ci --base REF`: a change that checks less fails the run unless the spec accepts it
(`model.weakening`). Red-team trials passed `ci` by deleting the property their regression
broke, by turning its expectation to "violated" (`gen` then wrote tests that expect the
violation), by a `requires` that ruled the failing call out, by a smaller fleet and by a
narrower policy range: each was in the diff, and `ci` said nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.model import ci, weakening
from ledgercheck.model.errors import SpecError, UsageError
from ledgercheck.model.spec import SpecFile, load_spec_text

TEXT = LEDGER_SPEC.read_text(encoding="utf-8")
HEADLINE_EXPECT = 'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }'


def _spec(text: str) -> SpecFile:
    return load_spec_text(text, "fleet_health.toml")


def _section(text: str, header: str) -> tuple[int, int]:
    start = text.index(header)
    end = text.find("\n[", start + len(header))
    return start, (len(text) if end < 0 else end + 1)


def _without(text: str, header: str) -> str:
    start, end = _section(text, header)
    return text[:start] + text[end:]


def _keys(text: str) -> list[str]:
    return [w.key for w in weakening.compare(_spec(TEXT), _spec(text), "base").weakened]


def test_the_same_spec_weakens_nothing() -> None:
    found = weakening.compare(_spec(TEXT), _spec(TEXT), "base")
    assert (found.weakened, found.accepted, found.changed, found.stale) == ((), (), (), ())


def test_a_property_removed() -> None:
    assert _keys(_without(TEXT, "[properties.retirement_is_final]")) == ["property retirement_is_final"]


def test_an_expectation_turned_to_violated_is_absorbing_a_regression() -> None:
    start, end = _section(TEXT, "[properties.no_condemnation_by_inherited_streak]")
    prop = TEXT[start:end]
    assert HEADLINE_EXPECT in prop
    prop = prop.replace(HEADLINE_EXPECT, HEADLINE_EXPECT.replace('fixed = "holds"', 'fixed = "violated"'))
    flipped = TEXT[:start] + prop + TEXT[end:]
    (found,) = weakening.compare(_spec(TEXT), _spec(flipped), "base").weakened
    assert found.key == "expect fixed / no_condemnation_by_inherited_streak"
    assert "the generated tests expect the violation" in found.what
    # the other way round checks more: nothing to say
    assert weakening.compare(_spec(flipped), _spec(TEXT), "base").weakened == ()


def test_a_callers_contract_added_or_changed() -> None:
    start, end = _section(TEXT, "[events.retire]")
    event = TEXT[start:end]
    assert "requires" not in event
    added = TEXT[:start] + event.replace("\nbody", '\nrequires = "state == DEAD"\nbody', 1) + TEXT[end:]
    (found,) = weakening.compare(_spec(TEXT), _spec(added), "base").weakened
    assert found.key == "requires retire" and "a callers' contract added (state == DEAD)" in found.what
    changed = TEXT.replace('requires = "state == DEAD"', 'requires = "state == DEAD and restart_attempts < 2"', 1)
    assert _keys(changed) == ["requires mark_restarting"]
    spaced = TEXT.replace('requires = "state == DEAD"', 'requires = "state  ==  DEAD"', 1)
    assert _keys(spaced) == [], "the same contract, spaced otherwise"


def test_a_smaller_fleet_a_lower_depth_a_narrower_policy() -> None:
    smaller = TEXT.replace("default_shards = 4", "default_shards = 2", 1)
    assert _keys(smaller) == ["default_shards"]
    shallower = TEXT.replace("default_shards = 4", "default_shards = 4\nmax_depth = 8", 1)
    assert _keys(shallower) == ["max_depth"]
    deeper = TEXT.replace("default_shards = 4", "default_shards = 4\nmax_depth = 14", 1)
    assert _keys(deeper) == []
    narrower = TEXT.replace(
        "unhealthy_threshold = { default = 3, min = 1, max = 8 }",
        "unhealthy_threshold = { default = 3, min = 2, max = 8 }",
    )
    assert _keys(narrower) == ["policy unhealthy_threshold"]
    moved = TEXT.replace(
        "unhealthy_threshold = { default = 3, min = 1, max = 8 }",
        "unhealthy_threshold = { default = 4, min = 1, max = 8 }",
    )
    found = weakening.compare(_spec(TEXT), _spec(moved), "base")
    assert found.weakened == () and [w.key for w in found.changed] == ["policy unhealthy_threshold"]


def test_a_property_checked_in_fewer_environments_or_fewer_calls() -> None:
    start, end = _section(TEXT, "[properties.no_repeat_spurious_condemnation]")
    prop = TEXT[start:end]
    assert "environments" not in prop
    narrowed = TEXT[:start] + prop.rstrip("\n") + '\nenvironments = ["ledger"]\n\n' + TEXT[end:]
    found = weakening.compare(_spec(TEXT), _spec(narrowed), "base").weakened
    assert [(w.key, w.what) for w in found] == [
        ("environments of no_repeat_spurious_condemnation", "no longer checked in controller")
    ]
    start, end = _section(TEXT, "[properties.retirement_is_final]")
    prop = TEXT[start:end]
    line = next(x for x in prop.splitlines() if x.startswith('calls = "any"'))
    assert _keys(TEXT[:start] + prop.replace(line + "\n", "") + TEXT[end:]) == ["calls of retirement_is_final"]


HEADLINE_ASSERT = (
    'assert = "after.own_request_streak >= unhealthy_threshold or after.own_probe_streak >= unhealthy_threshold"'
)


def test_an_assert_that_accepts_what_the_base_rejected_is_a_weakening() -> None:
    """A disjunct that lets the seed's condemnation through: the search finds the call the
    edited property accepts and the base's rejects, and names it."""
    assert TEXT.count(HEADLINE_ASSERT) == 1
    masked = TEXT.replace(HEADLINE_ASSERT, HEADLINE_ASSERT[:-1] + ' or after.incarnation > 0"')
    (found,) = weakening.compare(_spec(TEXT), _spec(masked), "base").weakened
    assert found.key == "property no_condemnation_by_inherited_streak"
    assert found.what.startswith("in as_written, now accepts what the base's version rejected, in ledger: after ")
    assert "mark_loaded(0" in found.what and found.what.endswith("report_failure(0) (shard 0)")


@pytest.mark.slow  # 5-7 s: each variant in both environments, proved
def test_an_edit_that_checks_no_less_says_nothing() -> None:
    """A stronger assert, and one weaker only where no run goes (no run reads a verdict
    twice): neither accepts a reachable state or call the base's rejected."""
    stronger = TEXT.replace(HEADLINE_ASSERT, 'assert = "after.own_request_streak >= unhealthy_threshold"')
    looser = TEXT.replace('assert = "verdict_reads <= 1"', 'assert = "verdict_reads <= 2"')
    for edited in (stronger, looser):
        found = weakening.compare(_spec(TEXT), _spec(edited), "base")
        assert (found.weakened, found.changed) == ((), ())


def test_a_step_property_watching_fewer_calls() -> None:
    start, end = _section(TEXT, "[properties.no_condemnation_by_inherited_streak]")
    on = 'on = ["report_failure", "record_probe"]'
    narrowed = TEXT[:start] + TEXT[start:end].replace(on, 'on = ["report_failure"]') + TEXT[end:]
    assert _keys(narrowed) == ["on of no_condemnation_by_inherited_streak"]


def test_a_variant_removed() -> None:
    start, _ = _section(TEXT, "[variants.refit_keeps_streak]")
    tail = TEXT[start:]
    nxt = tail.find("\n[variants.", 1)
    no_variant = TEXT[:start] + (tail[nxt + 1 :] if nxt > 0 else "")
    no_variant = no_variant.replace(', refit_keeps_streak = "holds"', "").replace(
        ', refit_keeps_streak = "violated"', ""
    )
    keys = _keys(no_variant)
    assert "variant refit_keeps_streak" in keys


def test_weakened_accepts_a_change_by_name_with_a_reason() -> None:
    removed = _without(TEXT, "[properties.retirement_is_final]")
    accepted = (
        removed + '\n[weakened]\n"property retirement_is_final" = "folded into retire_retires"\n"max_depth" = "x"\n'
    )
    found = weakening.compare(_spec(TEXT), _spec(accepted), "base")
    assert found.weakened == ()
    assert [(w.key, why) for w, why in found.accepted] == [
        ("property retirement_is_final", "folded into retire_retires")
    ]
    assert found.stale == ("max_depth",)


def test_a_reason_is_required() -> None:
    with pytest.raises(SpecError, match=r"\[weakened\] 'max_depth' needs a reason"):
        _spec(TEXT + '\n[weakened]\n"max_depth" = "  "\n')


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "spec").mkdir()
    spec = tmp_path / "spec" / "fleet_health.toml"
    spec.write_text(TEXT, encoding="utf-8")
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(tmp_path), *argv], check=True)
    return spec


def test_the_base_is_read_from_git_or_a_file(tmp_path: Path) -> None:
    spec = _repo(tmp_path)
    spec.write_text(_without(TEXT, "[properties.retirement_is_final]"), encoding="utf-8")
    head = load_spec_text(spec.read_text(encoding="utf-8"), str(spec))
    head = SpecFile(str(spec), head.source, head.compiled)
    was = weakening.base_spec(head, "HEAD")
    assert was is not None and "retirement_is_final" in was.variant().properties
    step = ci._weakening(head, "HEAD", ci._base_of(head, "HEAD"))
    assert step.status == ci.FAILED
    assert step.failures[0] == "WEAKENED  property retirement_is_final: removed: nothing checks it any more"
    assert step.failures[1].startswith("NOTE      each checks less than the spec at HEAD; accept one with a reason")
    copy = tmp_path / "base.toml"
    copy.write_text(TEXT, encoding="utf-8")
    assert ci._weakening(head, str(copy), ci._base_of(head, str(copy))).failures == [
        f.replace("HEAD", str(copy)) for f in step.failures
    ]
    with pytest.raises(UsageError, match="--base no-such-ref: not a spec file, and not a revision of "):
        weakening.base_spec(head, "no-such-ref")
    # an unset variable, or the index (the change compared with itself), is no base
    with pytest.raises(UsageError, match="--base is empty"):
        weakening.base_spec(head, "")
    with pytest.raises(UsageError, match="--base :0: not a spec file, and not a revision"):
        weakening.base_spec(head, ":0")
    not_a_spec = tmp_path / "pyproject.toml"
    not_a_spec.write_text("[build-system]\nrequires = []\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"--base .*pyproject.toml: the spec there does not load: .*pyproject.toml"):
        weakening.base_spec(head, str(not_a_spec))


def test_a_spec_new_at_the_base_weakens_nothing(tmp_path: Path) -> None:
    spec = _repo(tmp_path)
    fresh = spec.with_name("other.toml")
    fresh.write_text(TEXT, encoding="utf-8")
    loaded = load_spec_text(TEXT, str(fresh))
    head = SpecFile(str(fresh), loaded.source, loaded.compiled)
    assert weakening.base_spec(head, "HEAD") is None
    step = ci._weakening(head, "HEAD", ci._base_of(head, "HEAD"))
    assert (step.status, step.headline) == (ci.PASSED, "the spec is new at HEAD: nothing to compare")


def test_without_base_the_step_is_skipped(spec_file: SpecFile) -> None:
    step = ci._weakening(spec_file, None, None)
    assert step.status == ci.SKIPPED and step.headline.startswith("no --base given")


def _commit(root: Path, message: str) -> None:
    for argv in (["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", message]):
        subprocess.run(["git", "-C", str(root), *argv], check=True)


def _step(spec_file: SpecFile, base: str) -> ci.Step:
    return ci._weakening(spec_file, base, ci._base_of(spec_file, base))


def _loaded(path: Path) -> SpecFile:
    from ledgercheck.model.spec import load_spec

    return load_spec(path)


def test_a_renamed_spec_is_compared_with_its_old_self(tmp_path: Path) -> None:
    """`git mv` and a weakening: the base is found under its old name (it passed as a new spec)."""
    spec = _repo(tmp_path)
    moved = spec.with_name("fh.toml")
    subprocess.run(["git", "-C", str(tmp_path), "mv", str(spec), str(moved)], check=True)
    moved.write_text(_without(TEXT, "[properties.retirement_is_final]"), encoding="utf-8")
    step = _step(_loaded(moved), "HEAD")
    assert step.failures[0] == "WEAKENED  property retirement_is_final: removed: nothing checks it any more"


def test_a_spec_that_extends_another_reads_both_at_the_base(tmp_path: Path) -> None:
    """The file it extends is read at the base too: a weakening of the parent is seen, and the
    command runs from any folder."""
    parent = _repo(tmp_path)
    child = tmp_path / "spec" / "examples" / "next.toml"
    child.parent.mkdir()
    child.write_text('extends = "../fleet_health.toml"\n', encoding="utf-8")
    _commit(tmp_path, "child")
    parent.write_text(TEXT.replace("default_shards = 4", "default_shards = 2", 1), encoding="utf-8")
    step = _step(_loaded(child), "HEAD")
    assert step.failures[0].startswith("WEAKENED  default_shards: lowered from 4 to 2"), step.failures


def test_an_acceptance_holds_for_the_change_that_writes_it(tmp_path: Path) -> None:
    """A change lowered max_depth to 10 and accepted it; the next one lowered it to 1 under
    the same entry, and passed. An entry kept from the base accepts nothing now."""
    spec = _repo(tmp_path)
    accepted = '\n[weakened]\n"max_depth" = "12 -> 10 (#1)"\n'
    spec.write_text(TEXT.replace("default_shards = 4", "default_shards = 4\nmax_depth = 10", 1) + accepted)
    assert _step(_loaded(spec), "HEAD").status == ci.PASSED
    _commit(tmp_path, "first")
    spec.write_text(TEXT.replace("default_shards = 4", "default_shards = 4\nmax_depth = 1", 1) + accepted)
    step = _step(_loaded(spec), "HEAD")
    assert step.status == ci.FAILED and step.failures[0].startswith("WEAKENED  max_depth: lowered from 10 to 1")


def test_what_means_less_though_it_reads_the_same() -> None:
    """A set or a query narrowed changes every contract and property that reads it, their
    text unchanged; a history block edited changes the properties that read what it keeps."""
    serving = 'SERVING = ["HEALTHY", "SUSPECT"]'
    assert serving in TEXT
    keys = _keys(TEXT.replace(serving, 'SERVING = ["HEALTHY"]'))
    assert "requires report_success" in keys, keys
    suspected = 'suspected = { when = "state == SUSPECT or (state == STALE and state_before_partial == SUSPECT)"'
    assert suspected in TEXT
    assert "requires condemn_silent_participant" in _keys(TEXT.replace(suspected, suspected.split(" or ")[0] + '"'))
    start, end = _section(TEXT, "[events.mark_restarting]")
    event = TEXT[start:end]
    assert "restarts_started = restarts_started + 1" in event
    edited = (
        TEXT[:start] + event.replace("restarts_started = restarts_started + 1", "restarts_started = 0") + TEXT[end:]
    )
    assert "history of restarts_stay_within_budget" in _keys(edited)


def test_a_kind_an_action_a_fairness_a_variants_policy_and_conform() -> None:
    """Each as a red-team trial wrote it, none of them flagged before."""
    start, end = _section(TEXT, "[properties.no_repeat_spurious_condemnation]")
    prop = TEXT[start:end]
    eventually = prop.replace('kind = "invariant"', 'kind = "eventually"')
    assert "kind of no_repeat_spurious_condemnation" in _keys(TEXT[:start] + eventually + TEXT[end:])
    start, end = _section(TEXT, "[environments.controller.actions.probe_answers]")
    assert _keys(TEXT[:start] + TEXT[end:]) == ["action controller.probe_answers"]
    fair = 'fairness = [{ weak = ["restart_loaded", "restart_fails"], doc = "a background restart always ends" }]'
    assert fair in TEXT
    more = fair[:-1] + ', { weak = ["probe_answers"] }]'
    assert _keys(TEXT.replace(fair, more)) == ["fairness controller"]
    guard = 'when = "phase != ENDED and i.state == RESTARTING"\nbody = "mark_restart_failed(i)"'
    assert guard in TEXT
    found = weakening.compare(_spec(TEXT), _spec(TEXT.replace(guard, guard.replace("phase != ENDED and ", ""))), "b")
    assert found.weakened == () and [w.key for w in found.changed] == ["action controller.restart_fails"]
    conform = TEXT + "\n[conform]\ndepth = 0\n"
    assert _keys(conform) == ["conform depth"], "the base's conform searched at its defaults"
    narrowed = TEXT + "\n[variants.fixed.override.policy]\nunhealthy_threshold = { default = 3, min = 3, max = 8 }\n"
    assert _keys(narrowed) == ["policy unhealthy_threshold"], "a variant's own policy is compared too"
