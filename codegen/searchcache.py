"""The coverage search, remembered across commands.

`ledgercheck ci` searches the shortest trace to every branch for its drift step while the
`conform` it starts searches the same one for its branch traces; `gen`, `gen --check` and a
second `ci` search it again. On a spec whose clock steps are long the search runs to its
bounds (tens of seconds, twice at once in `ci`); on a spec whose decisions read a fleet value
both search a fleet for the branches one instance cannot reach (`with_fleet`). So a search is
kept, keyed by the spec file's
text, the variant's compiled form, the policy and the tool (`resultcache`'s key parts, and
this package's own code: a changed search never reads an entry an older one wrote), in the
cache of results
(`$LEDGERCHECK_CACHE/coverage`; `--no-cache`, `LEDGERCHECK_RESULTS=off` or
`LEDGERCHECK_CACHE=off` turn it off, as they do the results).

Two processes that need the same search at once do it once: the first takes a lock on the
entry (`fcntl.flock`, released by the system if its holder dies) and searches; the other
waits, saying so, and reads the entry back. Entries are written whole or not at all
(`speccache.write_atomically`); one that cannot be read back is searched again. The cache
never changes an answer: an entry is the search's own result, pickled.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ledgercheck.codegen import coverage
from ledgercheck.codegen.coverage import Coverage
from ledgercheck.codegen.coverage import search as fresh_search
from ledgercheck.model import budget, resultcache, speccache
from ledgercheck.model.spec import Spec, SpecFile

KEEP = 32
"""Entries kept; the least recently written go first."""
WAIT_POLL = 0.25
"""Seconds between two looks at the lock while another process searches."""


def search(
    spec_file: SpecFile,
    spec: Spec,
    policy: Mapping[str, int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Coverage:
    """`coverage.search(spec_file, spec, policy, progress)`, from the cache when an entry
    for the same question is there (or is being written by another process, which it waits
    for), else searched and stored."""
    path = _entry(spec_file, spec, policy)
    return _remembered(path, lambda: fresh_search(spec_file, spec, policy, progress), progress)


def with_fleet(
    spec_file: SpecFile,
    spec: Spec,
    found: Coverage,
    shards: int | None = None,
    policy: Mapping[str, int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Coverage:
    """`coverage.with_fleet(spec, found, progress, shards, policy)`, remembered as `search`
    is (`found` is `search`'s answer to the same spec, variant and policy): `ci` searches a
    coupled spec's fleet for its drift step, and the `conform` it starts searches it again
    for its branch traces."""
    shards = shards or spec.default_shards
    if not coverage.needs_fleet(found, shards):
        return found
    path = _entry(spec_file, spec, policy, f"fleet of {shards}")
    return _remembered(path, lambda: coverage.with_fleet(spec, found, progress, shards, policy), progress)


def _remembered(path: Path | None, compute: Callable[[], Coverage], progress: Callable[[str], None] | None) -> Coverage:
    """The entry at `path` if it can be read back; else `compute`d (once across processes:
    under the entry's lock) and stored whole. No `path` (the cache is off): computed."""
    if path is None:
        return compute()
    found = _read(path)
    if found is not None:
        return found
    with _locked(path, progress):
        found = _read(path)  # written while this process waited
        if found is not None:
            return found
        found = compute()
        if speccache.write_atomically(path, pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)):
            speccache.prune(path.parent, "search-*.pickle", KEEP)
        return found


@functools.cache
def search_code() -> str:
    """The search's own code (this package's modules: names, sizes, modification times), on
    top of the model's that `resultcache.tool` covers: a changed search never reads an entry
    an older one wrote."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for entry in sorted(os.scandir(package), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            stat = entry.stat()
            digest.update(f"{entry.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _entry(spec_file: SpecFile, spec: Spec, policy: Mapping[str, int] | None, what: str = "") -> Path | None:
    where = resultcache.folder()
    digest = resultcache.spec_digest(spec)
    if where is None or digest is None:
        return None
    key = hashlib.sha256(f"{resultcache.tool()} {search_code()} {spec.variant} {what}".encode())
    key.update(b"\0" + spec_file.source.text.encode("utf-8", "surrogateescape"))
    key.update(b"\0" + digest.encode() + b"\0" + repr(sorted((policy or {}).items())).encode())
    return where.parent / "coverage" / f"search-{key.hexdigest()}.pickle"


def _read(path: Path) -> Coverage | None:
    try:
        found = pickle.loads(path.read_bytes())
    except Exception:  # noqa: BLE001 - missing, truncated or from another version: searched again
        return None
    return found if isinstance(found, Coverage) else None


@contextlib.contextmanager
def _locked(path: Path, progress: Callable[[str], None] | None) -> Iterator[None]:
    """The entry's lock, held while this process searches; waited for (within the command's
    budget) while another holds it. Without `fcntl`, or a folder that cannot be written,
    nothing is locked: at worst both search."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle: IO[Any] = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - closed below
    except (ImportError, OSError):
        yield
        return
    try:
        waited = time.monotonic()
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                budget.stop_if_spent("the wait for another command's coverage search of this spec")
                if progress is not None:
                    seconds = time.monotonic() - waited
                    progress(f"waiting for another command's search of the same branches ({seconds:.0f} s)")
                time.sleep(WAIT_POLL)
        yield
    finally:
        handle.close()  # and with it the lock
