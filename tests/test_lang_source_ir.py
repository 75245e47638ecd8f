"""Unit tests of the spec language's three lowest layers, each through its public API:
`model.source` (TOML with key positions), `model.lang` (expressions and blocks compiled to
IR, with errors at the user's line and column) and `model.ir` (the IR and its walks)."""

from __future__ import annotations

import pytest

from ledgercheck.model import ir
from ledgercheck.model.errors import Location, SpecError
from ledgercheck.model.lang import Scope, compile_block, compile_expr
from ledgercheck.model.source import parse_source

# --- source --------------------------------------------------------------------------------

SPEC_TEXT = """\
name = "toy"

[fields]
streak = { type = "int", initial = 0 }

[events.fail]
body = '''
streak = streak + 1
'''

[[variants.fixed.patch]]
event = "fail"
"""


def test_source_maps_every_key_path_to_where_it_was_written() -> None:
    source = parse_source("toy.toml", SPEC_TEXT)
    assert source.data["fields"]["streak"]["initial"] == 0
    assert source.where("name") == Location("toy.toml", 1, 8)  # where the value starts
    assert source.where("fields", "streak").line == 4
    assert source.where("events", "fail", "body").line == 7
    # The longest prefix written explicitly: an unwritten key points at its table.
    assert source.where("events", "fail", "guard").line == 6
    # Arrays of tables are indexed.
    assert source.where("variants", "fixed", "patch", 0, "event").line == 12


def test_source_errors_name_the_file_line_and_column() -> None:
    with pytest.raises(SpecError) as caught:
        parse_source("bad.toml", 'name = "x"\nfields = [\n')
    assert caught.value.where.path == "bad.toml"
    assert caught.value.where.line >= 2
    assert "TOML syntax error" in str(caught.value)


def test_source_refuses_integers_toml_cannot_hold() -> None:
    with pytest.raises(SpecError, match="out of range"):
        parse_source("big.toml", f"x = {2**64}\n")


def test_source_error_points_at_the_key() -> None:
    source = parse_source("toy.toml", SPEC_TEXT)
    error = source.error(("fields", "streak"), "not a good field")
    assert (error.where.line, str(error).endswith("not a good field")) == (4, True)


# --- lang ----------------------------------------------------------------------------------


def scope(**overrides: object) -> Scope:
    values: dict[str, object] = dict(
        where=lambda line, col: Location("toy.toml", 10 + line, col + 1),
        context="event fail",
        fields={"streak": (ir.INT, "ledger"), "dead": (ir.BOOL, "ledger")},
        globals={},
        policy=frozenset({"threshold"}),
        enum_members={},
        enums={},
        sets={},
        queries={},
        writable_fields=frozenset({"streak"}),
    )
    values.update(overrides)
    return Scope(**values)  # type: ignore[arg-type]


def test_lang_compiles_arithmetic_and_comparison_to_ir() -> None:
    expr = compile_expr("streak + 1 >= threshold", scope(), ir.BOOL)
    assert isinstance(expr, ir.Compare) and expr.op == ">="
    assert isinstance(expr.left, ir.Arith) and expr.left.op == "+"
    assert expr.left.left == ir.FieldRef("streak", "self", None, ir.INT)
    assert expr.right == ir.PolicyRef("threshold")
    assert expr.type == ir.BOOL


def test_lang_compiles_a_block_of_statements() -> None:
    body = compile_block("if not dead:\n    streak = streak + 1\n", scope())
    (statement,) = body
    assert isinstance(statement, ir.If)
    assert isinstance(statement.cond, ir.Not)
    (assign,) = statement.then
    assert isinstance(assign, ir.Assign) and (assign.name, assign.kind) == ("streak", "field")


def test_lang_rejects_a_type_error_at_the_users_position() -> None:
    with pytest.raises(SpecError) as caught:
        compile_expr("streak + dead", scope(), ir.INT)
    assert caught.value.where.path == "toy.toml"
    assert caught.value.where.line == 11  # line 1 of the text, as `where` maps it
    assert "event fail" in str(caught.value)


def test_lang_rejects_unknown_names_and_writes_to_read_only_fields() -> None:
    with pytest.raises(SpecError, match="strek"):
        compile_expr("strek > 0", scope(), ir.BOOL)
    with pytest.raises(SpecError):
        compile_block("dead = True\n", scope())


def test_lang_only_parses_never_runs_the_text() -> None:
    with pytest.raises(SpecError):
        compile_expr("__import__('os').system('true')", scope(), ir.BOOL)


# --- ir ------------------------------------------------------------------------------------


def test_ir_types_print_as_written() -> None:
    assert str(ir.INT) == "int"
    assert str(ir.Type("enum", "State", optional=True)) == "State | None"
    assert ir.Type("int", optional=True).without_none() == ir.INT


def test_ir_field_reads_leave_out_a_field_read_only_to_update_itself() -> None:
    body = compile_block("streak = streak + 1\nif dead:\n    streak = 0\n", scope())
    assert ir.field_reads(body) == {"dead"}


def test_ir_walk_visits_every_node_and_fleet_wide_finds_shard_loops() -> None:
    expr = compile_expr("streak + 1 >= threshold", scope(), ir.BOOL)
    kinds = {type(node).__name__ for node in ir.walk(expr)}
    assert kinds == {"Compare", "Arith", "FieldRef", "Const", "PolicyRef"}
    assert not ir.fleet_wide(expr)
    loop = (ir.ForShards("s", (ir.Pass(1),), 1, "for s in shards:"),)
    assert ir.fleet_wide(loop)
