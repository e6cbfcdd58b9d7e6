"""Link state at scale (issue 51, deliverable 4): counts, not seconds. Routers of degree 4
(300 here, a thousand with ``-m slow``) boot to the same digest everywhere with at most 25 control messages per link (a
message: what one router sends one neighbour in one turn), and one router joining or
leaving re-converges with a few messages per link. ``python -m once.linkstate.simulate
--routers 1000`` prints the same figures; BENCHMARKS.md has the growth curve."""

from __future__ import annotations

import pytest
from once.linkstate.simulate import simulate

# (a thousand routers take 20-30 s of one core: the default suite boots 300, whose counts
# per link are held to the same bounds; the thousand run with ``-m slow``)
SIZES = [300, pytest.param(1000, marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=SIZES)
def network(request: pytest.FixtureRequest) -> dict[str, float]:
    return simulate(n=request.param, degree=4.0, events=0, seed=1)


def test_routers_boot_to_one_digest_within_25_messages_a_link(network):
    assert network["boot_digest_agreed"]
    assert network["boot_messages_per_link_mean"] <= 25  # (a thousand routers: 50,000 in all)
    assert network["boot_messages"] <= 25 * network["links"]
    # a round is a hop: the whole boot within 3 s of simulated time at 10 ms a hop
    assert network["boot_rounds"] <= 2 * network["diameter"] + 4


def test_a_router_joining_or_leaving_costs_a_few_messages_a_link(network):
    for phase in ("join", "leave"):
        assert network[f"{phase}_digest_agreed"], phase
        # O(degree + diameter) per link, and within a second of simulated time
        assert network[f"{phase}_messages_per_link_max"] <= 4 + network["diameter"], (phase, network)
        assert network[f"{phase}_rounds"] <= 2 * network["diameter"] + 4, (phase, network)


def test_a_round_of_one_router_to_one_neighbour_is_one_message_of_its_turns_news():
    """The count is of messages as a router sends them: one per neighbour per turn
    (``InterRouterConnection.send_control`` packs a turn's link-state messages into one
    transfer), what the turn made superseded left out (``messages.coalesce``)."""
    from once.linkstate.messages import LinkStateAd, OriginState, Sync, coalesce

    a1, a2, b1 = LinkStateAd("A", 1, {}), LinkStateAd("A", 2, {"B": 1}), LinkStateAd("B", 1, {})
    s1 = Sync((OriginState("A", 1, {}, 5),), partial=True)
    s2 = Sync((OriginState("A", 2, {"B": 1}, 6), OriginState("C", 1, {}, 1)), partial=True)
    assert coalesce([a1, b1, a2]) == [b1, a2]
    merged = coalesce([s1, a1, s2])
    assert merged[0] == a1 and merged[1].partial
    assert {st.origin: st.sub_seq for st in merged[1].states} == {"A": 6, "C": 1}
    assert coalesce([a2, b1]) == [a2, b1]  # (nothing superseded: as it was)


def test_a_turns_partial_syncs_merge_only_where_nothing_else_stands_between():
    """An event between two partial syncs keeps its place: merged past it, an origin's
    older state would land after its newer event."""
    from once.linkstate.messages import OriginState, SubEvent, Subscription, Sync, coalesce

    early = Sync((OriginState("O", 1, {}, 5),), partial=True)
    event = SubEvent("O", 6, True, Subscription("O", "t", "c", "l"))
    late = Sync((OriginState("P", 1, {}, 1),), partial=True)
    assert coalesce([early, event, late]) == [early, event, late]
