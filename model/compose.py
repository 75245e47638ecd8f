"""Composing spec sources: a file that `extends` another, and a variant's table overrides.

Both are the same operation on the parsed TOML: the base's tables, with the overlay's tables
merged in key by key (a table merges into a table; any other value replaces), then the
overlay's `remove` list deleting whole tables (`"events.retire"`). The result is one
`SpecSource` whose key positions are layered: an error about a key names the file (and line)
that wrote it, the overlay's first, so a mistake inherited from the base spec is reported in
the base file.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgercheck.model.errors import Location, SpecError, did_you_mean
from ledgercheck.model.source import KeyLines, KeyPath, SpecSource, read_source

EXTENDS = "extends"
REMOVE = "remove"
# A chain of files extending one another deeper than this is a mistake, not a design.
MAX_EXTENDS_DEPTH = 16


@dataclass
class LayeredLines(KeyLines):
    """Key positions of several files (or parts of one), the first layer winning: the
    overlay's, then its base's, and so on."""

    layers: tuple[KeyLines, ...] = ()

    def where(self, keys: KeyPath) -> Location:
        for end in range(len(keys), 0, -1):
            for layer in self.layers:
                found = layer.positions.get(keys[:end])
                if found:
                    return Location(layer.path, found[0], found[1])
        return Location(self.path, 1)

    def first_within(self, keys: KeyPath) -> Location:
        for layer in self.layers:
            found = [pos for path, pos in layer.positions.items() if path[: len(keys)] == keys]
            if found:
                line, col = min(found)
                return Location(layer.path, line, col)
        return self.where(keys)

    def value_where(self, keys: KeyPath) -> Location:
        for layer in self.layers:
            found = layer.values.get(keys)
            if found:
                return Location(layer.path, found[0], found[1])
        return self.where(keys)


def _layers(lines: KeyLines) -> tuple[KeyLines, ...]:
    return lines.layers if isinstance(lines, LayeredLines) else (lines,)


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `overlay` merged in: tables merge key by key, other values replace."""
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def remove_tables(source: SpecSource, data: dict[str, Any], raw: Any, keys: KeyPath) -> None:
    """Delete the tables a `remove = ["events.retire", ...]` list names from `data`."""
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise source.error(keys, 'remove must be a list of dotted table names, e.g. ["events.retire"]')
    for dotted in raw:
        parts = dotted.split(".")
        node: Any = data
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if len(parts) < 2 or not isinstance(node, dict) or parts[-1] not in node:
            known = list(node) if isinstance(node, dict) else []
            raise SpecError(
                source.lines.where(keys),
                f"remove: there is no {dotted!r} to remove{did_you_mean(parts[-1], known)}",
            )
        del node[parts[-1]]


def compose(source: SpecSource, chain: tuple[Path, ...] = ()) -> SpecSource:
    """The source with the file it `extends` (recursively) merged underneath it."""
    if EXTENDS not in source.data:
        if REMOVE in source.data:
            raise source.error((REMOVE,), "a top-level remove list needs 'extends': there is nothing to remove from")
        return source
    name = source.data[EXTENDS]
    keys: KeyPath = (EXTENDS,)
    if not isinstance(name, str) or not name.strip():
        raise source.error(keys, "extends must be the path of another spec file, relative to this one")
    here = Path(source.path).resolve()
    chain = (*chain, here)
    parent_path = Path(source.path).parent / name
    if parent_path.resolve() in chain:
        cycle = " -> ".join(p.name for p in (*chain, parent_path.resolve()))
        raise source.error(keys, f"extends makes a cycle: {cycle}")
    if len(chain) > MAX_EXTENDS_DEPTH:
        raise source.error(keys, f"extends chains more than {MAX_EXTENDS_DEPTH} files")
    if not parent_path.is_file():
        raise source.error(keys, f"extends {name!r}: no such spec file ({parent_path})")
    parent = compose(read_source(parent_path), chain)
    overlay = {k: v for k, v in source.data.items() if k not in (EXTENDS, REMOVE)}
    data = merge(parent.data, overlay)
    if REMOVE in source.data:
        remove_tables(source, data, source.data[REMOVE], (REMOVE,))
    lines = LayeredLines(source.path, layers=(source.lines, *_layers(parent.lines)))
    others = {**parent.others, parent.path: parent.text}
    return SpecSource(source.path, source.text, data, lines, others)


def variant_chain(source: SpecSource, variant: str) -> tuple[str, ...]:
    """The variants a variant starts `from`, oldest first, ending with the variant itself."""
    table = source.data.get("variants", {})
    chain = [variant]
    while True:
        body = table.get(chain[0]) if isinstance(table, dict) else None
        origin = body.get("from") if isinstance(body, dict) else None
        if origin is None:
            return tuple(chain)
        keys: KeyPath = ("variants", chain[0], "from")
        if not isinstance(origin, str) or origin not in table:
            names = list(table) if isinstance(table, dict) else []
            raise source.error(
                keys, f"from names no variant of this spec: {origin!r}{did_you_mean(str(origin), names)}"
            )
        if origin in chain:
            raise source.error(keys, f"variants start from one another in a cycle: {' <- '.join([origin, *chain])}")
        chain.insert(0, origin)


def variant_source(source: SpecSource, variant: str) -> SpecSource:
    """The spec as one variant sees it: its (and its origins') `override` tables merged over
    the spec's, and the tables they `remove` deleted. The source itself if none has either."""
    table = source.data.get("variants", {})
    data = source.data
    layers = _layers(source.lines)
    changed = False
    for name in variant_chain(source, variant):
        body = table.get(name) if isinstance(table, dict) else None
        if not isinstance(body, dict):
            continue
        prefix: KeyPath = ("variants", name, "override")
        if "override" in body:
            if not isinstance(body["override"], dict):
                raise source.error(prefix, "override must be a table of spec tables, e.g. [variants.X.override.policy]")
            data = merge(data, body["override"])
            layers = (*(_rebased(layer, prefix) for layer in layers), *layers)
            changed = True
        if REMOVE in body:
            data = copy.deepcopy(data) if not changed else data
            remove_tables(source, data, body[REMOVE], ("variants", name, REMOVE))
            changed = True
    if not changed:
        return source
    return SpecSource(source.path, source.text, data, LayeredLines(source.path, layers=layers), source.others)


def _rebased(lines: KeyLines, prefix: KeyPath) -> KeyLines:
    """The positions written under `prefix`, as if written at the top level."""
    cut = len(prefix)
    return KeyLines(
        lines.path,
        {k[cut:]: v for k, v in lines.positions.items() if k[:cut] == prefix and len(k) > cut},
        {k[cut:]: v for k, v in lines.values.items() if k[:cut] == prefix and len(k) > cut},
    )


def read_composed(path: str | Path) -> SpecSource:
    """Read a spec file with everything it extends."""
    return compose(read_source(path))
