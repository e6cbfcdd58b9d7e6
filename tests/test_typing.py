"""``mypy --strict`` over the typed modules: a module on ``STRICT`` stays strict-clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Paths from the repository root. A module goes on once it passes; it stays strict-clean.
STRICT = [
    *sorted(f"router/core/{p.name}" for p in (Path(__file__).resolve().parents[1] / "router" / "core").glob("*.py")),
    *sorted(f"records/{p.name}" for p in (Path(__file__).resolve().parents[1] / "records").glob("*.py")),
    *sorted(f"router/mqtt/{p.name}" for p in (Path(__file__).resolve().parents[1] / "router" / "mqtt").glob("*.py")),
    # (the outbox's own modules; its relay stands on the client library, not typed strictly yet)
    "client/outbox/__init__.py",
    "client/outbox/dialect.py",
    "client/outbox/schema.py",
    "client/outbox/send.py",
    "client/outbox/identity.py",
    "client/outbox/claims.py",
    "outbox/__init__.py",
    "outbox/watch.py",
    "outbox/wakeup.py",
    "router/adaptors/mqtt/sessions.py",
    "router/adaptors/mqtt/message.py",
    "router/amqp/types.py",
    "router/amqp/codec.py",
    "router/amqp/decoder.py",
    "router/amqp/encoder.py",
    "router/amqp/frames.py",
    "router/amqp/transfer.py",
    # (checked in any case: the ones above import them, and mypy reports what it follows)
    "router/amqp/errors.py",
    "router/amqp/performatives.py",
    # the engine's state layers and the AMQP adaptors: every compiled module is here too
    *(f"router/amqp/{m}.py" for m in ("connection", "connection_state", "shared", "negotiation", "sessions", "links",
                                      "deliveries", "endpoints", "events", "sasl")),
    *sorted(f"router/adaptors/amqp/{p.name}" for p in (Path(__file__).resolve().parents[1] / "router" / "adaptors"
                                                       / "amqp").glob("*.py")),
    "router/network.py",
    "router/leaving.py",
    # the simulator: the production core and network under virtual time and faults
    *sorted(f"sim/{p.name}" for p in (Path(__file__).resolve().parents[1] / "sim").glob("*.py")),
    "tools/procs.py",
    "tools/sim_cli.py",
]

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("router", "linkstate", "records", "client", "outbox", "sim", "tools", "topologies")  # setup.py's


def _module(path: str) -> str:
    parts = ["once", *Path(path).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_the_typed_modules_pass_mypy_strict(tmp_path: Path) -> None:
    """mypy checks the modules under their installed names (``once.router.amqp.types``).

    The code imports itself as ``once.*``, a name only setup.py's mapping makes: the
    editable install provides it through an import hook, which mypy does not run (and
    which leads to whatever checkout is installed, not necessarily this one). Given as
    files, the modules would be checked as ``router.amqp.types``: enough for those that
    import relatively, but a module importing ``once.*`` would then find nothing, or one
    file under two names (two distinct types). So, as ``once bench --compare`` does for
    another checkout, the rooms are linked under a temporary ``once/`` on mypy's search
    path and the modules named with ``-m``. cwd is the root for pyproject's [tool.mypy].
    """
    tree = tmp_path / "tree"
    (tree / "once").mkdir(parents=True)
    for room in ROOMS:
        (tree / "once" / room).symlink_to(ROOT / room)
    modules = [arg for path in STRICT for arg in ("-m", _module(path))]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *modules],
        cwd=ROOT, env=dict(os.environ, MYPYPATH=str(tree)), capture_output=True, text=True, timeout=300,
    )
    output = (result.stdout + result.stderr).replace(f"{tree / 'once'}{os.sep}", "")  # paths from the root
    assert result.returncode == 0, f"mypy --strict failed:\n{output}"


def _compiled() -> list[str]:
    """setup.py's ``COMPILED`` (its module level also runs ``setup()``: only the assignment
    is evaluated here)."""
    source = (ROOT / "setup.py").read_text()
    names: dict[str, object] = {"ROOT": ROOT}
    exec(source[source.index("COMPILED = ("):source.index("MANIFEST =")], names)  # noqa: S102
    return list(names["COMPILED"])  # type: ignore[call-overload]


def test_the_compiled_modules_pass_the_type_check_mypyc_makes(tmp_path: Path) -> None:
    """mypyc type-checks the data path before it compiles it, and a module it refuses makes
    the whole install fall back to pure Python, quietly (the install never fails for it).
    A `str(err.condition)` on an ``Error | None`` once did that: every test passed, on pure
    Python. The same check here fails instead."""
    tree = tmp_path / "tree"
    (tree / "once").mkdir(parents=True)
    (tree / "once" / "__init__.py").write_text("")
    for room in ROOMS:
        (tree / "once" / room).symlink_to(ROOT / room)
    files = [str(tree / "once" / p) for p in _compiled()]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--cache-dir", str(tmp_path / "cache"), *files],
        cwd=tree, capture_output=True, text=True, timeout=300,
    )
    output = (result.stdout + result.stderr).replace(f"{tree / 'once'}{os.sep}", "")
    assert result.returncode == 0, f"mypy (as mypyc runs it) failed:\n{output}"


def test_every_compiled_module_is_on_the_strict_list() -> None:
    """What is compiled is checked strictly: the annotations mypyc builds the C from are
    the checked ones."""
    assert set(_compiled()) - set(STRICT) == set()
