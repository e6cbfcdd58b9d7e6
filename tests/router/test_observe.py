"""The operator's snapshot of a core, and the SIGUSR1 line made from it."""

from __future__ import annotations

from once.router.observe import line, snapshot
from test_core import Pub, Sub, _core


def test_snapshot_counts_what_the_core_holds():
    core = _core()
    s = Sub(credit=0)  # holds everything
    core.add_subscriber(s, "t", "c", "l", False)
    pub = core.add_publisher(Pub(), "t", "cp", "lp", False)
    core.publish(pub, b"0", b"hello", False, "h")
    snap = snapshot(core)
    assert snap.records == 1 and snap.own_records == 1 and snap.held_bytes == 5
    assert snap.publishers == 1 and snap.publisher_credit == core.outstanding
    [view] = snap.subscribers
    assert (view.topic, view.container_id, view.link_name, view.queued, view.suspended) == ("t", "c", "l", 1, False)
    assert snap.totals["published"] == 1
    text = line(snap, connections=2)
    assert text.startswith("router A: records 1 (own 1, 5 bytes)") and "t:c/l(queue 1, credit 0)" in text
    assert "connections 2" in text
