"""Partitions longer than the graces (issue 48, class 2): a subscriber is given up only
on evidence that it is attached nowhere else (``docs/protocol.md`` section 7).

Before, a router whose subscriber's connection dropped expired it at the end of its grace
on its own clock, while the client had attached at a router across a partition: roots on
the old router's side heard ``expired`` and told their publishers ``accepted`` for
messages the live subscriber never got. The seeds below (``--long-cuts``) failed that
way; each replays in one subprocess under the sweeps' hash seed."""

from __future__ import annotations

import pytest
from once.router.config import Settings
from once.router.core import Core
from once.router.core.ports import Alone
from support.replay import replay

# plain ``--long-cuts`` seeds: the subscriber's old router expired it across the cut
# (lost: messages told accepted that it never got)
EXPIRED_ACROSS_THE_CUT = [107, 108, 114, 225, 274, 380]
# ``--groups --long-cuts`` seed 360: the cut healed, and the old router saw the far side
# reachable (one advertisement) before the views the heal brought (syncs passed on): it
# gave up a member and a subscriber attached across the healed link. The roll call
# (``Network.gone_everywhere``) closes it.
REACHABLE_BEFORE_ITS_VIEW = [360]

# ``--gaps`` (the cut outlasts ``partition_grace`` too): plain seeds whose subscriber that
# moved across the cut is given up as a gap and told, and group seeds where passing a
# given-up member's messages on had two members process them (220) or taking them as
# its own lost those its dropped connection never delivered (343): what was handed to it
# waits for the key where it attaches next instead
TOLD_A_GAP = [107, 225, 274]
MEMBER_GAPS = [220, 343, 410, 582, 648]
# ``--gaps --groups`` seed 489: both members given up as gaps where they had been; a root
# that knew no other member accepted a message for the group meanwhile (told to both)
GROUP_TOLD = [489]
# ``--hard --gaps`` seed 915: a restarted router whose only link stayed silent took
# publishes at its cold start (``subscriber_grace``) without the subscribers behind the
# partition, which never heard: it now waits while a router is out of reach, and past
# ``partition_grace`` tells them the gap when their state comes in
FORCED_COLD_START = [915]

REPLAY = """
import json, sys
from once.sim.schedules import build, run
out = {}
for seed, groups, gaps, hard in json.loads(sys.argv[1]):
    net, v = run(build(seed, groups=groups, long_cuts=True, gaps=gaps, hard=hard))
    told = sorted(s.name for s in net.subscribers if s.gaps)
    out[f"{seed}/{groups}/{gaps}/{hard}"] = [v.violations, told, v.told_expired]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list]:
    cases = [(s, False, False, False) for s in EXPIRED_ACROSS_THE_CUT]
    cases += [(s, True, False, False) for s in REACHABLE_BEFORE_ITS_VIEW]
    cases += [(s, False, True, False) for s in TOLD_A_GAP]
    cases += [(s, True, True, False) for s in MEMBER_GAPS + GROUP_TOLD]
    cases += [(s, False, True, True) for s in FORCED_COLD_START]
    return replay(REPLAY, cases)


@pytest.mark.parametrize("seed", EXPIRED_ACROSS_THE_CUT)
def test_long_cut_seed_a_subscriber_that_moved_across_the_cut_is_not_given_up(verdicts, seed):
    violations, told, _ = verdicts[f"{seed}/False/False/False"]
    assert violations == [] and told == []


@pytest.mark.parametrize("seed", REACHABLE_BEFORE_ITS_VIEW)
def test_long_cut_group_seed_a_heal_is_heard_before_a_key_is_given_up(verdicts, seed):
    violations, told, _ = verdicts[f"{seed}/True/False/False"]
    assert violations == [] and told == []


@pytest.mark.parametrize("seed", TOLD_A_GAP)
def test_gaps_seed_a_subscriber_given_up_past_partition_grace_is_told_and_misses_only_the_gap(verdicts, seed):
    """What a partition longer than the graces and ``partition_grace`` does to a subscriber
    attached across it: its link ends with ``once:subscription-gap`` once the partition
    heals; it attaches again and goes on. The verdict owes it everything but what was
    published from the give-up until it attached again (``told_expired``: here the roots
    still held what the partition kept from it, and it got every message), and holds it
    to no repeat unmarked, no reorder, nothing lost outside the gap."""
    violations, told, _ = verdicts[f"{seed}/False/True/False"]
    assert violations == [] and told


@pytest.mark.parametrize("seed", MEMBER_GAPS)
def test_gaps_group_seed_a_member_given_up_as_a_gap_loses_and_repeats_nothing(verdicts, seed):
    violations, told, _ = verdicts[f"{seed}/True/True/False"]
    assert violations == [] and told


class Partitioned(Alone):
    """The routes port of a router that cannot show its subscriber is gone: a router
    is out of reach."""

    def gone_everywhere(self, key: tuple[str, str]) -> bool:
        return False

    def all_routers(self) -> set[str]:
        return {"C"}  # (and none reachable)


class Port:
    def credit(self) -> int:
        return 0

    def deliver(self, record: object, settled: bool, redelivery: int) -> object:
        raise AssertionError("nothing is published")

    def settle(self, handle: object) -> None: ...

    def drained(self) -> None: ...

    def draining(self) -> bool:
        return False

    def activated(self) -> None: ...

    def stolen(self) -> None: ...


def test_a_suspended_subscriber_without_evidence_waits_for_the_partition_grace_then_is_a_gap():
    now = [0.0]
    core = Core("B", Settings(subscriber_grace=10.0, partition_grace=60.0), clock=lambda: now[0],
                routes=Partitioned())
    sub, _ = core.add_subscriber(Port(), "t", "c", "l", False)
    core.suspend_subscriber(sub, 10.0)
    now[0] = 10.0
    assert core.expire_suspended(now[0]) == []  # its grace is over: no evidence, it waits
    now[0] = 69.9
    assert core.expire_suspended(now[0]) == []
    now[0] = 70.0
    assert core.expire_suspended(now[0]) == [sub] and sub.gap  # given up, as a gap


def test_a_suspended_subscriber_with_evidence_goes_at_its_grace_and_is_no_gap():
    now = [0.0]
    core = Core("B", Settings(subscriber_grace=10.0, partition_grace=60.0), clock=lambda: now[0])
    sub, _ = core.add_subscriber(Port(), "t", "c", "l", False)
    core.suspend_subscriber(sub, 10.0)
    now[0] = 10.0
    assert core.expire_suspended(now[0]) == [sub] and not sub.gap


@pytest.mark.parametrize("seed", GROUP_TOLD)
def test_gaps_group_seed_what_a_group_missed_while_its_members_were_given_up_is_told(verdicts, seed):
    violations, told, told_expired = verdicts[f"{seed}/True/True/False"]
    assert violations == [] and told == ["g0", "g1", "s0"] and told_expired > 0


@pytest.mark.parametrize("seed", FORCED_COLD_START)
def test_hard_gaps_seed_a_cold_start_waits_for_every_router_then_tells_what_it_did_not_know(verdicts, seed):
    violations, told, told_expired = verdicts[f"{seed}/False/True/True"]
    assert violations == [] and told == ["s0", "s1", "s2", "s3"] and told_expired > 0
