"""The coverage search, remembered across commands (`codegen.searchcache`): the same question
answered from the cache, two processes that need it at once searching once, a broken entry
searched again, and the switches that turn the cache of results off turning this off too."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.codegen import searchcache
from ledgercheck.model import resultcache
from ledgercheck.model.spec import load_spec


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, int]]:
    """The cache in a folder of its own, turned on; the searches that really ran."""
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LEDGERCHECK_RESULTS", raising=False)
    searches: list[dict[str, int]] = []
    real = searchcache.fresh_search

    def fresh(spec_file: Any, spec: Any, policy: Any = None, progress: Any = None) -> Any:
        searches.append(dict(policy or {}))
        return real(spec_file, spec, policy, progress)

    monkeypatch.setattr(searchcache, "fresh_search", fresh)
    return searches


def test_the_same_search_is_read_back(counted: list[dict[str, int]]) -> None:
    spec_file = load_spec(str(LEDGER_SPEC))
    spec = spec_file.variant("refit_keeps_streak")
    first = searchcache.search(spec_file, spec)
    again = searchcache.search(spec_file, spec)
    assert len(counted) == 1 and again == first and again is not first
    other = searchcache.search(spec_file, spec, {"unhealthy_threshold": 2})  # another policy: another search
    assert len(counted) == 2 and other.traces != first.traces


def test_a_broken_entry_is_searched_again(counted: list[dict[str, int]]) -> None:
    spec_file = load_spec(str(LEDGER_SPEC))
    spec = spec_file.variant("refit_keeps_streak")
    first = searchcache.search(spec_file, spec)
    (entry,) = (Path(resultcache.folder() or "").parent / "coverage").glob("search-*.pickle")
    entry.write_bytes(entry.read_bytes()[:100])
    assert searchcache.search(spec_file, spec) == first and len(counted) == 2


@pytest.mark.parametrize("off", ["results", "cache", "no-cache"])
def test_the_switches_of_the_cache_of_results_turn_it_off(
    counted: list[dict[str, int]], monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    spec_file = load_spec(str(LEDGER_SPEC))
    spec = spec_file.variant("refit_keeps_streak")
    if off == "results":
        monkeypatch.setenv("LEDGERCHECK_RESULTS", "off")
    elif off == "cache":
        monkeypatch.setenv("LEDGERCHECK_CACHE", "off")
    with resultcache.afresh(off == "no-cache"):
        searchcache.search(spec_file, spec)
        searchcache.search(spec_file, spec)
    assert len(counted) == 2


def test_a_search_another_process_is_making_is_waited_for(counted: list[dict[str, int]]) -> None:
    """While another process holds the entry's lock (it is searching), the search waits,
    saying so, and reads what that process wrote: the two search once (ci and the conform it
    starts searched the same branches at once, each for tens of seconds)."""
    import fcntl
    import pickle

    from ledgercheck.codegen import coverage

    spec_file = load_spec(str(LEDGER_SPEC))
    spec = spec_file.variant("refit_keeps_streak")
    path = searchcache._entry(spec_file, spec, None)
    assert path is not None
    path.parent.mkdir(parents=True)
    found = coverage.search(spec_file, spec)
    heard: list[str] = []
    got: list[Any] = []
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: got.append(searchcache.search(spec_file, spec, None, heard.append)))
        waiter.start()
        time.sleep(3 * searchcache.WAIT_POLL)
        path.write_bytes(pickle.dumps(found))
    waiter.join(30)
    assert got == [found] and counted == []
    assert heard and heard[0].startswith("waiting for another command's search of the same branches")


def test_a_changed_search_reads_no_entry_an_older_one_wrote(
    counted: list[dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key covers the search's own code (codegen), not only the model's: an upgrade that
    changes how branches are split must not read the branches of the version before."""
    spec_file = load_spec(str(LEDGER_SPEC))
    spec = spec_file.variant("refit_keeps_streak")
    searchcache.search(spec_file, spec)
    monkeypatch.setattr(searchcache, "search_code", lambda: "a newer search")
    searchcache.search(spec_file, spec)
    assert len(counted) == 2


def test_the_fleet_search_is_remembered_beside_the_one_shard_search(
    counted: list[dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coupled spec's fleet search (`ci`'s drift step searches it, and the `conform` it
    starts searches it again): stored per fleet size, read back without searching."""
    from ledgercheck.codegen import coverage

    spec_file = load_spec(str(Path(__file__).parent / "fixtures" / "twopc" / "twopc.toml"))
    spec = spec_file.variant()
    found = searchcache.search(spec_file, spec)
    assert coverage.needs_fleet(found, spec.default_shards)
    fleets: list[int] = []
    real = coverage.fleet_search

    def fleet_search(spec: Any, policy: Any, shards: int, *args: Any, **kwargs: Any) -> Any:
        fleets.append(shards)
        return real(spec, policy, shards, *args, **kwargs)

    monkeypatch.setattr(coverage, "fleet_search", fleet_search)
    first = searchcache.with_fleet(spec_file, spec, found)
    assert first.fleet_traces and fleets == [spec.default_shards]
    assert searchcache.with_fleet(spec_file, spec, found) == first and len(fleets) == 1
    assert len(counted) == 1
    assert searchcache.with_fleet(spec_file, spec, found, shards=1) is found  # one shard: nothing to search
    sizes = {searchcache._entry(spec_file, spec, None, f"fleet of {n}") for n in (2, 3)}
    assert len(sizes) == 2 and searchcache._entry(spec_file, spec, None) not in sizes  # an entry per fleet size
