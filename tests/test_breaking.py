"""A person sees the bug at a glance: the breaking step marked in every format, the fields
that matter first, `persistent` fields not flagged as held over, `replay`'s verdicts.

Most tests replay the seed's scenario (the trace the seed found by hand) on the pinned spec.
"""

from __future__ import annotations

import pytest

from model.figure import INHERITED, figure_of
from model.spec import Spec, SpecFile, load_spec
from model.trace import Trace, parse_action_call, replay

HEADLINE = "no_condemnation_by_inherited_streak"


@pytest.fixture(scope="module")
def spec_file() -> SpecFile:
    return load_spec()


def seed_trace(spec: Spec) -> Trace:
    scenario = spec.scenarios["seed"]
    env = spec.environment(scenario.environment)
    steps = [parse_action_call(text, env) for text in scenario.steps]
    return replay(spec, env, scenario.shards or spec.default_shards, spec.resolve_policy(), steps, scenario.focus)


def row_marks(spec: Spec, trace: Trace, name: str) -> str:
    figure = figure_of(trace, spec)
    row = next(r for r in figure.rows if r.name == name)
    return "".join(c.mark for c in row.cells)


def test_a_persistent_field_is_not_flagged_as_held_over(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    assert next(f for f in spec.fields if f.name == "restart_attempts").persistent
    trace = seed_trace(spec)
    assert INHERITED not in row_marks(spec, trace, "restart_attempts")
    assert INHERITED in row_marks(spec, trace, "consecutive_reported_failures")
