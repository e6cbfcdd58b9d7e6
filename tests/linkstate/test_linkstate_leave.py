"""A router that stops cleanly says it left (issue 51, deliverable 2): every router drops it
at once, counts it no more among the routers it may be cut off from, and takes a later life
of it back when it returns. Pure: control planes and a round-based network, no sockets."""

from __future__ import annotations

from once.linkstate.simulate import Network


def _line() -> Network:
    net = Network.of(["A", "B", "C"])
    net.link_up("A", "B")
    net.link_up("B", "C")
    net.run()
    return net


def test_a_router_that_leaves_is_dropped_everywhere_at_once():
    net = _line()
    left: list[str] = []
    taken = net._take

    def take(src, r):  # (who heard it: each router once, through the result it returns)
        left.extend((src, gone) for gone in r.left)
        taken(src, r)

    net._take = take  # type: ignore[method-assign]
    assert net.leave("C") == 1
    net.run()
    assert sorted(left) == [("A", "C"), ("B", "C")]
    for name in "AB":
        lsdb = net.planes[name].lsdb
        assert lsdb.left() == {"C"} and "C" not in lsdb.reachable()
    assert len({net.planes[n].digest() for n in "AB"}) == 1
    # its links closing after its last word say nothing more of it
    assert net.planes["C"].gone and net.planes["C"].lsdb.ads["C"].leaving


def test_a_later_life_of_a_router_that_left_is_taken_back():
    net = _line()
    net.leave("C")
    net.run()
    net.restart("C")  # (its new life numbers its advertisements from the start again)
    back: list[tuple[str, str]] = []
    taken = net._take

    def take(src, r):
        back.extend((src, again) for again in r.back)
        taken(src, r)

    net._take = take  # type: ignore[method-assign]
    net.link_up("B", "C")
    net.run()
    assert sorted(back) == [("A", "C"), ("B", "C")]  # (each hears it once: ``Core.router_back``)
    for name in "ABC":
        lsdb = net.planes[name].lsdb
        assert not lsdb.left(), name
        assert {"A", "B", "C"} - {name} <= lsdb.reachable(), name
    assert len({p.digest() for p in net.planes.values()}) == 1


def test_a_sync_tells_a_router_that_was_away_that_another_left():
    net = _line()
    net.link_down("A", "B")
    net.run()
    net.leave("C")
    net.run()
    assert net.planes["A"].lsdb.left() == set()
    net.link_up("A", "B")
    net.run()
    assert net.planes["A"].lsdb.left() == {"C"}
