"""A client that is not Python: rhea (Node.js) against a live router.

rhea without a username sends the bare AMQP header (no SASL layer); with one it does
SASL PLAIN. Both must work. rhea is installed from npm into tests/js on first use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[1] / "js"

pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                                reason="Node.js is not installed on this machine")


@pytest.fixture(scope="module")
def rhea() -> Path:
    if not (JS / "node_modules" / "rhea").is_dir():
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=300,
                       capture_output=True)
    return JS / "rhea_pubsub.js"


def _run(script: Path, port: int, *extra: str) -> dict:
    r = subprocess.run(["node", str(script), str(port), "rhea-topic", "20", *extra], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_rhea_without_sasl_publishes_and_subscribes(router, rhea):
    result = _run(rhea, router.port)
    assert result == {"received": [f"rhea {i}" for i in range(20)], "accepted": 20, "sent": 20}


def test_rhea_with_sasl_plain(make_router, rhea):
    r = make_router(users={"bob": "hunter2"}, auth={"allow_anonymous": False, "plain_without_tls": True})
    result = _run(rhea, r.port, "bob", "hunter2")
    assert result["received"] == [f"rhea {i}" for i in range(20)] and result["accepted"] == 20
