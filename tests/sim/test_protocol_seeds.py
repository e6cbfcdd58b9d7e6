"""Protocol version 3 (``docs/protocol.md``, ``router/core/copies.py``) in the in-process
network: each seed that failed while it was built, or on fresh seeds since, as a named
regression test (the schedule replayed exactly, on version 3). The deterministic sweeps
(version 3 is the default) are ``test_schedules.py``'s."""

from __future__ import annotations

import pytest
from once.sim.schedules import plan, run


def _clean(seed: int, groups: bool = False) -> None:
    p = plan(seed, groups=groups)
    _, verdict = run(p)
    assert verdict.ok, verdict.violations


def test_hard_seed_904_a_crashed_publisher_resending_at_its_root_keeps_its_order():
    """ring8c, a publisher crashed and came back to the same root: what it sent again went
    on in the old attach's stream, and a copy lost there reached its subscriber after newer
    ones (reordered 2). The root now sends what is still owed in the new attach's stream."""
    from once.sim.schedules import hard_plan

    _, verdict = run(hard_plan(904))
    assert verdict.ok, verdict.violations


@pytest.mark.parametrize("seed", [71, 152, 275, 456, 889, 946])
def test_hard_seed_an_attach_on_a_router_whose_clock_is_behind_is_still_the_newest(seed: int):
    """ring/diamond schedules with a router's clock stepped back seconds: a subscriber
    resumed there, its attach looked older than the one it replaced, and the router it
    left expired it (275, 889: 32 lost, 71: 10 reordered). Attach stamps are now past
    every stamp known for the key (``LinkLifecycle.attach_subscriber``)."""
    from once.sim.schedules import hard_plan

    _, verdict = run(hard_plan(seed))
    assert verdict.ok, verdict.violations


@pytest.mark.parametrize("seed, groups", [(364538818564, False), (364538810666, False), (364538819446, False),
                                           (495600959857, True), (495600959896, True), (495600962664, True)])
def test_fresh_seed_a_key_that_came_to_a_router_which_had_forgotten_the_message_gets_it(seed: int, groups: bool):
    """Fresh seeds (``--fresh``): a subscriber crashed and resumed at a router that had the
    message for another key and had forgotten it (its tombstone): the tombstone answered
    ``unknown`` for the newcomer until it expired, and the newcomer got newer messages
    first. A key a tombstone does not name is now delivered to (never one it names)."""
    p = plan(seed, groups=groups)
    _, verdict = run(p)
    assert verdict.ok, verdict.violations


@pytest.mark.parametrize("seed", [1621, 2841, 3550, 495600958425, 495600959081, 495600961807])
def test_group_seed_a_resent_copy_still_held_goes_in_its_place(seed: int):
    """--groups: a re-sent copy arrived while the first copy of its position was held behind
    a gap that the same arrival's ``low`` then filled: it was taken at once, before the held
    copies before it (a member got message 40 before 29). A re-send is taken again only if
    its position was taken before it came."""
    p = plan(seed, groups=True)
    _, verdict = run(p)
    assert verdict.ok, verdict.violations


@pytest.mark.parametrize("seed, what", [
    (453, "two copies for one router in one send: both must go (one was dropped, the router waited for it)"),
    (1125, "a key that came home to the root: its old copy elsewhere no longer holds that router's low back"),
    (688, "a resuming publisher is told no tag in doubt after one the new root does not know"),
    (9212, "a destination stops waiting for a local delivery the root has settled"),
    (13505, "a key that came to the root and left again is owed again"),
    (8757, "every router that knew a subscriber restarted: publishes wait for a complete view"),
    (13966, "a restarted pair cut off from the router holding the subscriber: the cold-start rule"),
    (18224, "a restarted router syncs with another restarted one first: not a complete view"),
    (6924, "a key that came to the root gets its messages in the order they came there"),
    (1992, "an answer naming no key (all accepted) speaks only for the keys still owed at that router"),
])
def test_seed_found_while_building_version_3(seed: int, what: str) -> None:
    _clean(seed)


