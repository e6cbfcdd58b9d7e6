"""The network's replicas of MQTT sessions (``router/adaptors/mqtt/sessions.py``), pure:
stores wired to each other in process, notes delivered when the test says."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from once.router.adaptors.mqtt.sessions import Session, SessionStore


class Routers:
    """Stores that reach each other; notes wait in ``wire`` until ``deliver``."""

    def __init__(self, *ids: str) -> None:
        self.reach = {i: set(ids) for i in ids}
        self.wire: list[tuple[str, str, bytes]] = []
        self.soon: list[Callable[[], object]] = []
        self.stores = {i: SessionStore(_Router(self, i)) for i in ids}  # type: ignore[arg-type]

    def deliver(self) -> None:
        while self.wire or self.soon:
            while self.soon:
                self.soon.pop(0)()
            if self.wire:
                to, frm, body = self.wire.pop(0)
                if to in self.reach[frm]:
                    self.stores[to].note(frm, body)


class _Router:
    stopping = False

    def __init__(self, routers: Routers, rid: str) -> None:
        self.id = rid
        self.routers = routers
        self.network = self
        self.readers: dict[str, Any] = {}

    # the network's side
    def reachable(self) -> set[str]:
        return set(self.routers.reach[self.id])

    def listen(self, channel: str, reader: Any) -> None:
        self.readers[channel] = reader

    def send_note(self, router: str, channel: str, body: bytes) -> bool:
        if router not in self.routers.reach[self.id]:
            return False
        self.routers.wire.append((router, self.id, body))
        return True

    # the loop's side
    def call_soon(self, f: Callable[..., object], *args: Any) -> None:
        self.routers.soon.append(lambda: f(*args))

    def call_later(self, delay: float, f: Callable[..., object], *args: Any) -> None:
        pass  # (the test ticks by hand)

    def flush(self) -> None:
        pass


def test_a_change_is_acted_on_only_once_every_router_in_reach_has_it():
    net = Routers("A", "B", "C")
    a = net.stores["A"]
    done: list[str] = []
    s = Session("c1", 7, host="A", expiry=60, subscriptions={"t": 2})
    a.changed(s, lambda: done.append("sent"))
    while net.soon:
        net.soon.pop(0)()
    assert done == [] and len(net.wire) == 2  # one note each to B and C, no answer yet
    net.deliver()
    assert done == ["sent"]
    for rid in "BC":
        copy = net.stores[rid].get("c1")
        assert copy is not None and copy.subscriptions == {"t": 2} and copy.incarnation == 7


def test_a_router_out_of_reach_is_not_waited_for():
    net = Routers("A", "B", "C")
    a = net.stores["A"]
    done: list[str] = []
    a.changed(Session("c1", 1, host="A", expiry=60), lambda: done.append("sent"))
    while net.soon:
        net.soon.pop(0)()
    net.reach["A"].discard("C")  # C dies before it answers
    net.deliver()
    assert done == []  # (B answered; C is still waited for until A sees it gone)
    a._tick()
    assert done == ["sent"]


def test_a_stale_copy_is_not_taken_and_an_ended_session_stays_ended():
    net = Routers("A", "B")
    a, b = net.stores["A"], net.stores["B"]
    s = Session("c1", 1, host="A", expiry=60)
    a.changed(s)
    net.deliver()
    old = Session.from_dict(json.loads(b.sessions["c1"].to_bytes()))
    s.epoch = 5
    a.changed(s)
    net.deliver()
    assert b.sessions["c1"].epoch == 5
    b._take_copy("A", old)  # a late, older copy
    assert b.sessions["c1"].epoch == 5
    a.end(s)
    net.deliver()
    assert b.get("c1") is None
    b._take_copy("A", old)
    assert b.get("c1") is None  # (the tombstone: an old copy does not bring it back)


def test_a_router_that_comes_into_reach_gets_every_session_and_the_old_host_is_told():
    net = Routers("A", "B")
    net.reach["A"].discard("B")
    net.reach["B"].discard("A")
    a, b = net.stores["A"], net.stores["B"]
    a.reach = set()
    a.changed(Session("c1", 1, host="A", expiry=60))
    net.deliver()
    assert b.get("c1") is None
    net.reach["A"].add("B")
    net.reach["B"].add("A")
    a._tick()
    net.deliver()
    taken: list[str] = []
    a.on_taken["c1"] = lambda: taken.append("closed")
    copy = b.get("c1")
    assert copy is not None
    copy.host = "B"  # its client connected to B
    b.changed(copy)
    net.deliver()
    assert taken == ["closed"] and a.sessions["c1"].host == "B"


def test_a_session_survives_its_encoding():
    s = Session("c\u00e9", 2**62, 123, "A", 300, {"a/b": 2, "$share/g/t": 1}, 9,
                {7: (b"\x00\xffgid", True, "a/b"), 8: (b"g2", False, "$share/g/t")}, {b"g3": "a/b"}, gone_at=1.5)
    assert Session.from_dict(json.loads(s.to_bytes())) == s
