"""Reading a TOML spec while remembering where each key was written.

`tomllib` returns plain dictionaries without positions, but every error a user sees must
name a line. `KeyLines` scans the same text for table headers and key assignments and maps
each key path (``("events", "mark_loaded", "body")``) to the line and column where its value
starts. It understands the TOML a spec uses: tables, arrays of tables, dotted keys, inline
tables, and single- or multi-line strings.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgercheck.model.errors import Location, SpecError

KeyPath = tuple[str | int, ...]

_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?")
_ASSIGN = re.compile(rf"\s*({_DOTTED})\s*=\s*")
_KEY_PART = re.compile(_KEY)


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = []
    for match in _KEY_PART.finditer(text):
        part = match.group(0)
        if part[0] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


@dataclass
class KeyLines:
    """Where each key path of one TOML file was written."""

    path: str
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    values: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def where(self, keys: KeyPath) -> Location:
        """The location of the longest prefix of `keys` that the file wrote explicitly."""
        for end in range(len(keys), 0, -1):
            found = self.positions.get(keys[:end])
            if found:
                return Location(self.path, found[0], found[1])
        return Location(self.path, 1)

    def first_within(self, keys: KeyPath) -> Location:
        """The first place the file wrote `keys` or anything under it: a table declared only
        through a sub-table or an array of tables (`[[variants.fixed.patch]]`) has no header
        of its own, and `where` would fall back to a parent that the file never wrote."""
        found = [pos for path, pos in self.positions.items() if path[: len(keys)] == keys]
        if not found:
            return self.where(keys)
        line, col = min(found)
        return Location(self.path, line, col)

    def value_where(self, keys: KeyPath) -> Location:
        """Where the value of `keys` starts (inside an inline table: after its `=`)."""
        found = self.values.get(keys)
        return Location(self.path, found[0], found[1]) if found else self.where(keys)

    def line_of(self, keys: KeyPath) -> int:
        return self.where(keys).line

    @classmethod
    def scan(cls, path: str, text: str) -> KeyLines:
        table: KeyPath = ()
        arrays: dict[KeyPath, int] = {}
        found = cls(path)
        lines = _lines(text)
        index = 0
        while index < len(lines):
            line = lines[index]
            lineno = index + 1
            index += 1
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            header = _HEADER.match(line)
            if header:
                keys = _split_dotted(header.group(2))
                if header.group(1) == "[[":
                    count = arrays.get(keys, -1) + 1
                    arrays[keys] = count
                    table = (*keys, count)
                else:
                    table = _with_array_indices(keys, arrays)
                found.positions.setdefault(table, (lineno, line.index(header.group(2)) + 1))
                continue
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            key_path: KeyPath = (*table, *_split_dotted(assign.group(1)))
            value_col = assign.end()
            found.positions.setdefault(key_path, (lineno, value_col + 1))
            rest = line[value_col:]
            if rest.startswith("{"):
                found._scan_inline(key_path, line, value_col, lineno)
            for quote in ('"""', "'''"):
                if rest.startswith(quote) and rest.count(quote) == 1:
                    while index < len(lines) and quote not in lines[index]:
                        index += 1
                    index += 1
                    break
        return found

    def _scan_inline(self, keys: KeyPath, line: str, start: int, lineno: int) -> None:
        depth = 0
        position = start
        stack: list[KeyPath] = [keys]
        expect_key = False
        while position < len(line):
            char = line[position]
            if char in "\"'":
                end = line.find(char, position + 1)
                while char == '"' and end > 0 and line[end - 1] == "\\":
                    end = line.find(char, end + 1)
                if end < 0:
                    return
                position = end + 1
                continue
            if char == "{":
                depth += 1
                expect_key = True
            elif char == "}":
                depth -= 1
                stack.pop() if len(stack) > 1 else None
                if depth == 0:
                    return
            elif char == ",":
                expect_key = True
            elif expect_key and not char.isspace():
                match = _ASSIGN.match(line, position)
                if match:
                    inner = (*stack[-1], *_split_dotted(match.group(1)))
                    self.positions.setdefault(inner, (lineno, position + 1))
                    self.values.setdefault(inner, (lineno, match.end() + 1))
                    position = match.end()
                    if line[position : position + 1] == "{":
                        stack.append(inner)
                    expect_key = False
                    continue
                expect_key = False
            position += 1


def _with_array_indices(keys: tuple[str, ...], arrays: dict[KeyPath, int]) -> KeyPath:
    """A `[a.b.c]` header under an array of tables `[[a.b]]` refers to its last element."""
    result: list[str | int] = []
    for part in keys:
        result.append(part)
        count = arrays.get(tuple(result))
        if count is not None:
            result.append(count)
    return tuple(result)


