"""router/amqp is sans-IO: nothing in it may import asyncio, uvloop, socket or selectors."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = {"asyncio", "uvloop", "socket", "selectors", "threading", "time"}
AMQP = Path(__file__).resolve().parents[2] / "router" / "amqp"


def test_engine_imports_no_io():
    offenders = []
    for path in sorted(AMQP.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            offenders += [f"{path.name}: {n}" for n in names if n in FORBIDDEN]
    assert offenders == []
    assert len(list(AMQP.glob("*.py"))) >= 8  # the check really looked at the engine
