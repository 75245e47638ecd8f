"""The compiled-spec cache returns what a compile returns, never serves a stale or damaged
entry, and never makes a command fail."""

from __future__ import annotations

import os

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.model import spec as spec_module
from ledgercheck.model import speccache
from ledgercheck.model.spec import load_spec


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.delenv("LEDGERCHECK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder / "ledgercheck"


@pytest.fixture
def compiles(monkeypatch):
    """How many times the spec is really compiled."""
    count = []
    original = spec_module._load

    def counting(source):
        count.append(source.path)
        return original(source)

    monkeypatch.setattr(spec_module, "_load", counting)
    return count


def _spec_copy(tmp_path, text=None):
    path = tmp_path / "ledger.toml"
    path.write_text(text if text is not None else LEDGER_SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def test_a_cached_spec_equals_the_compiled_one(cache, compiles, tmp_path):
    path = _spec_copy(tmp_path)
    first = load_spec(path)
    assert len(compiles) == 1 and len(list(cache.glob("spec-*.pickle"))) == 1
    second = load_spec(path)
    assert len(compiles) == 1, "read from the cache"
    assert second == first and second is not first
    assert second.variants == first.variants and second.source.text == first.source.text


def test_an_edited_spec_is_compiled_again(cache, compiles, tmp_path):
    path = _spec_copy(tmp_path)
    load_spec(path)
    path.write_text(path.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    edited = load_spec(path)
    assert len(compiles) == 2
    assert edited.source.text.endswith("# an edit\n")


@pytest.mark.parametrize("damage", [b"", b"not a pickle", b"\x80\x05K\x01."])  # empty, garbage, an int
def test_a_damaged_entry_is_ignored_and_rewritten(cache, compiles, tmp_path, damage):
    path = _spec_copy(tmp_path)
    expected = load_spec(path)
    (entry,) = cache.glob("spec-*.pickle")
    entry.write_bytes(damage)
    assert load_spec(path) == expected
    assert len(compiles) == 2
    assert entry.read_bytes() != damage, "rewritten"
    assert load_spec(path) == expected and len(compiles) == 2


def test_off_writes_nothing(cache, compiles, tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGERCHECK_CACHE", "off")
    path = _spec_copy(tmp_path)
    load_spec(path)
    load_spec(path)
    assert len(compiles) == 2 and not cache.exists()


def test_an_unwritable_cache_costs_only_the_compile(tmp_path, compiles, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(blocker / "cache"))  # a folder inside a file
    path = _spec_copy(tmp_path)
    assert load_spec(path).variants
    assert load_spec(path).variants and len(compiles) == 2


def test_a_spec_with_an_error_is_not_cached(cache, tmp_path):
    from ledgercheck.model.errors import SpecError

    path = _spec_copy(tmp_path, "[spec]\nname = 3\n")
    for _ in range(2):
        with pytest.raises(SpecError):
            load_spec(path)
    assert not cache.exists() or not list(cache.glob("spec-*.pickle"))


def test_old_entries_are_pruned(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(speccache, "KEEP", 2)
    cache.mkdir(parents=True)
    for age in range(3):
        old = cache / f"spec-old{age}.pickle"
        old.write_bytes(b"x")
        os.utime(old, ns=(age * 10**9, age * 10**9))
    load_spec(_spec_copy(tmp_path))
    assert sorted(p.name for p in cache.glob("spec-*.pickle"))[-1] == "spec-old2.pickle"
    assert len(list(cache.glob("spec-*.pickle"))) == 2


def test_an_entry_is_stale_when_a_file_the_compile_read_changed(cache, tmp_path):
    """A spec that extends another reads it while compiling: an edit of that file alone must
    not be answered from the cache."""
    parent = tmp_path / "parent.toml"
    parent.write_text("one", encoding="utf-8")
    builds = []

    def build() -> str:
        builds.append(1)
        return "child over " + parent.read_text(encoding="utf-8")

    assert speccache.cached("child.toml", b"child", str, build) == "child over one"
    assert speccache.cached("child.toml", b"child", str, build) == "child over one"
    assert len(builds) == 1
    parent.write_text("two", encoding="utf-8")
    assert speccache.cached("child.toml", b"child", str, build) == "child over two"
    assert len(builds) == 2
