"""Pattern subscribers in the core (``router/core/topics.py``): a subscriber attached under
``a/+`` or ``a/#`` is one of the subscribers of every topic its pattern matches."""

from __future__ import annotations

from typing import Any

from once.router.config import Settings
from once.router.core import ACCEPTED, Core
from once.router.core.peers import Subscriber
from once.router.core.topics import TopicIndex
from support.batched import batched
from support.routes import TestRoutes
from test_core import Pub, Sub


def _core() -> Core:
    return batched(Core("A", Settings(), clock=lambda: 0.0, routes=TestRoutes()))


def _accept_all(core: Core, subs: dict[Any, Sub]) -> None:
    for sub, port in subs.items():
        for record, _, _ in port.sent:
            if sub in record.states:
                core.subscriber_update(sub, record, None, ACCEPTED, True)


def test_a_pattern_subscriber_gets_every_matching_topic_and_the_publisher_waits_for_it():
    core = _core()
    ports = {name: Sub() for name in ("exact", "plus", "hash", "other")}
    subs = {core.add_subscriber(ports["exact"], "a/b", "c", "exact", False)[0]: ports["exact"],
            core.add_subscriber(ports["plus"], "a/+", "c", "plus", False)[0]: ports["plus"],
            core.add_subscriber(ports["hash"], "a/#", "c", "hash", False)[0]: ports["hash"],
            core.add_subscriber(ports["other"], "x/+", "c", "other", False)[0]: ports["other"]}
    p = Pub()
    ab = core.add_publisher(p, "a/b", "cp", "ab", False)
    abc = core.add_publisher(p, "a/b/c", "cp", "abc", False)
    core.publish(ab, b"1", b"m1", False, "h1")
    core.publish(abc, b"1", b"m2", False, "h2")
    core.publish(ab, b"2", b"m3", False, "h3")
    got = {name: [r.payload for r, _, _ in port.sent] for name, port in ports.items()}
    assert got == {"exact": [b"m1", b"m3"], "plus": [b"m1", b"m3"], "hash": [b"m1", b"m2", b"m3"], "other": []}
    assert p.outcomes == []  # nobody accepted yet
    _accept_all(core, subs)
    assert sorted(h for h, o, _ in p.outcomes if o == ACCEPTED) == ["h1", "h2", "h3"]
    assert len(core.records) == 0


def test_a_pattern_that_leaves_is_no_longer_waited_for():
    core = _core()
    port = Sub()
    sub, _ = core.add_subscriber(port, "a/#", "c", "hash", False)
    p = Pub()
    pub = core.add_publisher(p, "a/b", "cp", "ab", False)
    core.publish(pub, b"1", b"m1", False, "h1")
    assert len(port.sent) == 1
    core.remove_subscriber(sub)
    assert [h for h, o, _ in p.outcomes] == ["h1"]  # answered without it (it closed)
    core.publish(pub, b"2", b"m2", False, "h2")
    assert len(port.sent) == 1 and not core.topics.get("a/b")


def _S(topic: str, link: str) -> Subscriber:
    return Subscriber(Sub(), topic, "c", link, False)


def test_the_index_merges_topics_and_patterns_and_forgets_views_when_subscribers_change():
    index = TopicIndex()
    exact, plus = _S("a/b", "1"), _S("a/+", "2")
    index.add(exact)
    assert index.get("a/b") == {("c", "1"): exact} and index.get("a/c") is None
    index.add(plus)
    assert index.get("a/b") == {("c", "1"): exact, ("c", "2"): plus}
    assert index.get("a/c") == {("c", "2"): plus} and "a/c" in index and "b" not in index
    assert set(index) == {"a/b", "a/+"} and index["a/+"] == {("c", "2"): plus}
    assert index.find(("c", "2")) is plus
    assert index.discard(plus) and index.get("a/c") is None and index.get("a/b") == {("c", "1"): exact}
    assert not index.discard(plus)  # (gone already)
    assert not index.patterns and not index.views


def test_a_group_of_a_pattern_is_its_own_group_and_shares_every_topic_it_matches():
    from once.records.membership import GroupId

    core = _core()
    ports = {name: Sub() for name in ("p1", "p2", "t1")}
    subs = {core.add_subscriber(ports["p1"], "a/+", "c", "p1", False, GroupId("g"))[0]: ports["p1"],
            core.add_subscriber(ports["p2"], "a/+", "c", "p2", False, GroupId("g"))[0]: ports["p2"],
            core.add_subscriber(ports["t1"], "a/b", "c", "t1", False, GroupId("g"))[0]: ports["t1"]}
    assert {s.group for s in subs} == {GroupId("g", "", "a/+"), GroupId("g")}  # (the core names the pattern)
    p = Pub()
    ab, ac = core.add_publisher(p, "a/b", "cp", "ab", False), core.add_publisher(p, "a/c", "cp", "ac", False)
    for i in range(10):
        core.publish(ab if i % 2 else ac, bytes([i]), f"m{i}".encode(), False, f"h{i}")
    pattern_got = sorted(r.payload for name in ("p1", "p2") for r, _, _ in ports[name].sent)
    assert pattern_got == sorted(f"m{i}".encode() for i in range(10))  # each once, across a/+'s group
    assert [r.payload for r, _, _ in ports["t1"].sent] == [f"m{i}".encode() for i in range(1, 10, 2)]  # a/b's
    _accept_all(core, subs)
    assert len(p.outcomes) == 10 and len(core.records) == 0
