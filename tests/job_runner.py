"""A small job runner with a retry cap, as a spec and a plain class (python-statemachine
trial, rewritten without the library): `job_class(**bugs)` is the class with a guard of
`retry` or `give_up` replaced. Shared by the tests of what finds a wrong guard
(`test_retry_cap.py`) and of ci on a spec that names its own class (`test_ci.py`)."""

from __future__ import annotations

SPEC = """\
[spec]
name = "jobs"
api_class = "Job"
state_field = "state"
default_shards = 1

[enums.JobState]
members = ["QUEUED", "RUNNING", "FAILED", "RETRYING", "DONE", "GAVE_UP"]

[policy]
max_retries = { default = 3, min = 3, max = 3 }

[fields]
state = { type = "JobState", initial = "QUEUED" }
retries = { type = "int", initial = 0 }

[events.start]
call = "start(i)"
raises = [{ when = "state != QUEUED and state != RETRYING", error = "ValueError" }]
body = "state = RUNNING"

[events.fail]
call = "fail(i)"
raises = [{ when = "state != RUNNING", error = "ValueError" }]
body = "state = FAILED"

[events.retry]
call = "retry(i)"
raises = [{ when = "state != FAILED or retries >= max_retries", error = "ValueError" }]
body = \"\"\"
retries = retries + 1
state = RETRYING
\"\"\"

[events.finish]
call = "finish(i)"
raises = [{ when = "state != RUNNING and state != FAILED", error = "ValueError" }]
body = "state = DONE"

[events.give_up]
call = "give_up(i)"
raises = [{ when = "state != FAILED or retries < max_retries", error = "ValueError" }]
body = "state = GAVE_UP"

[environments.ledger]
any_call = true

[properties.retries_are_capped]
kind = "invariant"
assert = "retries <= max_retries"
expect = { base = "holds" }

[properties.gives_up_only_after_the_cap]
kind = "step"
on = ["give_up"]
when = "after.state == GAVE_UP"
assert = "after.retries >= max_retries"
expect = { base = "holds" }

[implementation]
construct = { max_retries = "max_retries" }
instances = "indexed"

[implementation.fields]
state = "state"
retries = "retries"
"""

CLASS = """\
class Job:
    def __init__(self, max_retries):
        self.max_retries = max_retries
        self.state = "QUEUED"
        self.retries = 0

    def _move(self, allowed, target):
        if self.state not in allowed:
            raise ValueError(f"{self.state} -> {target}")
        self.state = target

    def start(self, i):
        self._move(("QUEUED", "RETRYING"), "RUNNING")

    def fail(self, i):
        self._move(("RUNNING",), "FAILED")

    def retry(self, i):
        if RETRY_REFUSED:
            raise ValueError("no retries left")
        self._move(("FAILED",), "RETRYING")
        self.retries += 1

    def finish(self, i):
        self._move(("RUNNING", "FAILED"), "DONE")

    def give_up(self, i):
        if GIVE_UP_REFUSED:
            raise ValueError("retries left")
        self._move(("FAILED",), "GAVE_UP")
"""

CORRECT = {"RETRY_REFUSED": "self.retries >= self.max_retries", "GIVE_UP_REFUSED": "self.retries < self.max_retries"}


def job_class(**bugs: str) -> str:
    """The class's source, each guard named in `bugs` replaced by the condition given."""
    text = CLASS
    for name, condition in {**CORRECT, **bugs}.items():
        text = text.replace(name, condition)
    return text