@dataclass(frozen=True)
class SpecSource:
    """A spec file's parsed TOML, its raw text and its key positions."""

    path: str
    text: str
    data: dict[str, Any]
    lines: KeyLines
    # The texts of the files this one extends (model.compose), by path: where their values are.
    others: Mapping[str, str] = field(default_factory=dict)

    @functools.cached_property
    def raw_lines(self) -> tuple[str, ...]:
        """The text's lines as TOML numbers them (split at '\\n' only), split once: callers
        that map positions must not split the whole text again for every value."""
        return tuple(_lines(self.text))

    def raw_lines_of(self, path: str) -> tuple[str, ...]:
        """The lines of this file, or of a file it extends."""
        return self.raw_lines if path == self.path or path not in self.others else tuple(_lines(self.others[path]))

    @property
    def digest_text(self) -> str:
        """Everything the spec was read from: its text, then the texts of the files it extends."""
        return "".join([self.text, *(f"\0{path}\0{text}" for path, text in self.others.items())])

    def where(self, *keys: str | int) -> Location:
        return self.lines.where(tuple(keys))

    def error(self, keys: KeyPath, message: str) -> SpecError:
        return SpecError(self.lines.where(keys), message)


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
# TOML integers are 64-bit ("an integer that cannot be represented losslessly is an error");
# tomllib accepts any size, and a 5000-digit one cannot even be printed in an error message.
TOML_INT_MIN, TOML_INT_MAX = -(2**63), 2**63 - 1
# No spec nests deeper than a handful of levels; anything deep is an accident or an attack.
MAX_TOML_DEPTH = 32
_LONG_NUMBER = re.compile(r"[0-9][0-9_]{4299,}")


def _lines(text: str) -> list[str]:
    r"""The lines of a TOML text as TOML (and tomllib) count them: split at '\n' only.
    `str.splitlines` also splits at form feeds, '\x85' and '\u2028', which TOML allows in
    strings and comments, and every line number after one would be off."""
    return text.split("\n")


def _last_line(text: str) -> int:
    return max(1, len(text.rstrip("\n").split("\n")))


def _deepest_line(text: str) -> int:
    """The line where brackets first nest deepest (strings skipped roughly): where a parse
    that ran out of stack was."""
    depth = deepest = 0
    line = best = 1
    quote = ""
    escaped = False
    for char in text:
        if char == "\n":
            line += 1
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote or (char == "\n" and quote != "\n"):
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char == "#":
            quote = "\n"  # a comment runs to the end of the line
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, best = depth, line
        elif char in "]}":
            depth -= 1
    return best


def read_source(path: str | Path) -> SpecSource:
    """Read and parse a spec file; every failure is a SpecError naming the file."""
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise SpecError(Location(name), "no such spec file") from None
    except OSError as exc:
        raise SpecError(Location(name), f"cannot read the spec: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark (some Windows editors write one) is not content
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(Location(name, line), "the spec is not valid UTF-8") from None
    return parse_source(name, text)


def parse_source(name: str, text: str) -> SpecSource:
    """Parse spec text (already read) into a SpecSource."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POSITION.search(message)
        line, col = (int(match.group(1)), int(match.group(2))) if match else (_last_line(text), 0)
        reason = _TOML_POSITION.sub("", message).replace("(at end of document)", "at the end of the file").strip()
        raise SpecError(Location(name, line, col), f"TOML syntax error: {reason}") from None
    except RecursionError:
        line = _deepest_line(text)
        raise SpecError(Location(name, line), f"TOML nesting is too deep (at most {MAX_TOML_DEPTH} levels)") from None
    except ValueError as exc:  # int() of a number with more digits than Python converts (4300)
        found = _LONG_NUMBER.search(text)
        line = text.count("\n", 0, found.start()) + 1 if found else _last_line(text)
        message = f"an integer is out of range (TOML integers are 64-bit: {TOML_INT_MIN}..{TOML_INT_MAX})"
        if "integer string conversion" not in str(exc):
            message = f"TOML value error: {str(exc)[:200]}"
        raise SpecError(Location(name, line), message) from None
    lines = KeyLines.scan(name, text)
    _check_values(name, data, lines)
    return SpecSource(name, text, data, lines)


def _check_values(name: str, data: dict[str, Any], lines: KeyLines) -> None:
    """Refuse what TOML itself forbids but tomllib lets through (integers beyond 64 bits),
    and nesting deeper than any spec needs, before anything else walks the data."""
    stack: list[tuple[KeyPath, Any, int]] = [((), data, 0)]
    while stack:
        keys, value, depth = stack.pop()
        if depth > MAX_TOML_DEPTH:
            raise SpecError(lines.value_where(keys), f"TOML nesting is too deep (at most {MAX_TOML_DEPTH} levels)")
        if isinstance(value, dict):
            stack.extend(((*keys, k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*keys, i), v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and not TOML_INT_MIN <= value <= TOML_INT_MAX:
            raise SpecError(
                lines.value_where(keys),
                f"an integer is out of range (TOML integers are 64-bit: {TOML_INT_MIN}..{TOML_INT_MAX})",
            )
