"""A built wheel, installed in a fresh virtual environment, runs the main job: the code installs
under `ledgercheck.*` (no top-level `model` or `codegen`), the bundled specs and the templates
ship as package data, and the pytest plugin comes with it.

Slow (a wheel build and an install into a new venv), and it needs the package index that
`pip install` uses; the rest of the suite runs from the editable install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ledger_fixture import ROOT

pytestmark = pytest.mark.slow

PROPERTY = "no_condemnation_by_inherited_streak"


def _run(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "LEDGERCHECK", "VIRTUAL_ENV"))}
    env["LEDGERCHECK_CACHE"] = "off"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (the checkout is left untouched)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for folder in ("model", "codegen", "spec"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(work / "dist"), "."], source)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = (work / "dist").glob("ledgercheck-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """The wheel installed with its dependencies in a new venv; returns the venv's bin folder."""
    venv = wheel.parent.parent / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], wheel.parent)
    assert made.returncode == 0, made.stderr
    bin_dir = venv / "bin"
    done = _run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], wheel.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return bin_dir


def test_the_wheel_holds_one_namespace_and_the_package_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    tops = {name.split("/")[0] for name in names if not name.startswith("ledgercheck-")}
    assert tops == {"ledgercheck"}
    assert "ledgercheck/spec/fleet_health.toml" in names
    assert "ledgercheck/spec/examples/circuitbreaker.toml" in names
    assert "ledgercheck/codegen/templates/test_module.py.j2" in names
    assert "ledgercheck/model/conformance/checker.py" in names
    assert "ledgercheck/__init__.py" not in names  # a namespace: room for other ledgercheck.* parts


def test_the_installed_wheel_checks_the_bundled_spec_from_anywhere(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "ledgercheck"), "check", "--property", PROPERTY], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 mismatch(es), 0 unknown" in done.stdout
    assert f"breaks {PROPERTY}" in done.stdout
    where = _run(
        [str(installed / "python"), "-c", "import ledgercheck.model.spec as s; print(s.DEFAULT_SPEC)"], tmp_path
    )
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout + where.stderr
    for top in ("model", "codegen"):
        probe = _run([str(installed / "python"), "-c", f"import {top}"], tmp_path)
        assert probe.returncode != 0, f"the wheel installs a top-level {top!r}"


def test_the_installed_wheel_generates_tests_that_pass_through_its_plugin(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "generated"
    done = _run([str(installed / "ledgercheck"), "gen", "--out", str(out)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.glob("test_*.py")), done.stdout
    ran = _run([str(installed / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)], tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout
