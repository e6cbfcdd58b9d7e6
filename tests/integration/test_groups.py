"""Consumer groups across a network of router processes, with standard Proton clients
that only set the JMS shared-subscription capabilities (issue 14)."""

from __future__ import annotations

import queue
import signal
import time
from collections import Counter

import pytest
from proton import Message
from support import holders
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.proton_events import ContainerThread, StreamPublisher
from support.proton_options import SharedSubscription
from support.routers import Network, wait_for

ACCEPTED = 36


@pytest.fixture
def line3(tmp_path):
    net = Network("line3.yaml", tmp_path)
    yield net
    net.stop()
    holders.reap()


def _drain(sub: ProtonSubscriber) -> list[Message]:
    out = []
    while True:
        try:
            out.append(sub.messages.get(timeout=0.3))
        except queue.Empty:
            return out


def test_members_on_three_routers_share_a_topic_each_message_once(line3):
    members = {r: ProtonSubscriber(line3[r].url, "orders", name="workers|global", container_id=f"app-{r}",
                                   options=SharedSubscription()) for r in "ABC"}
    plain = ProtonSubscriber(line3["B"].url, "orders", name="audit")
    pub = ProtonPublisher(line3["A"].url, "orders")
    n = 60
    outcomes = [pub.send(f"m{i}") for i in range(n)]
    assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * n
    assert [m.body for m in plain.take(n)] == [f"m{i}" for i in range(n)]
    got = {r: [m.body for m in _drain(s)] for r, s in members.items()}
    bodies = Counter(b for bs in got.values() for b in bs)
    assert bodies == Counter(f"m{i}" for i in range(n))  # every message once, across the group
    assert all(got.values()), got  # shared: every member had some
    for c in (*members.values(), plain, pub):
        c.close()


def test_a_killed_members_unaccepted_messages_go_to_another_member_marked(line3):
    holder = holders.holder(line3["C"].url, "app-c", "workers|global", topic="jobs", group="shared")
    worker = ProtonSubscriber(line3["A"].url, "jobs", name="workers|global", container_id="app-a",
                              options=SharedSubscription())
    n = 20
    pub = StreamPublisher(line3["B"].url, "jobs", n)
    pub.limit = n
    t = ContainerThread(pub)
    held = holders.lines(holder, 3)  # it holds them: it never accepts
    assert all(h["delivery_count"] == 0 for h in held)
    holder.send_signal(signal.SIGKILL)  # no detach: a standard client that cannot resume
    holder.wait()
    wait_for(lambda: pub.accepted() == n, timeout=30, what="every message accepted")
    got = _drain(worker)
    assert sorted(m.body for m in got) == list(range(n))  # each once at the surviving member
    marked = {m.body for m in got if m.delivery_count > 0 and m.first_acquirer is False}
    assert {h["body"] for h in held} <= marked
    worker.close()
    t.stop()


def test_what_a_member_on_another_router_releases_goes_to_another_member_marked(line3):
    """A member that releases a message (it cannot take it now) has it go to another member
    of its group, marked as a possible repeat, and never again to itself while another has
    not had it (``docs/protocol.md`` section 8): here the releaser gives back everything it
    is given, and the worker on the third router processes every message once."""
    releaser = ProtonSubscriber(line3["B"].url, "tasks", name="workers|global", container_id="app-b",
                                auto_accept=False, options=SharedSubscription())
    worker = ProtonSubscriber(line3["C"].url, "tasks", name="workers|global", container_id="app-c",
                              options=SharedSubscription())
    pub = ProtonPublisher(line3["A"].url, "tasks")
    n = 20
    outcomes = [pub.send(f"m{i}") for i in range(n)]
    released: list[str] = []
    deadline = time.monotonic() + 60
    while len(worker.arrivals) < n:  # (each reaches the worker, once released or at once)
        assert time.monotonic() < deadline, f"released {sorted(released)}, worker {len(worker.arrivals)}"
        try:
            m = releaser.get(timeout=0.2)
        except queue.Empty:
            continue  # (the rest may be the worker's, still arriving)
        assert m.delivery_count == 0, f"{m.body} came back to the member that released it"
        released.append(m.body)
        releaser.command("release")
    assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * n
    got = worker.take(n)
    assert sorted(m.body for m in got) == sorted(f"m{i}" for i in range(n))  # each once, all to the worker
    assert released and len(set(released)) == len(released)  # the releaser had some, each once
    for m in got:
        if m.body in released:  # passed on: marked, as it may have been seen before
            assert m.delivery_count >= 1 and m.first_acquirer is False, m.body
    assert worker.messages.empty() and releaser.messages.empty()
    for c in (releaser, worker, pub):
        c.close()


def test_a_member_alone_on_another_router_gets_what_it_released_again_marked(line3):
    member = ProtonSubscriber(line3["C"].url, "alone", name="workers|global", container_id="app-c",
                              auto_accept=False, options=SharedSubscription())
    pub = ProtonPublisher(line3["A"].url, "alone")
    outcome = pub.send("again")
    first = member.get()
    assert first.body == "again" and first.delivery_count == 0
    member.command("release")
    second = member.get(timeout=30)
    assert second.body == "again" and second.delivery_count >= 1 and second.first_acquirer is False
    member.command("accept")
    assert outcome.get(timeout=30) == ACCEPTED
    for c in (member, pub):
        c.close()


