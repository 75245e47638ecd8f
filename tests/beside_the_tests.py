"""What a repository can put beside the generated tests that changes pytest's account of
them: the texts of `conftest.py` files the tests of `ci` and `codegen.outcomes` write."""

PASS_EVERY_FAILURE = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
"""
"""A hook that turns every failed report into a pass: pytest then says `N passed` and exits 0."""
