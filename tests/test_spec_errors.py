"""Bad specs are refused with a SpecError that says where (file:line[:col]) and what is wrong.

Each case takes the shipped spec's text, makes one small textual edit and loads the result.
The expected location is computed from the edited text itself: the line (and, where the
error is about a piece of an expression, the column) of a marker inside the new snippet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from ledger_fixture import LEDGER_SPEC
from tiers import fast_slice

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

NAME = "fleet_health.toml"
SPEC = LEDGER_SPEC.read_text(encoding="utf-8")

# Snippets of the shipped spec that several cases edit (each must occur exactly once).
GUARD = 'ignore_when = "state == RETIRED"\nrequires = "state == DEAD"'  # mark_restarting's guards
RETIRE_BODY = 'body = """\nstate = RETIRED\n"""'
# the headline property's expectation, one verdict per variant
HEADLINE_EXPECT = 'did not fail"\nexpect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }'


def guard(expr: str) -> str:
    return f'ignore_when = "{expr}"\nrequires = "state == DEAD"'


def retire_body(*lines: str) -> str:
    return 'body = """\n' + "\n".join(lines) + '\n"""'


@dataclass(frozen=True)
class Bad:
    """One bad spec: replace `old` (unique in the spec) with `new`; the error must point at the
    first occurrence of `at` inside `new` (its line; its column too when `col`) and its
    message must contain every fragment of `says`."""

    old: str
    new: str
    at: str
    says: tuple[str, ...]
    col: bool = True

    def text(self) -> str:
        assert SPEC.count(self.old) == 1, f"snippet not unique in the shipped spec: {self.old!r}"
        assert self.at in self.new, f"marker {self.at!r} is not in the new text"
        return SPEC.replace(self.old, self.new)

    def location(self) -> tuple[int, int]:
        edited = self.text()
        index = SPEC.index(self.old) + self.new.index(self.at)  # the marker's offset in the edited text
        assert edited[index:].startswith(self.at)
        line = edited.count("\n", 0, index) + 1
        col = index - (edited.rfind("\n", 0, index) + 1) + 1
        return line, col


BAD: dict[str, Bad] = {
    # An example written as the bare text it means (a two-phase-commit trial's endpoint)
    "unquoted-text-example": Bad(
        """examples = { reason = '"silent during weight transfer"' }""",
        """examples = { reason = 'tcp://db-1:5432' }""",
        "reason = 'tcp",
        ("is not a Python expression", """a string is quoted inside the TOML string: '"tcp://db-1:5432"'"""),
    ),
    # Hints where a message names what is wrong but not where it belongs (a rollout trial)
    "history-field-read-in-body": Bad(
        RETIRE_BODY,
        retire_body("state = RETIRED", "own_request_streak = own_request_streak + 1"),
        "own_request_streak + 1",
        ("history field 'own_request_streak' cannot be read here", "the event's `history` block"),
    ),
    "count-in-a-shard-property": Bad(
        'when = "before.state != DEAD and after.state == DEAD and after.incarnation > 0"',
        'when = "before.state != DEAD and after.state == DEAD and count(state == DEAD) > 0"',
        "count(",
        ("count() over shards is only allowed", 'says scope = "fleet"'),
    ),
    "patch-anchored-on-an-elif": Bad(
        '[[variants.fixed.patch]]\nevent = "mark_loaded"\nafter = "consecutive_probe_successes = 0"',
        '[[variants.fixed.patch]]\nevent = "mark_loaded"\nafter = "elif state == DEAD:"',
        '"elif state == DEAD:"',
        ("the anchor must be one valid statement of the block", "an `elif` or `else` is part of its `if`"),
    ),
    "patch-of-the-hook": Bad(
        '[[variants.fixed.patch]]\nevent = "mark_loaded"',
        '[[variants.fixed.patch]]\naction = "on_state_change"',
        '"on_state_change"',
        ("not 'on_state_change'", "[variants.fixed.override.on_state_change] body = ..."),
    ),
    # TOML syntax
    "toml-syntax": Bad("default_shards = 4", "default_shards = = 4", "= 4", ("TOML syntax error",)),
    "toml-unterminated-string": Bad(
        'title = "NeMo-RL generation fleet health ledger"',
        'title = "NeMo-RL generation fleet health ledger',
        "title",
        ("TOML syntax error",),
        col=False,
    ),
    # unknown keys (the location is the key's line; the column is the value's start)
    "unknown-top-level-key": Bad(
        "[sets]", "[setz]", "setz", ("unknown key 'setz'", "top level", "did you mean 'sets'?")
    ),
    "unknown-table-key": Bad(
        'api_class = "GenerationFleetHealth"',
        'api_klass = "GenerationFleetHealth"',
        "api_klass",
        ("unknown key 'api_klass' in [spec]", "did you mean 'api_class'?"),
        col=False,
    ),
    "unknown-event-key": Bad(
        "[events.retire]\ncall",
        "[events.retire]\ncal",
        "cal",
        ("unknown key 'cal' in [events.retire]", "did you mean 'call'?"),
        col=False,
    ),
    # unknown names
    "unknown-field-name": Bad(
        "if consecutive_reported_failures >= unhealthy_threshold:",
        "if consecutive_reported_failure >= unhealthy_threshold:",
        "consecutive_reported_failure",
        (
            "event report_failure: body",
            "unknown name 'consecutive_reported_failure'",
            "did you mean 'consecutive_reported_failures'?",
        ),
    ),
    "unknown-field-attribute": Bad(
        'assert = "after.own_request_streak >= unhealthy_threshold',
        'assert = "after.own_request_streek >= unhealthy_threshold',
        "after.own_request_streek",
        ("unknown field 'own_request_streek'", "did you mean 'own_request_streak'?"),
    ),
    "unknown-event-in-on": Bad(
        'on = ["report_failure", "record_probe"]\nwhen = "before.state != DEAD',
        'on = ["report_failur", "record_probe"]\nwhen = "before.state != DEAD',
        '["report_failur"',
        ("unknown event 'report_failur'", "did you mean 'report_failure'?"),
    ),
    "multiplication-named-as-written": Bad(
        "consecutive_reported_failures = consecutive_reported_failures + 1",
        "consecutive_reported_failures = consecutive_reported_failures * 2",
        "consecutive_reported_failures * 2",
        ("only + and - are allowed, not * (linear arithmetic only: double a value as x + x",),
    ),
    "unknown-set-in-body": Bad(
        "if (old in SERVING) != (new in SERVING):",
        "if (old in SERVING) != (new in SERVNG):",
        "SERVNG",
        ("on_state_change", "named state set", "did you mean 'SERVING'?"),
    ),
    "unknown-set-in-query": Bad(
        'serving = { when = "state in SERVING"',
        'serving = { when = "state in SERVNG"',
        "serving",
        ("query serving", "named state set", "did you mean 'SERVING'?"),
        col=False,
    ),  # the column is checked by test_column_inside_inline_table_expression
    "unknown-variant-in-expect": Bad(
        HEADLINE_EXPECT,
        'did not fail"\nexpect = { as_written = "violated", fixd = "holds", refit_keeps_streak = "holds" }',
        "fixd",
        ("unknown variant 'fixd'", "did you mean 'fixed'?"),
    ),
    "expect-missing-a-variant": Bad(
        HEADLINE_EXPECT,
        'did not fail"\nexpect = { as_written = "violated", refit_keeps_streak = "holds" }',
        '{ as_written = "violated", refit_keeps_streak = "holds" }',
        ("property 'no_condemnation_by_inherited_streak'", "no expected verdict for variant 'fixed'", "default"),
    ),
    "expect-unknown-verdict": Bad(
        HEADLINE_EXPECT,
        'did not fail"\nexpect = { as_written = "violated", fixed = "hold", refit_keeps_streak = "holds" }',
        'fixed = "hold"',
        ("verdict of 'fixed'", "'holds' or 'violated'", "did you mean 'holds'?"),
    ),
    "expect-base-in-a-spec-with-variants": Bad(
        HEADLINE_EXPECT,
        'did not fail"\nexpect = { base = "violated", fixed = "holds", refit_keeps_streak = "holds" }',
        'base = "violated"',
        ("unknown variant 'base'", "the spec has as_written, fixed, refit_keeps_streak", "[variants.base]"),
    ),
    "variant-without-expectations": Bad(
        'doc = "PR #3592 head, as written"\n',
        'doc = "PR #3592 head, as written"\n\n[variants.retry]\ndoc = "a third variant"\n',
        "variants.retry",
        ("variant 'retry' has no expected verdict in any property", "no_condemnation_by_inherited_streak"),
    ),
    "variant-with-patches-only-and-no-expectations": Bad(
        'doc = "PR #3592 head, as written"\n',
        'doc = "PR #3592 head, as written"\n\n[[variants.retry.patch]]\n'
        'event = "mark_loaded"\nremove = "state = STALE"\n',
        "variants.retry.patch",
        ("variant 'retry' has no expected verdict in any property",),
    ),
    "variant-named-default": Bad(
        'doc = "PR #3592 head, as written"\n',
        'doc = "PR #3592 head, as written"\n\n[variants.default]\n',
        "variants.default",
        ("'default' cannot name a variant",),
    ),
    # types
    "type-compare-enum-with-int": Bad(
        'requires = "state == DEAD"',
        'requires = "state == 3"',
        "state == 3",
        ("event mark_restarting: requires", "cannot compare ShardState with int"),
    ),
    "type-none-to-int": Bad(
        "weight_version = args.weight_version",
        "weight_version = None",
        "weight_version = None",
        ("event report_refit: body", "weight_version must be int"),
    ),
    "non-boolean-guard": Bad(
        GUARD,
        guard("consecutive_probe_failures + 1"),
        "consecutive_probe_failures + 1",
        ("event mark_restarting: ignore_when", "must be bool, not int"),
    ),
    # who may assign what
    "history-field-in-body": Bad(
        RETIRE_BODY,
        retire_body("state = RETIRED", "own_request_streak = 0"),
        "own_request_streak",
        ("event retire: body", "history field 'own_request_streak' cannot be assigned"),
    ),
    "ledger-field-in-history": Bad(
        'history = """\nown_request_streak = 0\n"""',
        'history = """\nown_request_streak = 0\nrestart_attempts = 0\n"""',
        "restart_attempts",
        ("event report_success: history", "ledger field 'restart_attempts' cannot be assigned"),
    ),
    "argument-in-an-invariant": Bad(
        'assert = "verdict_reads <= 1"',
        'assert = "args.weight_version <= 1"',
        "args.weight_version",
        (
            "read only in an event's own blocks and guards and in a step property",
            "keep it in a history field",
            "last_weight_version = args.weight_version",
        ),
    ),
    "argument-not-every-step-event-takes": Bad(
        'when = "before.state != DEAD and after.state == DEAD and after.incarnation > 0"',
        'when = "before.state != DEAD and after.state == DEAD and args.ok"',
        "args.ok",
        ("the events report_failure, record_probe do not all take, with one type, an argument 'ok'",),
    ),
    "misspelt-field-assigned": Bad(
        RETIRE_BODY,
        retire_body("state = RETIRED", "restart_attempt = 0"),
        "restart_attempt",
        ("event retire: body", "'restart_attempt' is assigned but never read", "did you mean 'restart_attempts'?"),
    ),
    "global-in-event-body": Bad(
        RETIRE_BODY,
        retire_body("state = RETIRED", "membership_epoch = 0"),
        "membership_epoch",
        ("event retire: body", "'membership_epoch' cannot be assigned here", "only in [on_state_change]"),
    ),
    # outside the expression subset
    "call": Bad(GUARD, guard("__import__('os')"), "__import__", ("calls are not allowed", "__import__")),
    "call-statement": Bad(RETIRE_BODY, retire_body("exec('print(1)')"), "exec", ("calls are not allowed",)),
    "attribute-chain": Bad(GUARD, guard("a.b.c"), "a.b.c", ("attribute chains are not allowed",)),
    "subscript": Bad(GUARD, guard("state[0]"), "state[0]", ("a subscript is not allowed",)),
    "lambda": Bad(GUARD, guard("lambda: True"), "lambda", ("a lambda is not allowed",)),
    "comprehension": Bad(GUARD, guard("[x for x in shards]"), "[x for", ("a comprehension is not allowed",)),
    "dunder-name": Bad(GUARD, guard("__builtins__"), "__builtins__", ("'__builtins__' is not allowed",)),
    "import-statement": Bad(
        RETIRE_BODY,
        retire_body("import os", "state = RETIRED"),
        "import os",
        ("event retire: body", "an import is not allowed"),
    ),
    "comparison-for-assignment": Bad(
        RETIRE_BODY,
        retire_body("state == RETIRED"),
        "state == RETIRED",
        ("`state == RETIRED` compares and keeps nothing: an assignment is written `state = RETIRED`",),
    ),
    "bare-expression": Bad(
        RETIRE_BODY,
        retire_body("state = RETIRED", "restart_attempt + 1"),
        "restart_attempt + 1",
        ("`restart_attempt + 1` on its own does nothing in a spec block",),
    ),
    # policy
    "policy-default-above-max": Bad(
        "unhealthy_threshold = { default = 3, min = 1, max = 8 }",
        "unhealthy_threshold = { default = 9, min = 1, max = 8 }",
        "default = 9",
        ("policy unhealthy_threshold", "default 9 is outside [1, 8]"),
    ),
    "policy-default-below-min": Bad(
        "healthy_threshold = { default = 2, min = 1, max = 8 }",
        "healthy_threshold = { default = 2, min = 3, max = 8 }",
        "default = 2",
        ("policy healthy_threshold", "default 2 is outside [3, 8]"),
    ),
    # variants
    "patch-anchor-matches-nothing": Bad(
        'after = "consecutive_probe_successes = 0"',
        'after = "consecutive_probe_successes = 1"',
        '"consecutive_probe_successes = 1"',
        ("no statement", "mark_loaded", "consecutive_probe_successes = 1", "must match exactly one"),
    ),
}


def load_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, NAME)
    return info.value


def test_shipped_spec_loads() -> None:
    spec_file = load_spec_text(SPEC, NAME)
    assert spec_file.variants == ("as_written", "fixed", "refit_keeps_streak")


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_bad_spec_is_refused_with_location(case: Bad) -> None:
    line, col = case.location()
    err = load_error(case.text())
    assert type(err) is SpecError
    assert err.where.path == NAME
    assert err.where.line == line, f"{err} (expected line {line})"
    prefix = f"{NAME}:{line}:{col}: " if case.col else f"{NAME}:{line}"
    assert str(err).startswith(prefix), f"{err} (expected it to start with {prefix!r})"
    if case.col:
        assert err.where.col == col
    for fragment in case.says:
        assert fragment in err.message, f"{fragment!r} not in {err.message!r}"


def test_column_inside_inline_table_expression() -> None:
    case = BAD["unknown-set-in-query"]
    edited = case.text()
    line = edited[: edited.index('"state in SERVNG"')].count("\n") + 1
    col = edited.split("\n")[line - 1].index("SERVNG") + 1
    err = load_error(edited)
    assert (err.where.line, err.where.col) == (line, col)


def _drop_last_triple_quote(text: str) -> str:
    end = text.rindex('"""')
    return text[:end] + text[end + 3 :]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_drop_last_triple_quote, id="unterminated-last-string"),
        pytest.param(lambda text: text + "\nextra =", id="missing-value-at-end"),
    ],
)
def test_toml_error_at_end_of_document_names_a_line(edit: object) -> None:
    assert callable(edit)
    edited = edit(SPEC)
    err = load_error(edited)
    assert re.match(rf"{re.escape(NAME)}:\d+", str(err)), str(err)
    assert 1 <= err.where.line <= edited.count("\n") + 1


