"""What a new user meets first (issue 50): the commands as the README gives them, against a
real router, each edge that surprised one."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from support.routers import ROOT, RouterProcess


def _once(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, **kw)


def _reader(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(line.strip())
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_two_named_members_of_a_group_share_its_messages(router: RouterProcess):
    """``--name`` names the member, not the group: each message goes to one of the two."""
    members, readers, got = [], [], {"m1": [], "m2": []}
    for name in ("m1", "m2"):
        p = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "jobs", "--group", "workers", "--name",
                              name, "--url", router.url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        assert p.stderr is not None
        assert "in group workers" in p.stderr.readline()
        members.append(p)
        readers.append(_reader(p, got[name]))
    try:
        sent = _once("send", "jobs", "--count", "10", "--url", router.url)
        assert sent.returncode == 0 and "accepted 10" in sent.stdout, sent.stdout + sent.stderr
        deadline = time.monotonic() + 60  # (a guard against a hang, not a pace)
        while len(got["m1"]) + len(got["m2"]) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for p in members:
            p.send_signal(signal.SIGTERM)
        for p, t in zip(members, readers):
            p.wait(timeout=30)
            t.join(timeout=30)
            for f in (p.stdout, p.stderr):
                if f is not None:
                    f.close()
    assert not set(got["m1"]) & set(got["m2"]), got
    assert len(got["m1"]) + len(got["m2"]) == 10 and len(set(got["m1"]) | set(got["m2"])) == 10, got
