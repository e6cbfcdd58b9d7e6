"""The subscription journal (``router/substore.py``) and its restore through the control
plane: what a router kept survives its restart, on disk or in the simulator's memory."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from once.linkstate.messages import Subscription
from once.linkstate.subscriptions import SubscriberTable
from once.router.substore import FileStore, Kept, remaining

S = Subscription("A", "t", "c", "s", since=10, owner="u", group="g", scope="", exclusive=True)


def test_the_file_keeps_what_was_put_suspended_and_dropped_across_a_restart(tmp_path: Path):
    store = FileStore(tmp_path)
    store.put(Kept(S))
    store.put(Kept(Subscription("A", "t", "c", "other")))
    store.suspend(S.key, 5e6)
    store.drop(("c", "other"))
    store.suspend(("c", "never-kept"), 1.0)  # (not ours: nothing to suspend)
    again = FileStore(tmp_path)
    assert again.load() == [Kept(S, 5e6)]
    again.suspend(S.key, math.inf)  # a durable group's stand-in
    assert FileStore(tmp_path).load() == [Kept(S, math.inf)]
    assert not list(tmp_path.glob("*.tmp"))  # written aside, then renamed in place


def test_the_file_keeps_what_ended_here_until_its_deadline_across_a_restart(tmp_path: Path):
    store = FileStore(tmp_path)
    store.put(Kept(S))
    store.end(S.key, until_us=30e6, now_us=10e6)  # closed: no longer ours, remembered as ended
    store.end(("c", "old"), until_us=12e6, now_us=10e6)
    again = FileStore(tmp_path)
    assert again.load() == [] and again.ended == {S.key: 30e6, ("c", "old"): 12e6}
    again.end(("c", "new"), until_us=40e6, now_us=20e6)  # what ended before now is forgotten
    assert FileStore(tmp_path).ended == {S.key: 30e6, ("c", "new"): 40e6}


def test_what_is_left_of_a_grace():
    assert remaining(Kept(S), 0, 30.0) == 30.0  # attached when we went down: a whole grace
    assert remaining(Kept(S, 12e6), 2e6, 30.0) == 10.0
    assert remaining(Kept(S, 1e6), 2e6, 30.0) is None  # it ended while we were down
    assert remaining(Kept(S, math.inf), 2e6, 30.0) == math.inf


def test_the_table_takes_restored_subscriptions_as_ours_but_not_over_this_lifes():
    table = SubscriberTable("A", base=1000)
    table.local(True, Subscription("A", "t", "c", "new"), set())
    taken = table.restore([S, Subscription("A", "t", "c", "new", since=1)])
    assert taken == [replace(S, suspended=True)]  # (suspended: its client is not here)
    assert table.home(S.key) == "A" and table.routers_for("t") == {"A"}
    assert table.restore([S]) == []  # once
