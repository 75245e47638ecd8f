"""The layering the README's "Architecture" section draws, checked on the source: no import
cycles among the modules of `model/` and `codegen/`, and nothing below the commands layer
imports it (`model.cli` is the commands layer: argparse for every command, dispatch)."""

from __future__ import annotations

import ast
from pathlib import Path

from ledger_fixture import ROOT

PACKAGES = ("model", "codegen")  # the folders, installed as ledgercheck.model and ledgercheck.codegen
COMMANDS = "ledgercheck.model.cli"


OURS = tuple(f"ledgercheck.{package}" for package in PACKAGES)


def _ours(module: str) -> bool:
    return module.split(".")[:2] in ([*o.split(".")] for o in OURS)


def module_name(path: Path) -> str:
    parts = ("ledgercheck", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, deferred: bool) -> set[str]:
    """The project modules a file imports: at load time only, or (`deferred`) anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # imports for the type checker only never run
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node.body = []
    nodes = ast.walk(tree) if deferred else iter(tree.body)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in OURS:
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
            elif _ours(node.module):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if _ours(alias.name)}
    return found


def graph(deferred: bool) -> dict[str, set[str]]:
    files = [f for package in PACKAGES for f in sorted((ROOT / package).rglob("*.py"))]
    return {module_name(f): imports(f, deferred) for f in files}


def cycles(edges: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """Every elementary cycle's set of modules, as a sorted tuple (one entry per loop)."""
    found: set[tuple[str, ...]] = set()

    def visit(node: str, path: list[str]) -> None:
        for target in sorted(edges.get(node, ())):
            if target == path[0]:
                found.add(tuple(sorted(path)))
            elif target not in path and target > path[0]:
                visit(target, [*path, target])

    for start in sorted(edges):
        visit(start, [start])
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b", "c")}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_no_module_imports_another_that_imports_it_back_at_load_time() -> None:
    assert cycles(graph(deferred=False)) == set()


def test_deferred_imports_close_no_loop_either() -> None:
    """An import inside a function runs only when it is called, so it cannot deadlock a
    module's loading; it still ties two layers together both ways, and is not allowed to."""
    assert cycles(graph(deferred=True)) == set()


def test_nothing_below_the_commands_imports_them() -> None:
    importers = {name for name, targets in graph(deferred=True).items() if COMMANDS in targets}
    assert importers == set(), importers


def test_every_option_of_every_command_has_help() -> None:
    import argparse

    from ledgercheck.model.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not action.help
    ]
    assert missing == []
