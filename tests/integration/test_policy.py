"""Authorization (issue 29): the topology's ``policy`` against real clients on real routers.
Proton's attaches the policy refuses get ``amqp:unauthorized-access`` naming the rule, and
nothing else on the connection is disturbed; MQTT's get "not authorized"; every router of
a network enforces it for the clients that attach there."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from once.router.security.users import add_user
from once.tools.topology_ports import free_port
from proton import ConnectionException, Delivery, LinkException, Message
from proton.utils import BlockingConnection
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import RouterProcess, _spawn

ACCEPTED = Delivery.ACCEPTED

POLICY = {
    "users": {"alice": {"publish": ["orders/eu/#"], "subscribe": ["orders/+/new"], "groups": ["billing-*"]},
              "carol": {"publish": ["limits/#"], "subscribe": ["limits/#"], "max_connections": 2, "max_sessions": 2,
                        "max_links": 3, "max_message_size": 1000}},
    "groups": {"ops": {"publish": ["#"], "subscribe": ["#"], "groups": ["*"]}},
    "default": {"subscribe": ["public/#"]},
}


def _topology(tmp: Path, routers: int = 1) -> Path:
    add_user(tmp / "users.yaml", "alice", "apw")
    add_user(tmp / "users.yaml", "bob", "bpw", ("ops",))
    add_user(tmp / "users.yaml", "carol", "cpw")
    ids = "AB"[:routers]
    doc: dict[str, Any] = {
        "routers": {rid: {"listen": f"127.0.0.1:{free_port()}", "mqtt": f"127.0.0.1:{free_port()}",
                          **({"inter_router": f"127.0.0.1:{free_port()}"} if routers > 1 else {})} for rid in ids},
        "links": [list(ids)] if routers > 1 else [],
        "auth": {"users_file": "users.yaml", "plain_without_tls": True,
                 **({"router_secret": "a-secret-for-tests"} if routers > 1 else {})},
        "groups": {"billing-*": "shared", "other-*": "shared"},
        "policy": POLICY,
    }
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def router(tmp_path: Path):
    r = RouterProcess(_topology(tmp_path))
    yield r
    r.stop()


def _as(r: RouterProcess, user: str | None, password: str = "") -> BlockingConnection:
    if user is None:
        return BlockingConnection(r.url, timeout=10)
    return BlockingConnection(r.url, user=user, password=password, allowed_mechs="PLAIN", timeout=10)


def _refused(make: Any) -> str:
    with pytest.raises((LinkException, ConnectionException)) as e:
        make()
    return str(e.value)


def test_attaches_the_policy_refuses_name_the_rule_and_leave_the_connection_alone(router):
    conn = _as(router, "alice", "apw")
    ok = conn.create_sender("orders/eu/new")
    said = _refused(lambda: conn.create_sender("orders/us/1"))
    assert "amqp:unauthorized-access" in said
    assert "user alice may not publish to 'orders/us/1' (policy.users.alice.publish: orders/eu/#)" in said
    said = _refused(lambda: conn.create_receiver("orders/#", name="too-wide"))
    assert "may not subscribe to 'orders/#'" in said and "policy.users.alice.subscribe: orders/+/new" in said
    conn.create_receiver("orders/eu/new", name="narrow", credit=0)  # (covered by orders/+/new)
    conn.close()
    # the refusals disturbed nothing else: the same connection's publisher still publishes
    conn = _as(router, "alice", "apw")
    ok = conn.create_sender("orders/eu/new")
    assert _refused(lambda: conn.create_sender("orders/us/1"))
    sub = ProtonSubscriber(router.url, "orders/eu/new", name="ops-watch", user="bob", password="bpw",
                           allowed_mechs="PLAIN")
    delivery = ok.send(Message(body="eu order"))
    assert delivery.remote_state == ACCEPTED and sub.get().body == "eu order"
    sub.close()
    conn.close()


def test_a_user_may_what_its_groups_allow_and_anonymous_what_the_default_does(router):
    sub = ProtonSubscriber(router.url, "public/news", name="anon-news")  # anonymous: the default rule
    anon = _as(router, None)
    said = _refused(lambda: anon.create_receiver("orders/eu/new", name="anon-orders"))
    assert "user anonymous may not subscribe to 'orders/eu/new' (policy.default.subscribe: public/#)" in said
    pub = ProtonPublisher(router.url, "public/news", user="bob", password="bpw", allowed_mechs="PLAIN")
    assert pub.send_wait("from ops") == ACCEPTED and sub.get().body == "from ops"
    said = _refused(lambda: anon.create_sender("public/news"))
    assert "no policy entry" not in said and "policy.default.publish: (none)" in said
    anon.close()
    pub.close()
    sub.close()


def test_consumer_groups_a_user_may_join(router):
    conn = _as(router, "alice", "apw")
    conn.create_receiver("orders/eu/new", name="billing-1")
    said = _refused(lambda: conn.create_receiver("orders/eu/new", name="other-1"))
    assert "may not join consumer group 'other-1' (policy.users.alice.groups: billing-*)" in said
    conn.close()


def test_mqtt_subscribe_and_publish_are_refused_as_not_authorized(router):
    acks: queue.Queue[Any] = queue.Queue()
    pubacks: queue.Queue[Any] = queue.Queue()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="alice-mqtt", protocol=mqtt.MQTTv5)
    c.username_pw_set("alice", "apw")
    c.on_subscribe = lambda cl, u, mid, codes, props: acks.put([int(getattr(x, "value", x)) for x in codes])
    c.on_publish = lambda cl, u, mid, rc, props: pubacks.put((mid, int(getattr(rc, "value", rc))))
    c.connect(*router.mqtt, keepalive=30)
    c.loop_start()
    try:
        c.subscribe([("orders/+/new", 1), ("orders/#", 1)])
        assert acks.get(timeout=15) == [1, 0x87]
        info = c.publish("orders/us/1", b"no", qos=1)
        assert pubacks.get(timeout=15) == (info.mid, 0x87)
        info = c.publish("orders/eu/new", b"yes", qos=1)
        assert pubacks.get(timeout=15) == (info.mid, 0)
    finally:
        c.disconnect()
        c.loop_stop()


def test_every_router_of_the_network_enforces_the_policy(tmp_path):
    topo = _topology(tmp_path, routers=2)
    routers = RouterProcess.adopt_all({rid: (_spawn(topo, rid), topo) for rid in "AB"})
    try:
        b = routers["B"]
        said = _refused(lambda: _as(b, "alice", "apw").create_receiver("orders/#", name="wide-at-b"))
        assert "policy.users.alice.subscribe: orders/+/new" in said
        sub = ProtonSubscriber(b.url, "orders/eu/new", name="at-b", user="alice", password="apw",
                               allowed_mechs="PLAIN")
        pub = ProtonPublisher(routers["A"].url, "orders/eu/new", user="alice", password="apw", allowed_mechs="PLAIN")
        assert pub.send_wait("across") == ACCEPTED and sub.get().body == "across"
        said = _refused(lambda: _as(routers["A"], "alice", "apw").create_sender("orders/us/new"))
        assert "policy.users.alice.publish" in said
        pub.close()
        sub.close()
    finally:
        for r in routers.values():
            r.stop()


def test_a_users_connections_links_and_message_size_are_limited_with_the_rule_named(router):
    first, second = _as(router, "carol", "cpw"), _as(router, "carol", "cpw")
    said = _refused(lambda: _as(router, "carol", "cpw").create_sender("limits/a"))
    assert "amqp:resource-limit-exceeded" in said
    assert "user carol may hold 2 connections on this router (policy.users.carol.max_connections)" in said
    second.close()
    for i in range(3):
        first.create_sender(f"limits/{i}")
    said = _refused(lambda: first.create_sender("limits/3"))
    assert "user carol may hold 3 links on this router (policy.users.carol.max_links)" in said
    first.close()
    # the message size: the attach says carol's, and a larger message is refused on its link
    conn = _as(router, "carol", "cpw")
    sender = conn.create_sender("limits/size")
    assert sender.link.remote_max_message_size == 1000
    assert sender.send(Message(body="small"), timeout=10).remote_state == ACCEPTED
    said = _refused(lambda: sender.send(Message(body="x" * 2000), timeout=10))
    assert "amqp:link:message-size-exceeded" in said
    conn.close()
    # others are not limited by carol's limits
    many = [_as(router, "bob", "bpw") for _ in range(3)]
    for c in many:
        c.close()


async def test_a_users_sessions_are_limited(router):
    import asyncio

    from once.client.shell import connect
    from once.router.amqp.events import SessionEnded
    from once.router.amqp.sasl import SaslClientConfig

    ended: list[Any] = []
    begun: list[Any] = []

    def handler(proto: Any, events: list[Any]) -> None:
        ended.extend(e for e in events if isinstance(e, SessionEnded))
        if proto.engine.remote_open is not None and not begun:
            begun.extend(proto.engine.begin() for _ in range(3))
        proto.flush()

    conn = await connect(router.host, router.port, "carol-sessions", handler,
                         sasl=SaslClientConfig("PLAIN", "carol", "cpw"))
    deadline = asyncio.get_running_loop().time() + 10
    while not ended:
        assert asyncio.get_running_loop().time() < deadline, "no session ended"
        await asyncio.sleep(0.02)
    assert len(ended) == 1 and ended[0].error is not None
    assert ended[0].error.condition == "amqp:resource-limit-exceeded"
    assert "user carol may hold 2 sessions on this router (policy.users.carol.max_sessions)" in ended[0].error.description
    assert ended[0].session is begun[2]  # (the third: the first two go on)
    conn.transport.close()


async def test_a_burst_of_subscriber_attaches_counts_those_waiting_for_the_network(tmp_path):
    """A subscriber's attach is answered once the network has it (router B's echo): the ones
    still waiting count against max_links, so four sent at once with room for three get one
    refused."""
    import asyncio

    from once.client.shell import connect
    from once.router.amqp.events import LinkAttached, LinkDetached
    from once.router.amqp.performatives import Role, Source, Target
    from once.router.amqp.sasl import SaslClientConfig

    detached: list[Any] = []
    attached: list[Any] = []
    links: list[Any] = []

    def handler(proto: Any, events: list[Any]) -> None:
        detached.extend(e for e in events if isinstance(e, LinkDetached))
        attached.extend(e for e in events if isinstance(e, LinkAttached))
        if proto.engine.remote_open is not None and not links:
            session = proto.engine.begin()
            links.extend(proto.engine.attach(session, f"burst-{i}", Role.RECEIVER, source=Source(address=f"limits/{i}"),
                                             target=Target()) for i in range(4))
        proto.flush()

    path = _topology(tmp_path, routers=2)
    routers = RouterProcess.adopt_all({rid: (_spawn(path, rid), path) for rid in "AB"})
    a, b = routers["A"], routers["B"]
    try:
        conn = await connect(a.host, a.port, "carol-burst", handler, sasl=SaslClientConfig("PLAIN", "carol", "cpw"))
        deadline = asyncio.get_running_loop().time() + 10
        while len(attached) < 4 or not detached:
            assert asyncio.get_running_loop().time() < deadline, (attached, detached)
            await asyncio.sleep(0.02)
        assert len(detached) == 1 and detached[0].link is links[3]  # (the fourth: the first three go on)
        assert detached[0].error.condition == "amqp:resource-limit-exceeded"
        assert "user carol may hold 3 links on this router (policy.users.carol.max_links)" in \
            detached[0].error.description
        conn.transport.close()
    finally:
        a.stop()
        b.stop()


def _differing(tmp: Path, key: str, at_a: list[str], at_b: list[str]) -> tuple[RouterProcess, RouterProcess]:
    """Routers A and B of one network whose policy files give alice's ``key`` differently."""
    base = _topology(tmp, routers=2)
    doc = yaml.safe_load(base.read_text())
    files = {}
    for rid, patterns in (("A", at_a), ("B", at_b)):
        doc["policy"]["users"]["alice"][key] = patterns
        files[rid] = tmp / f"topology-{rid}.yaml"
        files[rid].write_text(yaml.safe_dump(doc))
    # (both started before either is waited for)
    routers = RouterProcess.adopt_all({rid: (_spawn(path, rid), path) for rid, path in files.items()})
    return routers["A"], routers["B"]


