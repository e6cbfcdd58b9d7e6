"""Hostile publishers against a live router (issue 12): what they send never breaks
exactly-once for anyone else, and never takes the router's window or memory."""

from __future__ import annotations

from proton import Delivery
from proton.utils import BlockingConnection, LinkDetached
from support.proton_clients import ProtonPublisher, ProtonSubscriber

ACCEPTED = Delivery.ACCEPTED
REJECTED = Delivery.REJECTED
# A header whose delivery-count is a string; an amqp-value "evil" follows. Proton decodes it.
POISON = bytes.fromhex("005370c0080540404040a10178005377a1046576696c")


def test_poison_header_is_rejected_at_the_publisher_and_never_delivered(router):
    sub = ProtonSubscriber(router.url, "poison", name="victim", auto_accept=False)
    pub = ProtonPublisher(router.url, "poison")
    state, condition, description = pub.send_raw(POISON).get(timeout=10)
    assert state == REJECTED
    assert condition == "amqp:decode-error" and "delivery-count" in description
    # The subscriber never saw it: the next message is the first it gets, and it is
    # accepted only once the subscriber accepts it.
    outcome = pub.send("after")
    assert sub.get().body == "after"
    assert outcome.empty()
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    assert sub.messages.empty()
    pub.close()
    sub.close()
    assert any("refused a message" in line and "delivery-count" in line for line in router.stderr_lines())


def test_a_valid_header_is_marked_when_released(router):
    sub = ProtonSubscriber(router.url, "marked", name="releaser", auto_accept=False)
    pub = ProtonPublisher(router.url, "marked")
    outcome = pub.send("m", durable=True, priority=9)
    first = sub.get()
    assert first.delivery_count == 0
    sub.command("release")
    again = sub.get()
    assert again.body == "m" and again.delivery_count == 1 and again.priority == 9 and again.durable
    assert outcome.empty()
    sub.command("accept")
    assert outcome.get(timeout=10) == ACCEPTED
    pub.close()
    sub.close()


def test_idle_sender_links_do_not_stop_another_publisher(router):
    attacker = BlockingConnection(router.url, timeout=30)
    idle = []
    refused = None
    for i in range(1100):  # more than one session may hold (Proton puts them all on one)
        try:
            idle.append(attacker.create_sender("idle", name=f"idle-{i}"))
        except LinkDetached as e:
            refused = e
            break
    # Another publisher, on another connection and topic, gets credit and gets through.
    sub = ProtonSubscriber(router.url, "busy", name="busy-sub", credit=500)
    pub = ProtonPublisher(router.url, "busy")
    outcomes = [pub.send(f"m{i}") for i in range(500)]
    assert all(o.get(timeout=30) == ACCEPTED for o in outcomes)
    assert [m.body for m in sub.take(500)] == [f"m{i}" for i in range(500)]
    pub.close()
    sub.close()
    # The links beyond what one session may hold were refused, with the limit named.
    assert len(idle) == 1024 and refused is not None
    assert "amqp:resource-limit-exceeded" in str(refused) and "max_links_per_session 1024" in str(refused)
    attacker.close()
