"""An MQTT client's messages to the network: a publisher of the core per topic, and the
identity of its QoS 2 messages (``docs/mqtt.md``, "Sessions in the network").

A QoS 2 message's delivery tag is (the session's epoch, its packet id): a DUP resent to
another router after ours died is the same gid there, and merges with the network's
record. Within an epoch a packet id is used once; one used again moves the epoch on. A
router after us knows only the latest epoch, so the epoch moves on only when none of the
session's QoS 2 messages is in the network unanswered: a new one waits (held, in order,
with everything after it) until they are answered and every router in reach knows the
new epoch. A resumed session moves the epoch on before its first new message (the router
before us may have used any packet id in the old one).

QoS 0 and 1 tags are unique to the connection: a QoS 1 DUP resent elsewhere is a new
message there (at least once, its deliveries marked).
"""

from __future__ import annotations

import itertools
import secrets
from typing import TYPE_CHECKING

from once.records.table import Record

from ...core import Publisher
from ...mqtt.codes import Prop, Reason, Version
from ...mqtt.events import MessagePublished, PublishReleased
from .message import to_amqp
from .ports import MqttPublisherPort

if TYPE_CHECKING:
    from .view import ConnectionView

_ids = itertools.count(1)


def qos2_tag(epoch: int, packet_id: int) -> bytes:
    return b"\x02" + epoch.to_bytes(4, "big") + packet_id.to_bytes(2, "big")


