"""Inter-router links that drop and come back: rerouting (mesh3) and healing (line3),
with nothing lost, nothing duplicated and per-publisher order kept."""

from __future__ import annotations

import pytest
from support.proton_clients import ProtonSubscriber
from support.proton_events import ContainerThread, StreamPublisher
from support.routers import Network, wait_for

N = 600


def _check_exactly_once_in_order(subs: dict[str, ProtonSubscriber]) -> None:
    for r, s in subs.items():
        got = [m.body for m in s.take(N, timeout=60)]
        assert got == list(range(N)), f"subscriber on {r}: first difference at {next(i for i, (a, b) in enumerate(zip(got, range(N))) if a != b)}"
        assert s.messages.empty(), f"subscriber on {r} got more than {N}"


@pytest.mark.parametrize("topology, link", [("mesh3.yaml", ("A", "C")), ("line3.yaml", ("B", "C"))])
def test_link_flap_loses_nothing_duplicates_nothing(tmp_path, topology, link):
    net = Network(topology, tmp_path, proxied=(link,))
    try:
        subs = {r: ProtonSubscriber(net[r].url, "flap", name=f"sub-{r}") for r in "ABC"}
        pub = StreamPublisher(net["A"].url, "flap", N)
        # Three batches, each released explicitly: a quarter before the cut, up to two thirds
        # while the link is down, the rest after it heals (so what "progress" means does not
        # depend on how far the publisher got before the cut took effect).
        pub.limit = N // 4
        t = ContainerThread(pub)
        wait_for(lambda: pub.accepted() == N // 4, 30, what="the first quarter accepted before the cut")
        net.proxy(*link).cut()
        t.call(lambda: pub.release(2 * N // 3))
        if topology == "line3.yaml":
            # C is unreachable: nothing can be accepted for long (every message waits for C's subscriber).
            wait_for(lambda: pub.sent > N // 4, 10, what="publishing continues")
            assert pub.accepted() < N
        else:
            # mesh3 reroutes A -> B -> C: every message published while the direct link is down
            # is accepted over the detour.
            wait_for(lambda: pub.accepted() == 2 * N // 3, 60, what="the second batch accepted over the detour")
        net.proxy(*link).heal()
        wait_for(lambda: net.proxy(*link).connections_made >= 2, 10, what="the link to come back")
        t.call(pub.release_rest)  # the last third crosses the switch back to the direct path
        wait_for(lambda: pub.accepted() == N, 60, what="every message accepted after healing")
        assert set(pub.outcomes.values()) == {"accepted"}
        _check_exactly_once_in_order(subs)
        t.stop()
        for s in subs.values():
            s.close()
    finally:
        net.stop()


def test_a_silent_link_is_declared_down_by_heartbeat_and_traffic_reroutes(tmp_path):
    net = Network("mesh3.yaml", tmp_path, settings={"router_dead_after": "1s"}, proxied=(("A", "C"),))
    try:
        sub = ProtonSubscriber(net["C"].url, "hung", name="c")
        pub = StreamPublisher(net["A"].url, "hung", 200)
        pub.limit = 50
        t = ContainerThread(pub)
        wait_for(lambda: pub.accepted() == 50, 20, what="the first 50 over the direct link")
        net.proxy("A", "C").freeze()  # no close, no reset: the link just goes quiet
        t.call(pub.release_rest)
        # Nothing arrives over A-C any more; after router_dead_after the routers give up on it
        # and the rest goes A -> B -> C.
        wait_for(lambda: pub.accepted() == 200, 20, what="all accepted over the detour")
        assert [m.body for m in sub.take(200)] == list(range(200))
        assert sub.messages.empty()
        t.stop()
        sub.close()
        logs = "\n".join(net["A"].stderr_lines())
        assert "link to C down" in logs
    finally:
        net.stop()
