"""A cache of compiled specs, so that a command does not parse and compile the same spec at
every start.

An entry is the pickled `SpecFile` of one spec file, with the digest of every other file its
compile read (the specs it extends: the entry is used only while they are unchanged). It is
keyed by a SHA-256 of the spec's bytes, the path it was named by (locations in messages carry
it), the Python version and the tool's own code (the name, size and modification time of every
module of the `model` package: a changed compiler never reads an entry an older one wrote). It
lives in `$XDG_CACHE_HOME/ledgercheck` (else `~/.cache/ledgercheck`); `LEDGERCHECK_CACHE=off`
turns it off, and `LEDGERCHECK_CACHE=DIR` puts it in DIR.

Concurrent runs are safe: an entry is written to a temporary file in the same folder and
moved into place with `os.replace`, so a reader sees a whole entry or none. An entry that
cannot be read back (truncated, from another version, not a `SpecFile`) is ignored and
rewritten. A folder that cannot be written only costs the compile: the cache never makes a
command fail.

The cache is the user's own, as trusted as the rest of their home folder: entries are
pickles, written with owner-only permissions.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

FORMAT = 2  # bump when the entry layout changes
KEEP = 64  # entries kept; the least recently written go first
OFF = ("off", "0", "no", "false")
"""The values of a `LEDGERCHECK_*` setting that turn a cache off."""


def cache_dir() -> Path | None:
    """Where entries live, or None when `LEDGERCHECK_CACHE=off`."""
    setting = os.environ.get("LEDGERCHECK_CACHE", "").strip()
    if setting.lower() in OFF:
        return None
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ledgercheck"


@cache
def code_fingerprint() -> str:
    """The tool's version as far as compiled specs are concerned: its modules' names, sizes
    and modification times, and the Python version (pickles are read by the same one)."""
    digest = hashlib.sha256(f"{FORMAT} {sys.version_info[:3]}".encode())
    package = Path(__file__).resolve().parent
    for entry in sorted(os.scandir(package), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            stat = entry.stat()
            digest.update(f"{entry.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def entry_path(folder: Path, name: str, content: bytes) -> Path:
    digest = hashlib.sha256(code_fingerprint().encode())
    digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(content)
    return folder / f"spec-{digest.hexdigest()}.pickle"


def cached(name: str, content: bytes | None, kind: type[T], build: Callable[[], T]) -> T:
    """`build()`'s result for the spec `name` whose bytes are `content`, from the cache when
    an entry for them is there, every other file the compile read (a spec it extends) is
    unchanged, and it reads back as a `kind`; else built and stored."""
    folder = cache_dir()
    if folder is None or content is None:
        return build()
    path = entry_path(folder, name, content)
    try:
        files, value = pickle.loads(path.read_bytes())
        fresh = all(_digest(read_bytes(file)) == digest for file, digest in files)
    except Exception:  # noqa: BLE001 - missing, truncated or stale: rebuilt below
        fresh = False
    if fresh and isinstance(value, kind):
        return value
    with _ReadsRecorded() as files:
        value = build()
    _store(path, (tuple((file, _digest(read_bytes(file))) for file in dict.fromkeys(files)), value))
    return value


def _digest(content: bytes | None) -> str | None:
    return None if content is None else hashlib.sha256(content).hexdigest()


_recording: list[list[str]] = []
_hooked = False
_CODE = (".py", ".pyc", ".so")


def _audit(event: str, args: tuple[object, ...]) -> None:
    """Log the files opened for reading while a compile runs (see _ReadsRecorded)."""
    if not _recording or event != "open":
        return
    file, mode, flags = (tuple(args) + (None, None, None))[:3]
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
    )
    if isinstance(file, (str, os.PathLike)) and not writing and not os.fspath(file).endswith(_CODE):
        _recording[-1].append(os.path.abspath(os.fspath(file)))


class _ReadsRecorded:
    """The files a compile reads besides its own spec (a spec that `extends` another reads
    that one too), so that an entry is used only while all of them are unchanged. Python's
    audit hook sees every `open`; it cannot be removed, so it is added once and does nothing
    outside a compile."""

    def __enter__(self) -> list[str]:
        global _hooked
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True
        _recording.append([])
        return _recording[-1]

    def __exit__(self, *exc: object) -> None:
        _recording.pop()


def _store(path: Path, value: object) -> None:
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return  # a cache that cannot be written costs only the compile
    if write_atomically(path, data):
        prune(path.parent, "spec-*.pickle", KEEP)


def write_atomically(path: Path, data: bytes) -> bool:
    """Put `data` at `path` whole or not at all (a temporary file in the same folder, moved
    into place), in an owner-only folder; False when it could not be written (a cache that
    cannot be written costs only the work it would have saved)."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pickle")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return False
    return True


def prune(folder: Path, pattern: str, keep: int) -> None:
    """Keep the `keep` newest entries named by `pattern` (each edit of a spec makes new ones)."""
    try:
        entries = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # another run pruned it first


def read_bytes(path: str | Path) -> bytes | None:
    """The file's bytes, or None when it cannot be read (the compile then reports why)."""
    try:
        return Path(path).read_bytes()
    except OSError:
        return None