class Inbound:
    """One connection's side of its client's messages."""

    def __init__(self, conn: ConnectionView) -> None:
        self.conn = conn
        self.nonce = secrets.token_bytes(8)  # (QoS 0 and 1 tags: unique to this connection)
        self.epoch = 0
        self.resumed_epoch = 0  # the epoch when it connected: DUP resends from before are of it
        self.epoch_fresh = True  # ``used`` is all of the epoch's (it began on this connection)
        self.used: set[int] = set()  # packet ids of QoS 2 messages in this epoch (here)
        self.open: set[int] = set()  # packet ids of QoS 2 messages published and not answered yet
        self.releasing: dict[int, tuple[str, bytes]] = {}  # PUBREC sent, awaiting PUBREL: packet id -> (topic, tag)
        self.held: list[MessagePublished] = []  # publishes waiting for a new epoch, in order
        self.held_bytes = 0  # their payloads' bytes: past the connection's share, reading pauses
        self.bumping = False  # a new epoch is on its way to the routers we reach
        self.publishers: dict[str, Publisher] = {}
        self.unsettled: dict[bytes, Record] = {}  # its QoS 1/2 messages in the network, by our tag

    def resumed(self, epoch: int) -> None:
        """The session resumes here: its messages from before are of ``epoch``."""
        self.epoch = self.resumed_epoch = epoch
        self.epoch_fresh = False  # (which packet ids the router before us used in it, we do not know)

    def _hold(self, event: MessagePublished, first: bool = False) -> None:
        """``event`` waits for a new epoch (in order). What waits counts against the
        connection's share of the router's bytes (``max_connection_bytes``): past it the
        client is read no more until they go (a client that reuses a packet id and then
        floods QoS 0 took 2 GB in 10 s: nothing bounded this queue)."""
        if first:
            self.held.insert(0, event)
        else:
            self.held.append(event)
        self.held_bytes += len(event.publish.payload)
        s = self.conn.router.settings
        if self.held_bytes > (s.max_connection_bytes or max(s.max_message_size, s.max_in_flight_bytes // 4)):
            self.conn.pause("held")

    def _unhold(self) -> MessagePublished:
        event = self.held.pop(0)
        self.held_bytes -= len(event.publish.payload)
        if not self.held:
            self.held_bytes = 0
            self.conn.resume("held")
        return event

    def publish(self, event: MessagePublished, held: bool = False) -> None:
        if self.held and not held:  # (an earlier one waits for a new epoch: this one keeps its place)
            self._hold(event)
            return
        conn = self.conn
        p = event.publish
        engine = conn.mqtt
        if p.retain and engine.version is Version.V5:
            engine.disconnect(Reason.RETAIN_NOT_SUPPORTED, "the network keeps no retained messages")
            conn.drop_all()
            return
        refusal = conn.unauthorized("publish", p.topic)
        if refusal is not None:
            self._refuse(event, Reason.NOT_AUTHORIZED, refusal)
            return
        pub = self._publisher(p.topic)
        if isinstance(pub, str):
            self._refuse(event, Reason.QUOTA_EXCEEDED, pub)
            return
        if p.qos == 2:
            assert p.packet_id is not None
            pid = p.packet_id
            if p.dup and pid not in self.used:
                tag = qos2_tag(self.resumed_epoch, pid)  # sent before, to us or to a router before us
            elif not self.epoch_fresh or pid in self.used:
                # A new epoch first. (Held here, reading on: a paused socket would not read
                # its PINGREQs, and the client would give the connection up. What it may send
                # meanwhile is bounded by the receive maximum we advertise.)
                self._hold(event, first=True)
                if not self._blocked(pid):
                    self._next_epoch()
                return
            else:
                tag = qos2_tag(self.epoch, pid)
            self.used.add(pid)
            self.open.add(pid)
        else:
            tag = bytes([p.qos]) + self.nonce + next(_ids).to_bytes(8, "big")
        if p.dup and tag not in pub.live:
            pub.resent.add(tag)  # (its deliveries are marked: a router before us may have made some)
        record = conn.core.publish(pub, tag, to_amqp(p.topic, p.payload, p.props, p.qos), p.qos == 0,
                                   (p.qos, p.packet_id or 0, tag))
        if p.qos and record is not None:
            # (by our tag: a record taken over from a copy is under the copy's tag in the core;
            # its outcome comes as the batch ends, never within ``publish``)
            self.unsettled[tag] = record
        if conn.past_bounds(pub):
            # Its records passed a byte bound (the link's, the router's, its user's or host's):
            # read no more from the client until there is room (MQTT has no credit; TCP's is
            # the only one). Its publishers take no credit from the core: a credit pass over
            # a client's 10,000 topics, a publisher each, cost what the messages did.
            conn.wait_for_room()

    def _blocked(self, pid: int) -> bool:
        """Whether a QoS 2 message other than ``pid`` is in the network, unanswered."""
        return bool(self.open) and self.open != {pid}

    def _next_epoch(self) -> None:
        """The epoch moves on; the held publishes go once every router we reach knows it."""
        if self.bumping:
            return
        self.bumping = True
        self.epoch += 1
        self.used = set()
        self.epoch_fresh = True
        conn = self.conn
        session = conn.session
        if session is None:
            conn.router.call_soon(self._release_held)
            return
        session.epoch = self.epoch
        assert conn.sessions is not None
        conn.sessions.changed(session, self._release_held)

    def answered(self, packet_id: int) -> None:
        """Its QoS 2 message was answered: a publish held for a new epoch may go now."""
        self.open.discard(packet_id)
        if self.held and not self.bumping:
            first = self.held[0].publish
            if first.packet_id is not None and not self._blocked(first.packet_id):
                self._next_epoch()

    def _release_held(self) -> None:
        self.bumping = False
        conn = self.conn
        if conn.engine.closed:
            self.held.clear()
            self.held_bytes = 0
            return
        while self.held:
            event = self._unhold()
            self.publish(event, held=True)
            if self.held and self.held[0] is event:  # (it waits again: the rest stay behind it)
                break
        conn.router.flush()

    def settled(self, topic: str, tag: bytes) -> None:
        """Its message is settled (PUBACK sent, or PUBREL came): the network may forget it."""
        pub = self.publishers.get(topic)
        record = self.unsettled.pop(tag, None)
        if pub is not None and record is not None:
            self.conn.core.publisher_settled(pub, record)

    def gid(self, topic: str, tag: bytes) -> bytes:
        """The gid of its unsettled message ``tag`` (b"": none)."""
        record = self.unsettled.get(tag)
        return record.gid if record is not None else b""

    def released(self, event: PublishReleased) -> None:
        entry = self.releasing.pop(event.packet_id, None)
        if entry is not None:
            self.settled(*entry)

    def _refuse(self, event: MessagePublished, reason: Reason, why: str) -> None:
        """MQTT 5.0 answers a QoS 1 or 2 message with ``reason``; a QoS 0 one has no answer
        and is dropped; 3.1.1 has no refusal but closing (its 4.8 allows it)."""
        p, engine = event.publish, self.conn.mqtt
        if engine.version is not Version.V5:
            engine.disconnect(reason, why)
            self.conn.drop_all()
        elif p.qos == 1 and p.packet_id is not None:
            engine.puback(p.packet_id, reason, ((Prop.REASON_STRING, why[:200]),))
        elif p.qos == 2 and p.packet_id is not None:
            engine.pubrec(p.packet_id, reason, ((Prop.REASON_STRING, why[:200]),))
        self.conn.dirty()

    def _publisher(self, topic: str) -> Publisher | str:
        """The core's publisher of ``topic`` for this client, made at its first message
        there. Each is a link of the connection: past ``max_links_per_connection`` (its
        subscriptions counted) or its user's or host's ``max_links``, the publisher made
        longest ago that holds nothing unanswered ends first (per-topic order is kept: it
        has no message in the network); why not, when none is idle."""
        pub = self.publishers.get(topic)
        if pub is None:
            conn = self.conn
            if conn.too_many_links(refuse=False) and not self.retire_idle():
                why = conn.too_many_links()  # (counted and logged once)
                if why:
                    return why
            persistent = conn.session is not None
            pub, _ = conn.lifecycle.attach_publisher(MqttPublisherPort(conn, topic), topic, conn.client_id,
                                                     f"mqtt:{topic}", True, conn.incarnation if persistent else None,
                                                     None, group=conn, credited=False)
            pub.user = conn.user or "anonymous"  # (it travels with the copies: ``core/peers.py``)
            pub.purses = conn.router.quotas.purses(pub.user, conn.host)  # (its user's and host's byte budgets)
            self.publishers[topic] = pub
            conn.lifecycle.publisher_answered(pub)
        return pub

    def retire_idle(self) -> bool:
        """End the idle publisher made longest ago (False: none is idle)."""
        for topic, pub in self.publishers.items():
            if not pub.live and not pub.in_flight and not pub.bytes:
                del self.publishers[topic]
                self.conn.lifecycle.publisher_gone(pub, False)
                return True
        return False

    def drop(self, suspend: bool) -> None:
        """The connection ends: its publishers are suspended (a persistent session) or end."""
        for pub in self.publishers.values():
            self.conn.lifecycle.publisher_gone(pub, suspend)
        self.publishers.clear()
        self.unsettled.clear()
        self.held.clear()
        self.held_bytes = 0
        self.releasing.clear()
