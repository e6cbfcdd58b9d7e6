from __future__ import annotations

from once.records.placeholders import Placeholders


def test_a_placeholder_is_taken_once_and_expires():
    p = Placeholders()
    assert not p
    p.add(("c", "l"), b"g1", until=10.0)
    p.add(("c", "l"), b"g2", until=5.0)
    assert len(p) == 2 and p
    assert p.take(("c", "l"), b"g1") is True
    assert p.take(("c", "l"), b"g1") is False  # once: a later copy is a new question
    assert p.take(("other", "l"), b"g2") is False  # it belongs to one subscriber key
    assert p.expire(4.9) == 0 and p.expire(5.0) == 1 and not p
