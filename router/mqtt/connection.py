"""The sans-IO MQTT server connection (3.1.1 and 5.0): bytes in, events out, bytes to send.

Like the AMQP engine (``router/amqp/connection.py``):

* ``receive_data(data)`` returns the events the client's packets cause. A protocol
  violation never raises: the engine queues what MQTT says to send (a DISCONNECT with the
  reason, or a refusing CONNACK; MQTT 3.1.1 just closes), reports ``ConnectionFailed``
  and is closed from then on.
* The application answers through methods (``accept``, ``refuse``, ``puback``,
  ``pubrec``, ``suback``, ``unsuback``) and sends with ``publish``; misuse raises
  ``ValueError``.
* ``data_to_send()`` returns what to write; ``tick(now)`` checks the keep-alive (the
  engine never reads a clock).

Flow control both ways is MQTT 5.0's receive maximum: we advertise ``receive_maximum``
(QoS 1 and 2 messages the client may have unanswered here; one more is 0x93), and we
send the client at most its own (``credit()``). Topic aliases from the client are
resolved here (up to ``topic_alias_maximum``); we send none.
"""

from __future__ import annotations

from enum import Enum

from .codec import MqttError, ack_bytes, decode, encode, malformed, protocol_error, publish_bytes
from .codes import PacketType, Prop, Reason, Version
from .events import (
    ClientConnected,
    ClientDisconnected,
    ConnectionFailed,
    DeliveryAcked,
    DeliveryReceived,
    MessagePublished,
    PublishReleased,
    SubscribeRequested,
    UnsubscribeRequested,
)
from .framing import Frame, PacketReader
from .packets import (
    Ack,
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    Props,
    Publish,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    prop,
)
from .topics import check_name

Event = object


class PacketTooLarge(ValueError):
    """A message over the client's maximum packet size (MQTT 5.0): it cannot have it."""


class State(Enum):
    AWAIT_CONNECT = "await-connect"  # the first packet must be CONNECT
    CONNECTING = "connecting"  # CONNECT read, not answered yet: what follows waits
    CONNECTED = "connected"
    CLOSED = "closed"


# Packets a client may send once connected (the others are the server's, or CONNECT again).
# the acknowledgements by packet type number (the fast path of ``_frame``)
ACK_KINDS = {4: PacketType.PUBACK, 5: PacketType.PUBREC, 6: PacketType.PUBREL, 7: PacketType.PUBCOMP}
FROM_CLIENT = frozenset({PacketType.PUBLISH, PacketType.PUBACK, PacketType.PUBREC, PacketType.PUBREL,
                         PacketType.PUBCOMP, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE, PacketType.PINGREQ,
                         PacketType.DISCONNECT, PacketType.AUTH})


