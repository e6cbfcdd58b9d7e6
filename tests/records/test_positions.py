"""records/far.py's Positions: the first unanswered position, whatever order answers come in."""

from __future__ import annotations

import random

from once.records.far import Positions


def test_low_is_the_first_unanswered_position_or_next():
    box = Positions()
    assert box.low() == 1
    for _ in range(5):
        box.unanswered[box.next] = b"g"
        box.next += 1
    assert box.low() == 1
    del box.unanswered[2]
    assert box.low() == 1
    del box.unanswered[1]
    assert box.low() == 3
    for p in (3, 4, 5):
        del box.unanswered[p]
    assert box.low() == 6 == box.next


def test_low_matches_the_smallest_key_over_random_sends_and_answers():
    rng = random.Random(7)
    box = Positions()
    for _ in range(20_000):
        if box.unanswered and rng.random() < 0.5:
            del box.unanswered[rng.choice(list(box.unanswered)[:8] if rng.random() < 0.8 else list(box.unanswered))]
        else:
            box.unanswered[box.next] = None
            box.next += 1
        assert box.low() == min(box.unanswered, default=box.next)
