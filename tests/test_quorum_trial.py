"""What a replica-set trial found: a class bound to its spec (`tests/fixtures/quorum/`), whose
replicas share the term they elect leaders in, so that no replica evolves on its own.

`ci`'s proofs gave Spacer the whole budget (600 s, then UNDECIDED) on a term limit written one
past the spec's, which breaks `terms_bounded` at depth 24 and which the explicit engine refutes
in half a second; and a class that allowed a sixth term passed `conform`, its trace 25 calls
long, one past the depth the fleet's branch search stopped at.
"""

from __future__ import annotations

from pathlib import Path

from ledgercheck.codegen import coverage
from ledgercheck.model import resultcache
from ledgercheck.model.result import Status
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import load_spec, load_spec_text

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "quorum"
SPEC = (FIXTURE / "quorum.toml").read_text(encoding="utf-8")
LIMIT = 'cur_term >= max_term", error = "TermExhausted"'
ONE_PAST = SPEC.replace(LIMIT, LIMIT.replace(">=", ">"))


def test_a_violation_past_the_depth_on_a_coupled_fleet_is_found_when_spacer_gives_up() -> None:
    assert ONE_PAST != SPEC
    spec_file = load_spec_text(ONE_PAST, "quorum.toml")
    request = CheckRequest(
        spec_file, properties=("terms_bounded",), prove=True, engine="auto", max_traces=1, timeout=2.0, lax=False
    )
    with resultcache.afresh():
        [result] = run_checks(request)
    assert result.status == Status.VIOLATED and result.expected == "holds", result.note
    assert result.traces[0].depth == 24, result.note


def test_the_fleet_search_is_bounded_by_its_states_not_a_depth() -> None:
    spec_file = load_spec(FIXTURE / "quorum.toml")
    spec = spec_file.variant()
    one = coverage.search(spec_file, spec)
    exhausted = next(u.branch for u in one.unreached if u.branch.kind == "raises" and u.branch.taken)
    assert exhausted.error == "TermExhausted"
    fleet = coverage.fleet_search(spec, {}, 2, [exhausted])
    assert exhausted in fleet.traces and len(fleet.traces[exhausted]) > coverage.MAX_DEPTH
