"""The two builds: the compiled data path (``pip install .``, setup.py) and pure Python.

The suite runs on whichever build is installed: compiled after the README's test command,
pure Python after an editable install. These tests hold the other build to the same
behaviour: under a compiled install, the pure unit tests run again in pure Python
(``ONCE_PURE=1``), and the simulator gives the same runs, event for event, in both.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from once.records.compiled import MANIFEST, MODE, decide
from support.routers import RouterProcess, write_topology

TESTS = Path(__file__).resolve().parent
COMPILED = pytest.mark.skipif(not MODE.compiled, reason=f"this install runs pure Python ({MODE.why}): "
                              "the whole suite is the pure-Python run")
# The pure unit tests: the records, the link-state service, the AMQP engine and codecs,
# the core and its adaptors' pure parts (no sockets, no processes).
PURE_UNITS = ("records", "linkstate", "amqp", "router")


def _python(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env}, cwd=TESTS)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_router_logs_which_build_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = RouterProcess(write_topology(tmp_path))
    expected = "compiled data path (mypyc, " if MODE.compiled else "pure Python ("
    assert any(f"router A: {expected}" in line for line in r.stderr_lines()), r.logged
    monkeypatch.setenv("ONCE_PURE", "1")
    r = RouterProcess(write_topology(tmp_path))
    lines = r.stderr_lines()
    why = "ONCE_PURE is set" if MODE.compiled else MODE.why
    assert any(f"router A: pure Python ({why})" in line for line in lines), r.logged


@COMPILED
def test_a_compiled_install_runs_every_compiled_module_as_an_extension_and_keeps_them_under_once() -> None:
    import json

    modules = json.loads(MANIFEST.read_text())["modules"]
    assert "once.router.core.facade" in modules and "once.records.table" in modules
    for name in modules:
        assert importlib.import_module(name).__file__.endswith(".so"), name  # type: ignore[union-attr]
    # (mypyc's shared library too: nothing of ours at the top of site-packages)
    # (the installed distribution's record, found beside the package: the checkout's own
    # once.egg-info, on the path from the working directory, is not the install)
    (info,) = MANIFEST.parent.parent.parent.glob("once-*.dist-info")
    dist = importlib.metadata.Distribution.at(info)
    tops = {str(f).split("/")[0] for f in dist.files or () if not str(f).startswith("..")}
    assert tops == {"once", info.name}, tops
    files = _python("import json, sys\nfrom once.records.compiled import MODE, MANIFEST\n"
                    "names = json.loads(MANIFEST.read_text())['modules']\n"
                    "for n in names: __import__(n)\n"
                    "print(MODE.line(), all(sys.modules[n].__file__.endswith('.py') for n in names))", ONCE_PURE="1")
    assert files == "pure Python (ONCE_PURE is set) True"


@COMPILED
def test_every_compiled_module_can_be_the_first_one_imported() -> None:
    """Each in a fresh interpreter: a compiled class whose field names a class its module
    imported only for the type checker crashed the interpreter (SIGSEGV) when that module
    was the first to load (``once bench memory`` imported the engine's events first)."""
    import json

    modules = json.loads(MANIFEST.read_text())["modules"]
    procs = {m: subprocess.Popen([sys.executable, "-c", f"import {m}"], cwd=TESTS, stderr=subprocess.PIPE, text=True)
             for m in modules}
    ended = {m: (p.communicate(timeout=60)[1], p.returncode) for m, p in procs.items()}
    assert not {m: (code, err[-300:]) for m, (err, code) in ended.items() if code != 0}


@COMPILED
def test_an_installed_source_edited_after_the_build_runs_as_source_not_the_old_extension(tmp_path: Path) -> None:
    """The stale-extension trap: the extension would run code the source no longer says."""
    installed = MANIFEST.parent.parent  # once/
    copy = tmp_path / "site" / "once"
    shutil.copytree(installed, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for lib in installed.glob("data_path__mypyc*.so"):  # (the group's library: copied with the package)
        assert (copy / lib.name).exists()
    edited = copy / "router" / "core" / "credit.py"
    edited.write_text(edited.read_text() + "\nEDITED = True\n")
    out = _python("from once.records.compiled import MODE\nimport once.router.core.credit as c\n"
                  "print(MODE.line())\nprint(c.__file__, c.EDITED)", PYTHONPATH=str(tmp_path / "site"))
    line, module = out.splitlines()
    assert line == f"pure Python ({edited} changed since it was compiled: running the source)"
    assert module == f"{edited} True"


@COMPILED
def test_the_pure_unit_tests_pass_in_pure_python() -> None:
    run = subprocess.run(
        [sys.executable, "-c", "import sys, pytest\nfrom once.records.compiled import MODE\n"
         "assert not MODE.compiled, MODE\nsys.exit(pytest.main(sys.argv[1:]))",
         "-q", "-p", "no:cacheprovider", "-x", "-n", "0", *PURE_UNITS],
        cwd=TESTS, env={**os.environ, "ONCE_PURE": "1"}, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-500:]


@COMPILED
@pytest.mark.parametrize("kind", [(), ("--groups",), ("--hard",)], ids=["plain", "groups", "hard"])
def test_the_simulator_runs_alike_in_both_builds(kind: tuple[str, ...]) -> None:
    """Deterministic runs, digested (every event count, end time, fault log line and
    violation): one behaviour, whichever build runs the core."""
    seeds = {(): "0:150", ("--groups",): "0:60", ("--hard",): "0:15"}[kind]

    def digest(pure: str) -> str:
        out = subprocess.run([sys.executable, "-m", "once.sim.schedules", "--seeds", seeds, "--fingerprint", *kind],
                             cwd=TESTS, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "ONCE_PURE": pure, "PYTHONHASHSEED": "0"})
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert digest("1") == digest("0")


def test_the_build_is_decided_from_the_manifest_the_environment_and_the_sources(tmp_path: Path) -> None:
    import hashlib
    import json

    package = tmp_path / "once"
    (package / "records").mkdir(parents=True)
    source = package / "records" / "table.py"
    source.write_text("X = 1\n")
    assert decide({}, package)[0].why == "an editable or source install: nothing compiled"
    manifest = package / "records" / "compiled.json"
    manifest.write_text(json.dumps({"modules": {}, "reason": "no compiled modules (CompileError: no gcc)"}))
    assert decide({}, package)[0].line() == "pure Python (no compiled modules (CompileError: no gcc))"
    manifest.write_text(json.dumps({"modules": {"once.records.table": hashlib.sha256(b"X = 1\n").hexdigest()}}))
    mode, sources = decide({}, package)
    assert mode.compiled and mode.line() == "compiled data path (mypyc, 1 module)" and not sources
    assert decide({"ONCE_PURE": "0"}, package)[0].compiled
    mode, sources = decide({"ONCE_PURE": "1"}, package)
    assert mode.why == "ONCE_PURE is set" and list(sources) == ["once.records.table"]
    source.write_text("X = 2\n")
    mode, sources = decide({}, package)
    assert not mode.compiled and "changed since it was compiled" in mode.why and list(sources) == ["once.records.table"]
    manifest.write_text("{")
    assert decide({}, package)[0].why.startswith("unreadable ")
