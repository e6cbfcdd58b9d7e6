"""Replay simulator schedules exactly as ``once sim --seed N`` does: in one subprocess
under the sweeps' hash seed (``PYTHONHASHSEED=0``; some schedules take another course
under another one), against the installed simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def replay(script: str, cases: list[Any]) -> dict[str, list[str]]:
    """Run ``script``, which reads ``cases`` as JSON from its first argument and prints a
    JSON mapping of each case's name to its verdict's violations as its last line."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(cases)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, list[str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
