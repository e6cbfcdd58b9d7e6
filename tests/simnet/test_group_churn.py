"""Consumer group members that give messages back or leave, in the in-process network
(``schedules.py --groups --releases`` and ``--leaves``): each seed that failed, replayed
exactly as a named test."""

from __future__ import annotations

import pytest

from simnet.schedules import RELEASES, plan, run, with_leave


def _run(seed: int, releases: bool = False, leaves: bool = False) -> list[str]:
    p = plan(seed, groups=True)
    p.releases = RELEASES if releases else 0.0
    if leaves:
        with_leave(p)
    _, verdict = run(p)
    return verdict.violations


@pytest.mark.parametrize("seed", [224, 225, 282])
def test_releases_seed_a_released_message_is_processed_once(seed: int):
    """A member at the root released a message and the root passed it on to another member,
    which processed it; the publisher then resumed at another router, whose choice (by the
    gid, as the first root's was) named the first member again, and it processed it too.
    A released message now comes back to the member that released it."""
    assert _run(seed, releases=True) == []


@pytest.mark.parametrize("seed, what", [
    (158, "a member accepted at its router, then closed before the copy was answered: the answer said "
          "closed and the root passed the message on to another member"),
    (173, "a member accepted at the root and closed; the publisher resumed at another router, whose copy "
          "to the old root for that member was answered closed, and the message was passed on"),
])
def test_leaves_seed_what_a_member_accepted_before_it_left_is_not_passed_on(seed: int, what: str):
    """A router keeps what a key that left (or moved on) said about a message for its
    answers (``Destination.keep_said``)."""
    assert _run(seed, leaves=True) == []


@pytest.mark.parametrize("seed", [245, 404])
def test_leaves_seed_a_router_that_restarts_right_after_a_member_closed_answers_closed(seed: int):
    """404: g0 closed its link at B and B was killed 3 ms later; restarted, B knew nothing
    of g0 and answered ``unknown`` for ever (two messages never answered). A router's
    subscription journal now keeps what ended there (``substore.py``) for as long as
    ``closed`` is kept in memory."""
    assert _run(seed, leaves=True) == []


@pytest.mark.xfail(strict=True, reason="open (issue 24): a copy that comes after its router forgot the close")
def test_leaves_seed_449_a_copy_that_comes_after_the_router_forgot_the_member_closed():
    """line3: g2 closed at C while B-C was cut; B's copy for it waited in C's chain behind
    a gap for about 10 s, longer than C remembers a close (``publisher_grace``), and C
    answered ``unknown`` for ever (four messages never answered, four lost). How long a
    close must be remembered is as long as a root may still ask: not built yet."""
    assert _run(449, leaves=True) == []


@pytest.mark.xfail(strict=True, reason="open (issue 24): a new root that never saw the first choice")
def test_leaves_seed_475_a_new_root_chooses_again_after_the_chosen_member_left():
    """diamond: the root A chose g1 (on A) for p0:15-18 and g1 accepted them, then closed
    its link; the publisher dropped and resumed at B, which had never had those messages.
    B chose again by the gid among the members left (g0, g2) and g2 processed them too.
    Only A (and g1, gone) knew the first choice: a member that leaves has to stay in the
    group's table, leaving, until what it accepted is settled, so that every root's choice
    is the same and its router is asked. Not built yet."""
    assert _run(475, leaves=True) == []
