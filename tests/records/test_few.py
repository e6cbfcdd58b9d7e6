"""``Few`` (a record's unsettled deliveries) behaves as a dict does for every operation the
core uses, whatever the sequence of them (``records/few.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from once.records.few import Few

ops = st.lists(st.tuples(st.sampled_from(["set", "pop", "del", "get", "clear"]), st.integers(0, 4), st.integers()),
               max_size=40)


@given(ops)
def test_it_agrees_with_a_dict(steps: list[tuple[str, int, int]]) -> None:
    few = Few()
    ref: dict[int, int] = {}
    for op, key, value in steps:
        if op == "set":
            few[key] = value
            ref[key] = value
        elif op == "pop":
            assert few.pop(key, None) == ref.pop(key, None)
        elif op == "del":
            if key in ref:
                del few[key]
                del ref[key]
            else:
                with pytest.raises(KeyError):
                    del few[key]
        elif op == "get":
            assert few.get(key) == ref.get(key)
        else:
            few.clear()
            ref.clear()
        assert len(few) == len(ref) and bool(few) == bool(ref)
        assert dict(few.items()) == ref and len(few.items()) == len(ref)  # (each key once)
        assert sorted(few) == sorted(ref)
        assert all((k in few) == (k in ref) for k in range(5))


def test_entries_come_out_in_insertion_order_while_none_is_removed() -> None:
    few = Few()
    for i, k in enumerate("abc"):
        few[k] = i
    assert few.items() == [("a", 0), ("b", 1), ("c", 2)] and list(few) == ["a", "b", "c"]
    assert few["b"] == 1
    with pytest.raises(KeyError):
        few["z"]
