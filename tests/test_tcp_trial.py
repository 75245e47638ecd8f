"""What a TCP trial let through (a connection's handshake and its counters). A class that
stopped counting handshakes at five passed `ci`: the trace to ESTABLISHED ends there, and
repeated it does nothing, while the cycle that counts is that trace and a reset, four calls a
round. A class that kept its data counter in a byte passed too: a run climbs a hundred calls,
the byte wraps at 256. The long runs now close each trace to a branch with the call that takes
it back to where it began (but for the numbers that grew), and repeat the last call of a trace
that ends in a count to 300 calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiers import fast_slice

from ledgercheck.model.cli import main
from ledgercheck.model.conformance.sources import COUNTING_CALLS, branch_scripts, run_scripts
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "tcp"
api_class = "Stack"
state_field = "state"
default_shards = 1

[enums.TcpState]
members = ["CLOSED", "LISTEN", "SYN_RECEIVED", "ESTABLISHED"]
api_values = "lower"

[fields]
state = { type = "TcpState", initial = "CLOSED" }
established_count = { type = "int", initial = 0 }
bytes_received = { type = "int", initial = 0 }

[history.fields]
via_syn_received = { type = "bool", initial = false }

[events.passive_open]
call = "passive_open(i)"
ignore_when = "state != CLOSED"
body = "state = LISTEN"

[events.recv_syn]
call = "recv_syn(i)"
ignore_when = "state != LISTEN"
body = "state = SYN_RECEIVED"
history = "via_syn_received = True"

[events.recv_ack]
call = "recv_ack(i)"
ignore_when = "state != SYN_RECEIVED"
body = \"\"\"
state = ESTABLISHED
established_count = established_count + 1
\"\"\"

[events.recv_data]
call = "recv_data(i)"
ignore_when = "state != ESTABLISHED"
body = "bytes_received = bytes_received + 1"

[events.reset]
call = "reset(i)"
body = "state = CLOSED"

[environments.ledger]
any_call = true

[properties.established_is_counted]
kind = "step"
on = ["recv_ack"]
when = "before.state == SYN_RECEIVED"
assert = "after.established_count == before.established_count + 1"
expect = { base = "holds" }

[implementation]
target = "stack.py:Stack"
instances = "indexed"
construct = { n = "instances" }

[implementation.fields]
state = "state_of(index)"
established_count = "conns[index].established"
bytes_received = "conns[index].received"
"""

CLASS = """\
class Conn:
    def __init__(self):
        self.state, self.established, self.received = "closed", 0, 0


class Stack:
    def __init__(self, n):
        self.conns = [Conn() for _ in range(n)]

    def state_of(self, i):
        return self.conns[i].state

    def passive_open(self, i):
        if self.conns[i].state == "closed":
            self.conns[i].state = "listen"

    def recv_syn(self, i):
        if self.conns[i].state == "listen":
            self.conns[i].state = "syn_received"

    def recv_ack(self, i):
        c = self.conns[i]
        if c.state == "syn_received":
            c.state = "established"
            c.established = COUNTED

    def recv_data(self, i):
        c = self.conns[i]
        if c.state == "established":
            c.received = RECEIVED

    def reset(self, i):
        self.conns[i].state = "closed"
"""

CLEAN = {"COUNTED": "c.established + 1", "RECEIVED": "c.received + 1"}
BUGS = {
    "handshakes counted up to five": {**CLEAN, "COUNTED": "min(c.established + 1, 5)"},
    "data counted in a byte": {**CLEAN, "RECEIVED": "(c.received + 1) % 256"},
}


def _stack(folder: Path, values: dict[str, str]) -> str:
    source = CLASS
    for word, value in values.items():
        source = source.replace(word, value)
    (folder / "stack.py").write_text(source)
    return f"{folder / 'stack.py'}:Stack"


def test_the_runs_close_a_trace_with_the_call_that_takes_it_back_and_count_a_counting_call_on() -> None:
    spec_file = load_spec_text(SPEC, "tcp.toml")
    spec = spec_file.variant()
    traces = branch_scripts(spec_file, spec, spec.default_policy()).every
    sources = [s.source for s in run_scripts(spec, spec.default_policy(), 0, traces)]
    # the handshake's trace ends in ESTABLISHED; a reset takes it back to CLOSED (its count
    # grew, and the history flag the spec keeps is no state of the class's)
    handshake = next(t for t in traces if [c.event for c in t.calls] == ["passive_open", "recv_syn", "recv_ack"])
    assert f"{handshake.source}, then reset repeated 33 times" in sources
    data = next(t for t in traces if t.calls[-1].event == "recv_data")
    more = COUNTING_CALLS - len(data.calls)
    assert f"{data.source}, then its last call repeated {more} times" in sources
    # a trace that ends where it began (a reset at the start) is repeated as it is, not closed
    assert not any(s.endswith("then reset, then reset repeated 33 times") for s in sources)


@pytest.mark.parametrize("bug", fast_slice(list(BUGS)))
def test_a_count_a_class_stops_or_wraps_is_found_by_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bug: str
) -> None:
    (tmp_path / "tcp.toml").write_text(SPEC)
    args = ["conform", str(tmp_path / "tcp.toml"), "--jobs", "1", "--random", "0", "--no-policies"]
    assert main([*args, "--impl", _stack(tmp_path, CLEAN)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    (tmp_path / "bug").mkdir()
    assert main([*args, "--impl", _stack(tmp_path / "bug", BUGS[bug])]) == 1
    out = capsys.readouterr().out
    found = "then reset repeated 33 times" if "five" in bug else "then its last call repeated"
    assert "(found by a long run: " in out and found in out, out
