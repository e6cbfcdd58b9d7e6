"""The harness's checker on hand-made records: each violation is caught and counted."""

from __future__ import annotations

from once.tools.harness.check import Arrival, check


def _pub(n: int, accepted: range | None = None) -> list[dict]:
    ev = [{"e": "sent", "id": f"p:{i}", "t": float(i)} for i in range(n)]
    ev += [{"e": "accepted", "id": f"p:{i}", "t": float(i) + 0.5} for i in (accepted if accepted is not None else range(n))]
    return ev


def _arr(ids: list[int], redelivered: set[int] = frozenset(), prefix: str = "p") -> list[Arrival]:  # type: ignore[assignment]
    return [Arrival(f"{prefix}:{i}", i in redelivered, float(k)) for k, i in enumerate(ids)]


def test_clean_run_passes():
    r = check("x", {"p": _pub(5)}, {"s": ("once", _arr([0, 1, 2, 3, 4]))})
    assert r.ok and r.violations == {"lost": 0, "duplicated": 0, "reordered": 0, "phantom": 0, "rejected": 0}


def test_each_violation_is_counted_with_examples():
    arrivals = _arr([0, 2, 1, 2, 9], prefix="p") + [Arrival("ghost:1", False, 9.0)]
    r = check("x", {"p": _pub(10)}, {"s": ("once", arrivals)})
    s = r.subscribers[0]
    assert not r.ok
    assert (s.lost, s.duplicated, s.reordered, s.phantom) == (6, 1, 1, 1)
    assert s.examples["lost"][:2] == ["p:3", "p:4"] and s.examples["phantom"] == ["ghost:1"]
    assert s.examples["reordered"] == ["p:1"] and s.examples["duplicated"] == ["p:2"]


def test_standard_client_may_repeat_only_marked():
    r = check("x", {"p": _pub(3)}, {"marked": ("proton", _arr([0, 1, 1, 2], redelivered={1})),
                                   "unmarked": ("proton", _arr([0, 1, 1, 2]))})
    marked, unmarked = r.subscribers
    assert (marked.duplicated, marked.marked_repeats) == (0, 1)
    assert (unmarked.duplicated, unmarked.marked_repeats) == (1, 0)
    assert r.violations["duplicated"] == 1


def test_our_client_may_not_repeat_even_marked():
    r = check("x", {"p": _pub(2)}, {"s": ("once", _arr([0, 1, 1], redelivered={1}))})
    assert r.subscribers[0].duplicated == 1 and not r.ok


def test_a_standard_publishers_resend_is_a_retry_not_a_duplicate():
    """A Proton publisher sends again, as a new delivery, what its dead router never
    answered: a subscriber may get that message id twice. Ours never may."""
    q = [{**e, "id": e["id"].replace("p:", "q:")} for e in _pub(2)]
    p = _pub(3) + [{"e": "sent", "id": "p:1", "t": 2.5}]
    arrivals = _arr([0, 1, 1, 2]) + _arr([0, 1, 1], prefix="q")
    r = check("x", {"p": p, "q": q}, {"s": ("once", arrivals)}, retrying={"p"})
    s = r.subscribers[0]
    assert (s.publisher_retries, s.duplicated, s.lost, s.phantom) == (1, 1, 0, 0)
    assert s.examples["duplicated"] == ["q:1"]
    assert "publisher retries 1" in r.text()


def test_only_accepted_messages_must_arrive():
    r = check("x", {"p": _pub(4, accepted=range(2))}, {"s": ("once", _arr([0, 1]))})
    assert r.ok and r.accepted == 2 and r.sent == 4


def test_rejections_fail_the_run():
    events = _pub(1) + [{"e": "rejected", "id": "p:0", "t": 1.0}]
    assert not check("x", {"p": events}, {}).ok


def test_time_to_resume_is_the_pause_after_the_fault():
    # a subscriber at 1 message per 10 ms, killed at t=1.0; two late arrivals, then back at 1.8
    times = [i / 100 for i in range(101)] + [1.005, 1.01] + [1.8 + i / 100 for i in range(20)]
    arrivals = [Arrival(f"p:{i}", False, t) for i, t in enumerate(times)]
    r = check("x", {"p": _pub(len(times))}, {"s": ("once", arrivals)},
              faults=[{"t": 1.0, "at": 1.0, "fault": "kill A", "router": "A"}], homes={"s": "A", "p": "B"})
    assert abs(r.resume[0]["seconds"] - 0.8) < 1e-9 and r.resume[0]["by"].startswith("s's")