# --- nothing but SpecError ever escapes the loader ---------------------------------------


def _garbage() -> dict[str, str]:
    return {
        "empty": "",
        "nul": "\x00",
        "open-header": "[spec",
        "deep-toml": "a = " + "[" * 3000 + "]" * 3000,
        "deep-expression": SPEC.replace(GUARD, guard("(" * 200 + "True" + ")" * 200)),
        "long-sum": SPEC.replace(GUARD, guard(" + ".join(["1"] * 3000) + " == 1")),
        "long-not": SPEC.replace(GUARD, guard("not " * 3000 + "True")),
        "huge-int": SPEC.replace(GUARD, guard("restart_attempts == 99999999999999999999999")),
        "float": SPEC.replace(GUARD, guard("restart_attempts == 1.5")),
        "bytes": SPEC.replace(GUARD, guard("b'x' == b'y'")),
        "walrus": SPEC.replace(GUARD, guard("(x := 1)")),
        "multiply": SPEC.replace(GUARD, guard("restart_attempts * 2 == 1")),
        "while": SPEC.replace(RETIRE_BODY, retire_body("while True:", "    pass")),
        "def": SPEC.replace(RETIRE_BODY, retire_body("def f():", "    pass")),
        "bad-indent": SPEC.replace(RETIRE_BODY, retire_body("state = RETIRED", "  state = DEAD")),
        "str-for-int": SPEC.replace("default_shards = 4", 'default_shards = "4"'),
        "huge-shards": SPEC.replace("default_shards = 4", "default_shards = 4000000000000000000000"),
        "members-int": SPEC.replace(
            'members = ["HEALTHY", "SUSPECT", "DEAD", "RESTARTING", "STALE", "RETIRED"]', "members = 5"
        ),
        "on-int": SPEC.replace('on = ["report_failure", "record_probe"]', "on = [1]"),
        "unknown-patch-event": SPEC.replace('event = "mark_loaded"', 'event = "mark_loadd"'),
        "unsafe-example": SPEC.replace(
            """examples = { error = 'RuntimeError("generation failed")' }""",
            """examples = { error = '__import__("os")' }""",
        ),
    }