def test_keyed_messages_stay_on_one_member_in_order(line3):
    members = {r: ProtonSubscriber(line3[r].url, "keyed", name=f"k|{r}", container_id="app",
                                   options=SharedSubscription(global_=False)) for r in "AC"}
    pub = ProtonPublisher(line3["B"].url, "keyed", container_id="app")
    n = 40
    outcomes = [pub.send(f"{i % 4}:{i}", group_id=f"key-{i % 4}") for i in range(n)]
    assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * n
    got = {r: [m.body for m in _drain(s)] for r, s in members.items()}
    assert sorted(b for bs in got.values() for b in bs) == sorted(f"{i % 4}:{i}" for i in range(n))
    for key in range(4):
        where = [r for r, bs in got.items() if any(b.startswith(f"{key}:") for b in bs)]
        assert len(where) == 1, (key, got)
        seq = [int(b.split(":")[1]) for b in got[where[0]] if b.startswith(f"{key}:")]
        assert seq == sorted(seq)
    for c in (*members.values(), pub):
        c.close()


def test_an_exclusive_groups_standby_takes_over_in_order_when_the_active_member_dies(line3):
    active = holders.holder(line3["C"].url, "app-c", "ledger|global", topic="ledger", group="exclusive")
    standby = ProtonSubscriber(line3["A"].url, "ledger", name="ledger|global", container_id="app-a",
                               options=SharedSubscription(exclusive=True))
    assert standby.attach_properties == {"once:active": False}
    pub = StreamPublisher(line3["B"].url, "ledger", 15)
    pub.limit = 10
    t = ContainerThread(pub)
    assert [g["body"] for g in holders.lines(active, 10)] == list(range(10))
    with pytest.raises(queue.Empty):
        standby.messages.get(timeout=0.3)  # a standby gets nothing
    active.send_signal(signal.SIGKILL)
    active.wait()
    t.call(pub.release_rest)
    got = standby.take(15)
    assert [m.body for m in got] == list(range(15))  # in order, nothing lost
    # The dead one's are marked. (A newer one the root sent to the dead member before it
    # heard of the take-over is passed on by that member's router, and marked too.)
    assert all(m.delivery_count > 0 and m.first_acquirer is False for m in got[:10])
    wait_for(lambda: pub.accepted() == 15, timeout=30, what="every message accepted")
    standby.close()
    t.stop()


def test_a_durable_group_keeps_its_messages_while_it_has_no_member(line3):
    from proton.reactor import DurableSubscription

    only = holders.holder(line3["C"].url, "app-1", "audit|global", topic="audit", group="durable")
    only.send_signal(signal.SIGKILL)  # the group's only member vanishes: the group stays
    only.wait()
    pub = ProtonPublisher(line3["A"].url, "audit")
    first = pub.send("d0")
    with pytest.raises(queue.Empty):
        first.get(timeout=1.0)  # (a window in which it must not be answered: nobody has it yet)
    member = ProtonSubscriber(line3["B"].url, "audit", name="audit|global", container_id="app-2",
                              options=[SharedSubscription(), DurableSubscription()])
    later = [pub.send(f"d{i}") for i in (1, 2)]
    got = member.take(3)
    assert [m.body for m in got] == ["d0", "d1", "d2"]
    assert [o.get(timeout=30) for o in [first, *later]] == [ACCEPTED] * 3
    for c in (member, pub):
        c.close()


def test_keyed_messages_keep_their_order_while_a_member_joins_and_another_leaves(line3):
    def member(router: str, cid: str, accepting: bool = True) -> ProtonSubscriber:
        return ProtonSubscriber(line3[router].url, "orders", name="k|global", container_id=cid,
                                options=SharedSubscription(), auto_accept=accepting, credit=500)

    first = member("A", "app-a")
    leaving = member("C", "app-c", accepting=False)  # holds what it gets: those keys are in flight
    total = 600
    pub = StreamPublisher(line3["B"].url, "orders", total)
    pub.keys, pub.limit = 8, 200
    t = ContainerThread(pub)
    wait_for(lambda: len(first.arrivals) + len(leaving.arrivals) == 200, timeout=30, what="the first 200 out")
    joining = member("B", "app-b")  # a member joins mid-stream...
    t.call(lambda: setattr(pub, "limit", 400) or pub.send_more())
    wait_for(lambda: sum(len(m.arrivals) for m in (first, leaving, joining)) >= 400, timeout=30,
             what="the next 200 out")
    leaving.close()  # ...and another leaves without accepting: what it held goes to the others
    t.call(pub.release_rest)
    wait_for(lambda: pub.accepted() == total, timeout=30, what="every message accepted")
    # What the members that accept processed, in the order it reached them:
    done = sorted(a for m in (first, joining) for a in m.arrivals)
    bodies = [body for _, body in done]
    assert sorted(set(bodies)) == list(range(total)) and len(bodies) == total  # each once
    for key in range(8):
        seq = [body for body in bodies if body % 8 == key]
        assert seq == sorted(seq), f"key k{key}: a message overtook an older one across the rebalance: {seq}"
    assert joining.arrivals and leaving.arrivals  # the join and the leave both moved keys
    for c in (first, joining):
        c.close()
    t.stop()