def test_a_pause_that_begins_after_the_next_fault_is_not_charged_to_this_one():
    # steady until 2.0, a short pause at 1.0-1.2 (first fault), a long one 2.0-3.5 (second fault at 1.9)
    times = [i / 100 for i in range(100)] + [1.2 + i / 100 for i in range(81)] + [3.5 + i / 100 for i in range(10)]
    arrivals = [Arrival(f"p:{i}", False, t) for i, t in enumerate(times)]
    faults = [{"t": 1.0, "at": 1.0, "fault": "kill A", "router": "A"},
              {"t": 1.9, "at": 1.9, "fault": "kill B", "router": "A"}]
    r = check("x", {"p": _pub(len(times))}, {"s": ("once", arrivals)}, faults=faults, homes={"s": "A"})
    assert abs(r.resume[0]["seconds"] - 0.2) < 1e-9
    assert abs(r.resume[1]["seconds"] - 1.6) < 1e-9


def test_a_consumer_group_is_one_subscriber():
    # w1 (ours) and w2 (standard) share p:0-5; p:5 reaches nobody
    w1 = [Arrival("p:0", False, 0.0), Arrival("p:2", False, 2.0), Arrival("p:3", True, 3.5)]
    w2 = [Arrival("p:1", False, 1.0), Arrival("p:3", False, 3.0), Arrival("p:2", True, 4.0), Arrival("p:4", False, 4.5)]
    r = check("x", {"p": _pub(6)}, {"w1": ("once", w1), "w2": ("proton", w2), "s": ("once", _arr(list(range(6))))},
              groups={"g": ["w1", "w2"]})
    g = next(s for s in r.subscribers if s.name == "group g")
    assert [s.name for s in r.subscribers] == ["group g", "s"]  # members are not reported one by one
    # p:3 again at w1 after w2 (standard) had it, marked: allowed; p:2 again after w1 (ours) had it: twice
    assert (g.distinct, g.lost, g.duplicated, g.marked_repeats, g.reordered) == (5, 1, 1, 1, 0)
    assert g.examples["duplicated"] == ["p:2@w2"] and g.examples["lost"] == ["p:5"]


def test_a_standard_publishers_resend_is_not_judged_for_order():
    """A resend is a new message to the network, published after newer ones: in a group it
    may go to the other member, after newer ones there, or come alone, its first copy lost
    (seeds 486011, 486094 of a mixed soak). The same arrivals of a message sent once are a
    reorder (and in the group a repeat)."""
    once = _pub(4)
    twice = once + [{"e": "sent", "id": "p:1", "t": 3.5}]  # (p:1 sent again after p:3)
    w1 = [Arrival("p:0", False, 0.0), Arrival("p:1", False, 1.0)]
    w2 = [Arrival("p:2", False, 2.0), Arrival("p:3", False, 3.0), Arrival("p:1", False, 4.0)]
    members = {"w1": ("once", w1), "w2": ("proton", w2)}
    alone = {"s": ("proton", _arr([0, 2, 3, 1]))}  # (p:1's first copy never got through)
    r = check("x", {"p": twice}, {**members, **alone}, groups={"g": ["w1", "w2"]}, retrying={"p"})
    g, s = r.subscribers
    assert (g.publisher_retries, g.reordered, g.duplicated, s.reordered) == (1, 0, 0, 0) and r.ok, r.text()
    r = check("x", {"p": once}, {**members, **alone}, groups={"g": ["w1", "w2"]}, retrying={"p"})
    g, s = r.subscribers
    assert (g.reordered, g.duplicated, s.reordered) == (1, 1, 1) and g.examples["reordered"] == ["p:1@w2"]


def test_a_subscriber_is_owed_what_its_topic_or_pattern_matches():
    pubs = {"p": _pub(3), "q": [{**e, "id": e["id"].replace("p:", "q:")} for e in _pub(3)]}
    topics = {"p": "m/1", "q": "m/2", "all": "m/+", "one": "m/1"}
    both = _arr([0, 1, 2]) + _arr([0, 1, 2], prefix="q")
    r = check("x", pubs, {"all": ("once", both), "one": ("once", _arr([0, 1, 2]))}, topics=topics)
    assert r.ok, r.text()
    # a pattern subscriber missing the other topic's messages lost them; a topic subscriber
    # that got another topic's was sent what it is not owed
    r = check("x", pubs, {"all": ("once", _arr([0, 1, 2])), "one": ("once", both)}, topics=topics)
    lost = {s.name: (s.lost, s.phantom) for s in r.subscribers}
    assert lost == {"all": (3, 0), "one": (0, 3)}
