"""The hold-down before routes are computed again (``Network._hold_over``, the
``route_hold`` setting): a burst of link-state changes from elsewhere costs one route
computation, and the core acts on it once, at the hold's end. Driven through the
in-process simulator (the router's own ``Network`` and core, a virtual clock)."""

from __future__ import annotations

from once.linkstate.messages import LinkStateAd
from once.sim.net import SimNet, with_settings


def test_a_burst_of_changes_from_elsewhere_is_one_route_computation_at_the_holds_end():
    net = SimNet(1, [("A", "B"), ("B", "C")])
    net.start()
    net.run_until(2.0)  # (booted, long quiet: the hold is over)
    a = net.routers["A"].network
    lsdb = a.plane.lsdb
    assert lsdb.hold and a.reachable() == {"B", "C"}
    computed: list[float] = []
    real = lsdb.recompute

    def recompute() -> None:
        computed.append(net.loop.now)
        real()

    lsdb.recompute = recompute  # type: ignore[method-assign]
    seq = lsdb.ads["C"].seq
    a.receive("B", LinkStateAd("C", seq + 1, {}))  # C lost its link: computed at once
    assert computed == [2.0] and a.reachable() == {"B"}
    epoch = a.epoch
    for n in range(2, 6):  # a burst: C's link flaps, within the hold
        a.receive("B", LinkStateAd("C", seq + n, {"B": 1} if n % 2 else {}))
    assert computed == [2.0] and a.reachable() == {"B"}  # held: the routes as computed
    net.run_until(2.0 + a.router.settings.route_hold + 0.001)
    assert computed == [2.0, 2.0 + a.router.settings.route_hold]  # once, for the whole burst
    assert a.reachable() == {"B", "C"} and a.epoch > epoch + 4  # (the core heard: the network changed)


def test_no_hold_down_computes_every_change():
    net = SimNet(1, [("A", "B"), ("B", "C")], with_settings(route_hold=0.0))
    net.start()
    net.run_until(2.0)
    a = net.routers["A"].network
    assert not a.plane.lsdb.hold
    seq = a.plane.lsdb.ads["C"].seq
    a.receive("B", LinkStateAd("C", seq + 1, {}))
    a.receive("B", LinkStateAd("C", seq + 2, {"B": 1}))
    assert a.reachable() == {"B", "C"}