def test_a_copy_from_a_router_with_a_laxer_policy_is_refused_where_the_subscriber_is(tmp_path):
    """DISPATCH-1388's case: the user travels with every message between routers, so the
    subscriber's router checks it against its own policy, whatever the root's said."""
    # A lets alice publish anywhere in orders/; B does not
    a, b = _differing(tmp_path, "publish", ["orders/#"], ["orders/eu/#"])
    try:
        sub = ProtonSubscriber(b.url, "orders/us/new", name="ops-at-b", user="bob", password="bpw",
                               allowed_mechs="PLAIN")
        pub = ProtonPublisher(a.url, "orders/us/new", user="alice", password="apw", allowed_mechs="PLAIN")
        got = pub.send_raw(bytes(Message(body="us order").encode())).get(timeout=20)
        assert isinstance(got, tuple), got
        state, condition, description = got
        assert state == Delivery.REJECTED and condition == "amqp:unauthorized-access"
        assert description == ("router B: user alice may not publish to 'orders/us/new' "
                               "(policy.users.alice.publish: orders/eu/#)")
        assert sub.messages.empty()
        ok = ProtonPublisher(a.url, "orders/eu/new", user="alice", password="apw", allowed_mechs="PLAIN")
        eu = ProtonSubscriber(b.url, "orders/eu/new", name="eu-at-b", user="bob", password="bpw",
                              allowed_mechs="PLAIN")
        assert ok.send_wait("eu order") == ACCEPTED and eu.get().body == "eu order"
        for c in (sub, pub, ok, eu):
            c.close()
    finally:
        a.stop()
        b.stop()