def _assert_only_spec_error(text: str, label: str) -> None:
    try:
        load_spec_text(text, NAME)
    except SpecError as err:
        assert type(err) is SpecError, label
        assert str(err).startswith(NAME), f"{label}: {err}"
        assert err.message, label
    except BaseException as exc:  # the point is to catch anything that leaks
        pytest.fail(f"{label}: the loader leaked {type(exc).__name__}: {exc}")


def test_loader_raises_only_spec_error_for_every_bad_case() -> None:
    for name, case in BAD.items():
        _assert_only_spec_error(case.text(), name)
    for name, text in _garbage().items():
        _assert_only_spec_error(text, name)


# The sweeps over the whole spec below are split into SLICES interleaved slices (every
# SLICES-th line or cut, from `offset`): the fast lane runs one slice, the full suite all.
SLICES = 16


@pytest.mark.parametrize("offset", fast_slice(range(SLICES)))
def test_loader_raises_only_spec_error_when_any_line_is_deleted(offset: int) -> None:
    lines = SPEC.split("\n")
    for index, line in enumerate(lines):
        if index % SLICES != offset or not line.strip() or line.lstrip().startswith("#"):
            continue
        _assert_only_spec_error("\n".join(lines[:index] + lines[index + 1 :]), f"without line {index + 1}: {line!r}")


@pytest.mark.parametrize("offset", fast_slice(range(SLICES)))
def test_loader_raises_only_spec_error_when_truncated(offset: int) -> None:
    for end in range(53 * offset, len(SPEC), 53 * SLICES):
        _assert_only_spec_error(SPEC[:end], f"truncated at {end}")


# The fast lane substitutes the rarest word (7 places); the full suite every one.
@pytest.mark.parametrize("word", fast_slice(["state", "SERVING", "DEAD", "args", "0", "HEALTHY"], keep=[3]))
def test_loader_raises_only_spec_error_for_token_substitutions(word: str) -> None:
    lines = SPEC.split("\n")
    pattern = re.compile(rf"\b{re.escape(word)}\b")
    for index, line in enumerate(lines):
        for match in pattern.finditer(line):
            for token in ("None", "x.y", "(", "1 + True"):
                edited = line[: match.start()] + token + line[match.end() :]
                _assert_only_spec_error(
                    "\n".join(lines[:index] + [edited] + lines[index + 1 :]), f"line {index + 1}: {edited!r}"
                )