@pytest.mark.parametrize("seed, what", [
    (9883, "D turned E's copy for a moved subscriber into a full copy back to E; E answered accepted"),
    (9064, "D and E bounced a copy meant for a dead router and answered each other accepted"),
    (1648, "B answered at once when it lost C, 50 ms after the subscriber moved from C to D"),
    (9736, "a restarted, isolated C synced only with another restarted router and accepted for nobody"),
    (5934, "routers waited on each other's answers in a cycle (a slowed link, two client drops)"),
    (12806, "a copy bounced between A and E about 16,000 times"),
    (9696, "copies raced on two paths and A delivered p0:66 before p0:65"),
    (8873, "B settled its copy before A's answer came; the answer was dropped, record and pin stayed"),
])
def test_issue_24_seed_clean_on_version_3(seed: int, what: str) -> None:
    """The schedules issue 24 traced on version 2, each a named test on version 3: the star
    of answers, loop-free copies and order by position leave none of these failures."""
    _clean(seed)


def test_fresh_seed_two_keys_that_swapped_routers_across_a_partition_leave_no_chain_waiting():
    """Fresh seed 284252159721 (ring4): the publisher failed over to A, A was cut off from
    C and D, and meanwhile s0 moved from C to D and s1 from D to C. Healed, A sent both
    keys' messages again where they lived now, but the copies it had numbered for them at
    their old routers (never sent: unreachable) kept holding ``low`` back there, so each
    chain waited for positions A would never send: 47 messages never answered. A key's
    old positions stop holding ``low`` back when it moves (``Answers._answered_positions``)."""
    _clean(284252159721)


def test_fresh_group_seed_an_adopted_message_goes_to_its_member_where_it_lives_now():
    """Fresh groups seed 659399398833 (diamond): p1's root D chose member g1 (on D) for
    p1:8, 11 and 14 and died; g1 moved to C; p1 resumed at B, which held those messages
    as a destination and adopted them, and sent them for g1 to D, the router the choice
    named, while p1:19 and on went to g1 at C directly. They reached g1 after p1:73
    (reordered 3). The root sends a chosen member's copy where the member lives now."""
    _clean(659399398833, groups=True)


def test_hard_group_seed_a_router_restarted_with_its_clock_behind_is_heard():
    """Fresh ``--hard --groups`` seed 396129154652 (line3): C restarted while its clock was
    2 s behind, so its new life numbered its subscription events below what B held of its
    earlier life, and B ignored them: member g2 resumed at C, A never heard of it, kept it
    suspended and expired it 30 s later. A restarted router now numbers past an earlier
    life's numbers that come back, and says its state again (``linkstate/subscriptions.py``)."""
    from once.sim.schedules import hard_plan

    _, verdict = run(hard_plan(396129154652, True))
    assert verdict.ok, verdict.violations


@pytest.mark.parametrize("seed", [396129155360, 840217628598, 840217628795])
def test_hard_group_seed_a_live_attach_behind_a_partition_on_a_slow_clock_outranks_a_suspended_one(seed: int):
    """Fresh ``--hard --groups`` seed 396129155360 (line3): member g0 resumed at B (1.58 s),
    dropped, and resumed at A (2.06 s) while A was cut off from B and A's clock was 3 s
    behind. A could not stamp past B's attach it had not heard of, so its attach, the live
    one, was the older: every router took B's suspended one for the member's home, and B
    expired it when its grace ended. Stamps cannot order attaches made on both sides of a
    partition on clocks that disagree; a router now floods its subscriber's suspension, and
    a live attach outranks a suspended one (``SubscriberTable.home``). 840217628598
    (triangle, A 4.4 s behind, B-A cut) and 840217628795 (line3, C behind, B-C silent then
    cut) are the same: a member expired at B while attached elsewhere."""
    from once.sim.schedules import hard_plan

    _, verdict = run(hard_plan(seed, True))
    assert verdict.ok, verdict.violations


def test_hard_group_seed_a_root_whose_publisher_is_attached_asks_past_a_fence_on_a_clock_ahead():
    """Fresh ``--hard --groups`` seed 957146179704 (ring6c): the publisher resumed at D,
    whose clock was ahead; D asked whom the group had given its messages and died. The
    publisher resumed at A, whose questions were older by their stamps: every router
    refused them for D's fence (``taken``), and A chose no member: 244 messages accepted
    that no member got. ``Told`` now carries the fence's stamp, and a root whose publisher
    is attached asks again past it."""
    from once.sim.schedules import hard_plan

    _, verdict = run(hard_plan(957146179704, True))
    assert verdict.ok, verdict.violations
