"""Order by sequence at a destination (``records/chain.py``): whatever order copies arrive
in, and however often, each position is taken once, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from once.records.chain import Arrival, Chain


def test_copies_in_order_are_taken_at_once():
    c: Chain[str] = Chain()
    assert c.arrive(0, 1, 1, "a").ready == ("a",)
    assert c.arrive(0, 2, 1, "b").ready == ("b",)


def test_an_early_copy_waits_for_the_gap_and_goes_right_behind_it():
    c: Chain[str] = Chain()
    assert c.arrive(0, 2, 1, "b").arrival is Arrival.HELD
    assert c.arrive(0, 3, 1, "c").ready == ()
    out = c.arrive(0, 1, 1, "a")
    assert out.arrival is Arrival.TAKEN and out.ready == ("a", "b", "c")


def test_a_resent_copy_is_a_repeat_taken_or_held():
    c: Chain[str] = Chain()
    c.arrive(0, 1, 1, "a")
    c.arrive(0, 3, 1, "c")
    assert c.arrive(0, 1, 1, "a").arrival is Arrival.REPEAT
    assert c.arrive(0, 3, 1, "c").arrival is Arrival.REPEAT
    assert c.arrive(0, 2, 1, "b").ready == ("b", "c")


def test_after_a_restart_what_the_root_has_answers_for_is_not_waited_for():
    """The root's low says positions 1-4 were answered (in this router's earlier life)."""
    c: Chain[str] = Chain()
    out = c.arrive(0, 5, 5, "e")
    assert out.arrival is Arrival.TAKEN and out.ready == ("e",)
    assert c.arrive(0, 3, 5, "c").arrival is Arrival.REPEAT


def test_low_releases_what_waited_even_on_a_repeat():
    c: Chain[str] = Chain()
    c.arrive(0, 1, 1, "a")
    c.arrive(0, 3, 1, "c")  # 2 missing
    # 2 was answered after all (a copy that reached us before a restart of ours)
    out = c.arrive(0, 1, 3, "a")
    assert out.arrival is Arrival.REPEAT and out.ready == ("c",)


def test_a_newer_epoch_drops_what_the_older_one_held_and_older_copies_are_stale():
    c: Chain[str] = Chain()
    c.arrive(0, 1, 1, "a")
    c.arrive(0, 3, 1, "c")  # held behind 2
    out = c.arrive(1, 1, 1, "b'")  # the publisher resumed at another root: its epoch 1
    assert out.arrival is Arrival.TAKEN and out.ready == ("b'",) and out.dropped == ("c",)
    assert c.arrive(0, 2, 1, "b").arrival is Arrival.STALE


def test_an_ended_stream_gives_back_what_it_held_and_a_full_window_drops_the_newest():
    c: Chain[str] = Chain()
    for p, x in ((3, "c"), (5, "e"), (4, "d")):
        c.arrive(0, p, 1, x)
    assert c.drop_newest() == "e"
    assert c.end() == ("c", "d") and c.drop_newest() is None


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.integers(1, n), min_size=n, max_size=4 * n))))
def test_any_arrival_order_with_resends_takes_each_position_once_in_order(case):
    """The root sends positions 1..n and sends again what it has no answer for; the
    network delivers copies in any order. ``low`` follows the answers the root has."""
    n, arrivals = case
    c: Chain[int] = Chain()
    taken: list[int] = []
    answered: set[int] = set()
    # every position arrives at least once, after the drawn ones (the root's re-sends)
    for p in [*arrivals, *range(1, n + 1)]:
        low = next((q for q in range(1, n + 2) if q not in answered), n + 1)
        out = c.arrive(0, p, low, p)
        taken.extend(out.ready)
        answered.update(out.ready)
    assert taken == list(range(1, n + 1))