class MqttConnection:
    def __init__(self, receive_maximum: int = 1000, topic_alias_maximum: int = 64,
                 max_packet_size: int = 1024 * 1024, release_by_app: bool = False) -> None:
        self.state = State.AWAIT_CONNECT
        # A PUBREC from the client is answered with PUBREL by the application (``pubrel``),
        # not here: a persistent session makes the PUBREC known to the network first.
        self.release_by_app = release_by_app
        self.session_present = False
        self.version: Version | None = None
        self.connect: Connect | None = None
        self.receive_maximum = receive_maximum
        self.topic_alias_maximum = topic_alias_maximum
        self.max_packet_size = max_packet_size
        self.reader = PacketReader(max_packet_size)
        self.out = bytearray()
        self.waiting: list[Frame] = []  # read while CONNECTING: taken once accepted
        self.failed: ConnectionFailed | None = None
        # the client's QoS 1 and 2 messages not answered yet, and QoS 2 ones answered with
        # PUBREC awaiting PUBREL (both count against the receive maximum we advertise)
        self.unanswered: dict[int, int] = {}  # packet id -> QoS
        self.awaiting_release: set[int] = set()
        self.complete_props: dict[int, Props] = {}  # PUBREC's properties, for its PUBCOMP
        self.aliases: dict[int, str] = {}
        # ours to the client: packet id -> QoS of what is in flight (QoS 2: until PUBCOMP)
        self.in_flight: dict[int, int] = {}
        self.client_receive_maximum = 65535
        self.client_max_packet_size = 0  # 0: no limit
        self.next_id = 1
        self.keep_alive = 0.0
        self.last_heard: float | None = None  # (set by tick: the engine reads no clock)
        self.heard = True
        # The router reads the client's bytes (False while it pauses reading: back-pressure;
        # a client it does not read is not silent, and keep-alive does not count the time).
        self.reading = True

    # ------------------------------------------------------------------ bytes

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    @property
    def remote_open(self) -> Connect | None:
        """The client's CONNECT once read (the connection shell's handshake deadline ends there)."""
        return self.connect

    def close(self, error: object = None) -> None:
        """Close from our side: the router stops, or a bug of ours (``error``: any
        description; MQTT 5.0 says 0x8B server shutting down, or 0x83 for an error)."""
        self.disconnect(Reason.SERVER_SHUTTING_DOWN if error is None else Reason.IMPLEMENTATION_SPECIFIC_ERROR)

    def receive_data(self, data: bytes) -> list[Event]:
        if self.state is State.CLOSED:
            return []
        self.heard = True
        events: list[Event] = []
        try:
            frames = self.reader.feed(data)
        except MqttError as e:
            return self._fail(e, events)
        for frame in frames:
            if self.closed:  # (a packet of this read closed it)
                break
            if self.state is State.CONNECTING:
                self.waiting.append(frame)
                continue
            try:
                self._frame(frame, events)
            except MqttError as e:
                return self._fail(e, events)
        return events

    def data_to_send(self) -> bytes:
        out = bytes(self.out)
        self.out.clear()
        return out

    def tick(self, now: float) -> float | None:
        """Keep-alive: a client silent for 1.5 times its keep-alive is gone (MQTT-3.1.2-24).
        Returns when to tick again (None: never)."""
        if self.state is not State.CONNECTED or not self.keep_alive:
            return None
        if self.heard or self.last_heard is None or not self.reading:
            self.heard = False
            self.last_heard = now
        deadline = self.last_heard + 1.5 * self.keep_alive
        if now >= deadline:
            self._fail(MqttError(Reason.KEEP_ALIVE_TIMEOUT, f"nothing from the client for {1.5 * self.keep_alive:g} s"),
                       [])
            return None
        # (ticked at least every half keep-alive: what came between two ticks counts from the
        # later one, so a silent client is found between 1.5 and 2 times its keep-alive)
        return min(deadline, now + self.keep_alive / 2)

    def _send(self, packet: Packet) -> None:
        assert self.version is not None
        self.out += encode(packet, self.version)

    def _fail(self, error: MqttError, events: list[Event]) -> list[Event]:
        if self.state is State.AWAIT_CONNECT or self.version is None:
            pass  # (nothing agreed yet: close)
        elif self.state is State.CONNECTING:
            if self.version is Version.V5 or error.reason in (Reason.UNSUPPORTED_PROTOCOL_VERSION,):
                self._send(Connack(reason=error.reason))
        elif self.version is Version.V5:
            self._send(Disconnect(error.reason, ((Prop.REASON_STRING, error.description[:200]),)))
        self.failed = ConnectionFailed(error.reason, error.description)
        self.state = State.CLOSED
        events.append(self.failed)
        return events

    # ------------------------------------------------------------------ packets in

    def _frame(self, frame: Frame, events: list[Event]) -> None:
        ptype, flags, body = frame
        if self.state is State.AWAIT_CONNECT:
            if ptype != PacketType.CONNECT:
                raise protocol_error("the first packet must be CONNECT")
            try:
                connect = decode(ptype, flags, body, None)
            except MqttError as e:
                if e.reason is Reason.UNSUPPORTED_PROTOCOL_VERSION:
                    # (MQTT 5.0 3.1.2.2: answered with CONNACK 0x84, in 3.1.1's layout, which every level reads)
                    self.version = Version.V311
                    self.state = State.CONNECTING
                raise
            assert isinstance(connect, Connect)
            self.version = connect.version
            self.connect = connect
            self.state = State.CONNECTING
            events.append(ClientConnected(connect))
            return
        if ptype == PacketType.CONNECT:
            raise protocol_error("a second CONNECT")
        if 4 <= ptype <= 7 and len(body) == 2 and flags == (2 if ptype == 6 else 0):
            # (the usual acknowledgement, success with nothing else: no packet object)
            pid = (body[0] << 8) | body[1]
            if pid == 0:
                raise malformed("packet identifier 0")
            self._ack(ACK_KINDS[ptype], pid, Reason.SUCCESS, events)
            return
        packet = decode(ptype, flags, body, self.version)
        if packet.type not in FROM_CLIENT:
            raise protocol_error(f"{packet.type.name} is the server's to send")
        self._packet(packet, events)

    def _packet(self, p: Packet, events: list[Event]) -> None:
        if isinstance(p, Publish):
            self._publish(p, events)
        elif isinstance(p, Ack):
            self._ack(p.kind, p.packet_id, p.reason, events)
        elif isinstance(p, Subscribe):
            events.append(SubscribeRequested(p))
        elif isinstance(p, Unsubscribe):
            events.append(UnsubscribeRequested(p))
        elif isinstance(p, PingReq):
            self._send(PingResp())
        elif isinstance(p, Disconnect):
            self.state = State.CLOSED
            events.append(ClientDisconnected(p.reason, p.reason is Reason.DISCONNECT_WITH_WILL))
        elif isinstance(p, Auth):
            raise MqttError(Reason.BAD_AUTHENTICATION_METHOD, "no extended authentication here")

    def _publish(self, p: Publish, events: list[Event]) -> None:
        alias = prop(p.props, Prop.TOPIC_ALIAS)
        topic = p.topic
        if alias is not None:
            if not isinstance(alias, int) or not 1 <= alias <= self.topic_alias_maximum:
                raise MqttError(Reason.TOPIC_ALIAS_INVALID, f"topic alias {alias!r} (at most {self.topic_alias_maximum})")
            if topic:
                self.aliases[alias] = topic
            elif alias in self.aliases:
                topic = self.aliases[alias]
            else:
                raise protocol_error(f"topic alias {alias} was never set")
        check_name(topic)
        if p.qos and p.packet_id is not None:
            pid = p.packet_id
            if p.qos == 2 and pid in self.awaiting_release:
                # Sent again before its PUBREL: the same message, answered already (MQTT-4.3.3-10).
                self._send(Ack(PacketType.PUBREC, pid))
                return
            if pid in self.unanswered:
                if self.unanswered[pid] == p.qos and p.dup:
                    return  # (its answer is on its way)
                raise MqttError(Reason.PACKET_IDENTIFIER_IN_USE, f"packet id {pid} is still unanswered")
            if len(self.unanswered) + len(self.awaiting_release) >= self.receive_maximum:
                raise MqttError(Reason.RECEIVE_MAXIMUM_EXCEEDED, f"more than {self.receive_maximum} messages "
                                                                 "unanswered")
            self.unanswered[pid] = p.qos
        if alias is not None or topic != p.topic:
            p = Publish(topic, p.payload, p.qos, p.retain, p.dup, p.packet_id,
                        tuple((k, v) for k, v in p.props if k is not Prop.TOPIC_ALIAS))
        events.append(MessagePublished(p))

    def _ack(self, kind: PacketType, pid: int, reason: Reason, events: list[Event]) -> None:
        v5 = self.version is Version.V5
        if kind is PacketType.PUBREL:
            if pid in self.awaiting_release:
                self.awaiting_release.discard(pid)
                self.out += ack_bytes(PacketType.PUBCOMP, pid, Reason.SUCCESS, self.complete_props.pop(pid, ()), v5)
                events.append(PublishReleased(pid))
            else:  # (a PUBREL resent after our PUBCOMP was lost, or to the router before us: complete it again)
                self.out += ack_bytes(PacketType.PUBCOMP, pid, Reason.PACKET_IDENTIFIER_NOT_FOUND
                                      if v5 and not self.session_present else Reason.SUCCESS, (), v5)
            return
        qos = self.in_flight.get(pid)
        if kind is PacketType.PUBACK and qos == 1 or kind is PacketType.PUBCOMP and qos == 2:
            del self.in_flight[pid]
            events.append(DeliveryAcked(pid, reason))
        elif kind is PacketType.PUBREC and qos == 2:
            if reason >= 0x80:  # refused: the flow ends here (MQTT 5.0 4.3.3)
                del self.in_flight[pid]
                events.append(DeliveryAcked(pid, reason))
            else:
                if not self.release_by_app:
                    self.out += ack_bytes(PacketType.PUBREL, pid)
                events.append(DeliveryReceived(pid, reason))
        else:
            raise protocol_error(f"{kind.name} for packet id {pid}, which is not in flight at QoS "
                                 f"{'2' if kind is not PacketType.PUBACK else '1'}")

    # ------------------------------------------------------------------ answers

    def accept(self, session_present: bool = False, props: Props = ()) -> list[Event]:
        """Answer the CONNECT (CONNACK success) and take the packets that came after it."""
        if self.state is not State.CONNECTING or self.connect is None:
            raise ValueError("accept() answers a CONNECT")
        c = self.connect
        self.state = State.CONNECTED
        self.keep_alive = float(c.keep_alive)
        ours: Props = ()
        if c.version is Version.V5:
            rm = prop(c.props, Prop.RECEIVE_MAXIMUM)
            self.client_receive_maximum = rm if isinstance(rm, int) and rm else 65535
            mps = prop(c.props, Prop.MAXIMUM_PACKET_SIZE)
            self.client_max_packet_size = mps if isinstance(mps, int) else 0
            ours = ((Prop.RECEIVE_MAXIMUM, self.receive_maximum), (Prop.TOPIC_ALIAS_MAXIMUM, self.topic_alias_maximum),
                    (Prop.MAXIMUM_PACKET_SIZE, self.max_packet_size), (Prop.RETAIN_AVAILABLE, 0), *props)
        self.session_present = session_present and not c.clean_start
        self._send(Connack(self.session_present, Reason.SUCCESS, ours))
        events: list[Event] = []
        waiting, self.waiting = self.waiting, []
        for frame in waiting:
            if self.state is State.CLOSED:
                break
            try:
                self._frame(frame, events)
            except MqttError as e:
                return self._fail(e, events)
        return events

    def refuse(self, reason: Reason, description: str = "") -> None:
        """Refuse the CONNECT with ``reason`` (MQTT 3.1.1: its nearest return code) and close."""
        if self.state is not State.CONNECTING:
            raise ValueError("refuse() answers a CONNECT")
        props: Props = ((Prop.REASON_STRING, description[:200]),) if description and self.version is Version.V5 else ()
        self._send(Connack(False, reason, props))
        self.state = State.CLOSED

    def puback(self, packet_id: int, reason: Reason = Reason.SUCCESS, props: Props = ()) -> None:
        """Answer the client's QoS 1 message (``props``: 5.0 only)."""
        if self.unanswered.pop(packet_id, None) != 1:
            raise ValueError(f"no QoS 1 message {packet_id} to answer")
        self.out += ack_bytes(PacketType.PUBACK, packet_id, reason, props, self.version is Version.V5)

    def pubrec(self, packet_id: int, reason: Reason = Reason.SUCCESS, props: Props = ()) -> None:
        """Answer the client's QoS 2 message: it is ours (success), or refused (>= 0x80)."""
        if self.unanswered.pop(packet_id, None) != 2:
            raise ValueError(f"no QoS 2 message {packet_id} to answer")
        if reason < 0x80:
            self.awaiting_release.add(packet_id)
            if props and self.version is Version.V5:
                self.complete_props[packet_id] = props  # (the PUBCOMP says it again: clients see that one)
        self.out += ack_bytes(PacketType.PUBREC, packet_id, reason, props, self.version is Version.V5)

    def suback(self, packet_id: int, reasons: list[int]) -> None:
        """Per filter, the QoS granted or a failure reason (3.1.1: any failure is 0x80)."""
        if self.version is not Version.V5:
            reasons = [r if r < 0x80 else 0x80 for r in reasons]
        self._send(Suback(packet_id, tuple(reasons)))

    def unsuback(self, packet_id: int, reasons: list[Reason]) -> None:
        self._send(Unsuback(packet_id, tuple(reasons) if self.version is Version.V5 else ()))

    def disconnect(self, reason: Reason, description: str = "") -> None:
        """Close from our side (MQTT 5.0 says why; 3.1.1 just closes)."""
        if self.state is State.CONNECTED and self.version is Version.V5:
            self._send(Disconnect(reason, ((Prop.REASON_STRING, description[:200]),) if description else ()))
        self.state = State.CLOSED

    # ------------------------------------------------------------------ messages out

    def credit(self) -> int:
        """How many QoS 1 and 2 messages we may send now (the client's receive maximum)."""
        return max(0, self.client_receive_maximum - len(self.in_flight))

    def publish(self, topic: str, payload: bytes, qos: int, props: Props = (), dup: bool = False,
                packet_id: int | None = None) -> int | None:
        """Send a message; returns its packet id (None at QoS 0). ``packet_id`` resends one
        still in flight (with ``dup``). Raises ``ValueError`` with no credit."""
        if self.state is not State.CONNECTED:
            raise ValueError("not connected")
        if qos and packet_id is None:
            packet_id = self.reserve(qos)
        elif qos and packet_id is not None:
            self.in_flight[packet_id] = qos
        v5 = self.version is Version.V5
        raw = publish_bytes(topic, payload, qos, dup and qos > 0, packet_id if qos else None, props if v5 else (), v5)
        if self.client_max_packet_size and len(raw) > self.client_max_packet_size:
            if qos and packet_id is not None:
                self.in_flight.pop(packet_id, None)
            raise PacketTooLarge(f"a message of {len(raw)} bytes; the client takes at most {self.client_max_packet_size}")
        self.out += raw
        return packet_id if qos else None

    def reserve(self, qos: int) -> int:
        """A packet id for a QoS 1 or 2 message we are about to send (``publish`` with it)."""
        if not self.credit():
            raise ValueError("the client's receive maximum is reached")
        packet_id = self._free_id()
        self.in_flight[packet_id] = qos
        return packet_id

    def pubrel(self, packet_id: int) -> None:
        """Release our QoS 2 message ``packet_id`` (its PUBREC came, here or to a router
        before us: a resumed session sends it again with the PUBREL)."""
        if self.state is not State.CONNECTED:
            raise ValueError("not connected")
        self.in_flight[packet_id] = 2
        self.out += ack_bytes(PacketType.PUBREL, packet_id)

    def _free_id(self) -> int:
        for _ in range(65535):
            pid = self.next_id
            self.next_id = pid % 65535 + 1
            if pid not in self.in_flight:
                return pid
        raise ValueError("every packet id is in flight")