def test_a_root_sends_nothing_to_a_subscriber_its_policy_refuses_though_its_router_let_it_attach(tmp_path):
    """The other half: the user travels with each subscription, and the publisher's router
    (the root) checks it against its own policy before it sends a copy there."""
    # A: alice may subscribe to orders/+/new only; B lets her subscribe to all of orders/
    a, b = _differing(tmp_path, "subscribe", ["orders/+/new"], ["orders/#"])
    try:
        wide = ProtonSubscriber(b.url, "orders/#", name="alice-wide", user="alice", password="apw",
                                allowed_mechs="PLAIN")
        narrow = ProtonSubscriber(b.url, "orders/us/new", name="alice-narrow", user="alice", password="apw",
                                  allowed_mechs="PLAIN")
        pub = ProtonPublisher(a.url, "orders/us/new", user="bob", password="bpw", allowed_mechs="PLAIN")
        assert pub.send_wait("one") == ACCEPTED
        assert narrow.get().body == "one"  # (allowed by both: it came)
        assert wide.messages.empty()  # (A's policy refuses orders/# to alice: nothing was sent to it)
        for c in (wide, narrow, pub):
            c.close()
        log = "".join(a.stderr_lines())
        assert "sends nothing to subscriber" in log and "alice-wide at router B" in log
        assert "user alice may not subscribe to 'orders/#' (policy.users.alice.subscribe: orders/+/new)" in log
    finally:
        a.stop()
        b.stop()
