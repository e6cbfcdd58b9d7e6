"""MQTT 3.1.1 and 5.0 packets to and from bytes: pure functions, no I/O.

``decode(ptype, flags, body, version)`` reads one packet's body (``framing.py`` cuts the
stream into packets); ``encode(packet, version)`` writes a whole packet. Anything that
is not a valid packet raises ``MqttError`` carrying the reason MQTT 5.0 gives for it
(0x81 malformed, 0x82 protocol error, ...): the connection answers with that reason and
closes (3.1.1: closes). Written by hand: no maintained library offers a server-side codec
for both versions (the issue names those looked at).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .codes import (
    CONNACK_311,
    CONNACK_311_REASON,
    PROPERTIES,
    REPEATABLE,
    REQUIRED_FLAGS,
    WILL,
    Kind,
    PacketType,
    Prop,
    Reason,
    Version,
)
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
    PropValue,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)

MAX_VARINT = 268_435_455  # four bytes of seven bits
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


class MqttError(Exception):
    """Not a valid packet (or not allowed here): ``reason`` says which, as MQTT 5.0 names it."""

    def __init__(self, reason: Reason, description: str) -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description


def malformed(description: str) -> MqttError:
    return MqttError(Reason.MALFORMED_PACKET, description)


def protocol_error(description: str) -> MqttError:
    return MqttError(Reason.PROTOCOL_ERROR, description)


# ------------------------------------------------------------------ primitives


class Reader:
    """Reads a packet's body front to back; every read past the end is malformed."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise malformed(f"packet ends {n - self.left()} byte(s) early")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise malformed("packet ends early")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def varint(self) -> int:
        value = shift = 0
        for _ in range(4):
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise malformed("variable byte integer longer than four bytes")

    def binary(self) -> bytes:
        return self.take(self.u16())

    def string(self) -> str:
        return utf8(self.binary())


def utf8(raw: bytes) -> str:
    """An MQTT UTF-8 string: well-formed (no surrogates: Python's codec refuses them) and no
    U+0000 (MQTT-1.5.4-1, -2)."""
    try:
        text = str(raw, "utf-8")  # (bytes, or a view of a large packet's buffer)
    except UnicodeDecodeError:
        raise malformed("a string is not well-formed UTF-8") from None
    if "\x00" in text:
        raise malformed("a string holds U+0000")
    return text


def varint(n: int) -> bytes:
    if not 0 <= n <= MAX_VARINT:
        raise ValueError(f"{n} does not fit a variable byte integer")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def binary(b: bytes) -> bytes:
    if len(b) > 0xFFFF:
        raise ValueError("binary data over 65,535 bytes")
    return _U16.pack(len(b)) + b


def string(s: str) -> bytes:
    return binary(s.encode("utf-8"))


# ------------------------------------------------------------------ properties


def read_props(r: Reader, where: PacketType | str) -> Props:
    length = r.varint()
    end = r.pos + length
    if end > len(r.data):
        raise malformed("properties run past the packet")
    out: list[tuple[Prop, PropValue]] = []
    seen: set[Prop] = set()
    while r.pos < end:
        ident = r.varint()
        try:
            p = Prop(ident)
        except ValueError:
            raise malformed(f"unknown property 0x{ident:02x}") from None
        kind, allowed = PROPERTIES[p]
        if where not in allowed:
            raise malformed(f"property {p.name} is not allowed in {getattr(where, 'name', where)}")
        if p in seen and p not in REPEATABLE:
            raise protocol_error(f"property {p.name} given twice")
        seen.add(p)
        out.append((p, _read_value(r, kind)))
    if r.pos != end:
        raise malformed("a property runs past the property length")
    return tuple(out)


def _read_value(r: Reader, kind: Kind) -> PropValue:
    if kind is Kind.BYTE:
        return r.byte()
    if kind is Kind.U16:
        return r.u16()
    if kind is Kind.U32:
        return r.u32()
    if kind is Kind.VARINT:
        return r.varint()
    if kind is Kind.STRING:
        return r.string()
    if kind is Kind.BINARY:
        return r.binary()
    return (r.string(), r.string())


def write_props(props: Props) -> bytes:
    body = bytearray()
    for p, value in props:
        kind = PROPERTIES[p][0]
        body += varint(p)
        if isinstance(value, int) and kind in _INTEGERS:
            body += _INTEGERS[kind](value)
        elif isinstance(value, str) and kind is Kind.STRING:
            body += string(value)
        elif isinstance(value, bytes) and kind is Kind.BINARY:
            body += binary(value)
        elif isinstance(value, tuple) and kind is Kind.PAIR:
            body += string(value[0]) + string(value[1])
        else:
            raise ValueError(f"property {p.name} is written as {kind.value}, not {type(value).__name__}")
    return varint(len(body)) + bytes(body)


_INTEGERS: dict[Kind, Callable[[int], bytes]] = {Kind.BYTE: lambda v: bytes([v]), Kind.U16: _U16.pack,
                                                 Kind.U32: _U32.pack, Kind.VARINT: varint}


# ------------------------------------------------------------------ decoding


def decode(ptype: int, flags: int, body: bytes, version: Version | None) -> Packet:
    """One packet from its fixed header's type and flags and its body. ``version``: the
    connection's (None before its CONNECT, which is the only packet read then)."""
    if ptype == 3 and version is not None:  # (the per-message packet first: no enum, no Reader)
        return decode_publish(flags, body, version is Version.V5)
    try:
        t = PacketType(ptype)
    except ValueError:
        raise malformed(f"packet type {ptype} is reserved") from None
    if t is not PacketType.PUBLISH and flags != REQUIRED_FLAGS[t]:
        raise malformed(f"{t.name} with fixed-header flags {flags:04b}")
    if t is PacketType.CONNECT:
        return _connect(Reader(body))
    if version is None:
        raise protocol_error(f"{t.name} before CONNECT")
    v5 = version is Version.V5
    r = Reader(body)
    packet = _DECODERS[t](r, flags, v5)
    if r.left():
        raise malformed(f"{r.left()} byte(s) after the end of {t.name}")
    return packet


def _connect(r: Reader) -> Connect:
    name = r.binary()
    level = r.byte()
    if name != b"MQTT" or level not in (4, 5):
        if name in (b"MQTT", b"MQIsdp"):
            raise MqttError(Reason.UNSUPPORTED_PROTOCOL_VERSION, f"protocol level {level} (MQTT 3.1.1 is 4, 5.0 is 5)")
        raise protocol_error(f"protocol name {name!r} is not MQTT")
    version = Version(level)
    v5 = version is Version.V5
    cflags = r.byte()
    if cflags & 0x01:
        raise malformed("CONNECT's reserved flag is set")
    will_flag, will_qos, will_retain = bool(cflags & 0x04), (cflags >> 3) & 0x03, bool(cflags & 0x20)
    if will_qos == 3:
        raise malformed("will QoS 3")
    if not will_flag and (will_qos or will_retain):
        raise malformed("will QoS or retain without a will")
    has_user, has_password = bool(cflags & 0x80), bool(cflags & 0x40)
    if not v5 and has_password and not has_user:
        raise malformed("a password without a user name (MQTT 3.1.1)")
    keep_alive = r.u16()
    props = read_props(r, PacketType.CONNECT) if v5 else ()
    client_id = r.string()
    will = None
    if will_flag:
        will_props = read_props(r, WILL) if v5 else ()
        topic = r.string()
        will = Will(topic, r.binary(), will_qos, will_retain, will_props)
    username = r.string() if has_user else None
    password = r.binary() if has_password else None
    if r.left():
        raise malformed(f"{r.left()} byte(s) after the end of CONNECT")
    return Connect(version, client_id, bool(cflags & 0x02), keep_alive, username, password, will, props)


def _connack(r: Reader, flags: int, v5: bool) -> Connack:
    ack = r.byte()
    if ack & 0xFE:
        raise malformed("CONNACK's reserved flags are set")
    code = r.byte()
    if v5:
        return Connack(bool(ack & 1), _reason(code), read_props(r, PacketType.CONNACK))
    if code not in CONNACK_311_REASON:
        raise malformed(f"CONNACK return code {code}")
    return Connack(bool(ack & 1), CONNACK_311_REASON[code])


def decode_publish(flags: int, body: bytes, v5: bool) -> Publish:
    """A PUBLISH's body. The hot path: read by index, not through a ``Reader`` (a message
    without properties, the usual case, costs a third of what the general path does); the
    same checks, and the same ``MqttError`` for what is wrong."""
    qos = (flags >> 1) & 0x03
    if qos == 3:
        raise malformed("PUBLISH with QoS 3")
    dup = bool(flags & 0x08)
    if dup and qos == 0:
        raise malformed("PUBLISH with DUP at QoS 0")
    end = len(body)
    if end < 2:
        raise malformed("packet ends early")
    pos = 2 + ((body[0] << 8) | body[1])
    if pos > end:
        raise malformed(f"packet ends {pos - end} byte(s) early")
    topic = utf8(body[2:pos])
    packet_id = None
    if qos:
        if pos + 2 > end:
            raise malformed("packet ends early")
        packet_id = (body[pos] << 8) | body[pos + 1]
        if packet_id == 0:
            raise malformed("packet identifier 0")
        pos += 2
    props: Props = ()
    if v5:
        if pos < end and body[pos] == 0:
            pos += 1  # (no properties)
        else:
            r = Reader(body)
            r.pos = pos
            if not isinstance(body, bytes):  # (a large one's view of its buffer: ``framing.py``)
                r = Reader(bytes(body[:r.varint() + r.pos]))  # (its properties read from bytes)
                r.pos = pos
            props = read_props(r, PacketType.PUBLISH)
            pos = r.pos
    return Publish(topic, body[pos:], qos, bool(flags & 0x01), dup, packet_id, props)


def _publish(r: Reader, flags: int, v5: bool) -> Publish:
    packet = decode_publish(flags, r.data[r.pos:], v5)
    r.pos = len(r.data)
    return packet


Decoder = Callable[[Reader, int, bool], Packet]


def _ack(kind: PacketType) -> Decoder:
    def read(r: Reader, flags: int, v5: bool) -> Ack:
        packet_id = r.u16()
        if packet_id == 0:
            raise malformed("packet identifier 0")
        reason: Reason = Reason.SUCCESS  # (5.0: both may be left out, meaning success)
        props: Props = ()
        if v5 and r.left():
            reason = _reason(r.byte())
            if r.left():
                props = read_props(r, kind)
        return Ack(kind, packet_id, reason, props)
    return read


def _subscribe(r: Reader, flags: int, v5: bool) -> Subscribe:
    packet_id = _packet_id(r)
    props = read_props(r, PacketType.SUBSCRIBE) if v5 else ()
    subs = []
    while r.left():
        topic = r.string()
        options = r.byte()
        if options & (0xC0 if v5 else 0xFC):
            raise malformed("a subscription's reserved option bits are set")
        qos, handling = options & 0x03, (options >> 4) & 0x03
        if qos == 3 or handling == 3:
            raise malformed("a subscription with QoS 3 or retain handling 3")
        subs.append(Subscription(topic, qos, bool(options & 0x04), bool(options & 0x08), handling))
    if not subs:
        raise protocol_error("SUBSCRIBE without a topic filter")
    return Subscribe(packet_id, tuple(subs), props)


def _suback(r: Reader, flags: int, v5: bool) -> Suback:
    packet_id = _packet_id(r)
    props = read_props(r, PacketType.SUBACK) if v5 else ()
    return Suback(packet_id, tuple(r.take(r.left())), props)


def _unsubscribe(r: Reader, flags: int, v5: bool) -> Unsubscribe:
    packet_id = _packet_id(r)
    props = read_props(r, PacketType.UNSUBSCRIBE) if v5 else ()
    filters = []
    while r.left():
        filters.append(r.string())
    if not filters:
        raise protocol_error("UNSUBSCRIBE without a topic filter")
    return Unsubscribe(packet_id, tuple(filters), props)


def _unsuback(r: Reader, flags: int, v5: bool) -> Unsuback:
    packet_id = _packet_id(r)
    if not v5:
        return Unsuback(packet_id)
    props = read_props(r, PacketType.UNSUBACK)
    return Unsuback(packet_id, tuple(_reason(b) for b in r.take(r.left())), props)


def _disconnect(r: Reader, flags: int, v5: bool) -> Disconnect:
    if not v5 or not r.left():
        return Disconnect()
    reason = _reason(r.byte())
    return Disconnect(reason, read_props(r, PacketType.DISCONNECT) if r.left() else ())


def _auth(r: Reader, flags: int, v5: bool) -> Auth:
    if not v5:
        raise malformed("AUTH is MQTT 5.0 only")
    if not r.left():
        return Auth()
    reason = _reason(r.byte())
    return Auth(reason, read_props(r, PacketType.AUTH) if r.left() else ())


def _empty(packet: PingReq | PingResp) -> Decoder:
    return lambda r, flags, v5: packet


def _packet_id(r: Reader) -> int:
    packet_id = r.u16()
    if packet_id == 0:
        raise malformed("packet identifier 0")
    return packet_id


def _reason(code: int) -> Reason:
    try:
        return Reason(code)
    except ValueError:
        raise malformed(f"reason code 0x{code:02x} is not defined") from None


_DECODERS: dict[PacketType, Decoder] = {
    PacketType.CONNACK: _connack, PacketType.PUBLISH: _publish,
    PacketType.PUBACK: _ack(PacketType.PUBACK), PacketType.PUBREC: _ack(PacketType.PUBREC),
    PacketType.PUBREL: _ack(PacketType.PUBREL), PacketType.PUBCOMP: _ack(PacketType.PUBCOMP),
    PacketType.SUBSCRIBE: _subscribe, PacketType.SUBACK: _suback, PacketType.UNSUBSCRIBE: _unsubscribe,
    PacketType.UNSUBACK: _unsuback, PacketType.PINGREQ: _empty(PingReq()), PacketType.PINGRESP: _empty(PingResp()),
    PacketType.DISCONNECT: _disconnect, PacketType.AUTH: _auth,
}


# ------------------------------------------------------------------ encoding


def encode(packet: Packet, version: Version) -> bytes:
    """A whole packet: fixed header, variable header, payload."""
    v5 = version is Version.V5
    ptype: PacketType = packet.type
    flags = REQUIRED_FLAGS[ptype]
    if isinstance(packet, Publish):
        return publish_bytes(packet.topic, packet.payload, packet.qos, packet.dup, packet.packet_id, packet.props, v5,
                             packet.retain)
    if isinstance(packet, Ack):
        return ack_bytes(ptype, packet.packet_id, packet.reason, packet.props, v5)
    if isinstance(packet, Connack):
        code = packet.reason if v5 else CONNACK_311.get(packet.reason, CONNACK_311[Reason.SERVER_UNAVAILABLE])
        body = bytes([1 if packet.session_present else 0, code]) + (write_props(packet.props) if v5 else b"")
    elif isinstance(packet, Connect):
        body = _encode_connect(packet)
    elif isinstance(packet, Subscribe):
        body = _U16.pack(packet.packet_id) + (write_props(packet.props) if v5 else b"")
        for s in packet.subscriptions:
            options = s.qos | (s.no_local << 2) | (s.retain_as_published << 3) | (s.retain_handling << 4) if v5 else s.qos
            body += string(s.filter) + bytes([options])
    elif isinstance(packet, Suback):
        body = _U16.pack(packet.packet_id) + (write_props(packet.props) if v5 else b"") + bytes(packet.reasons)
    elif isinstance(packet, Unsubscribe):
        body = _U16.pack(packet.packet_id) + (write_props(packet.props) if v5 else b"")
        body += b"".join(string(f) for f in packet.filters)
    elif isinstance(packet, Unsuback):
        body = _U16.pack(packet.packet_id)
        if v5:
            body += write_props(packet.props) + bytes(packet.reasons)
    elif isinstance(packet, (Disconnect, Auth)):
        body = b""
        if v5 and (packet.reason is not Reason.SUCCESS or packet.props):
            body = bytes([packet.reason]) + (write_props(packet.props) if packet.props else b"")
    else:  # PINGREQ, PINGRESP
        body = b""
    return bytes([(ptype << 4) | flags]) + varint(len(body)) + body


def publish_bytes(topic: str, payload: bytes, qos: int, dup: bool, packet_id: int | None, props: Props, v5: bool,
                  retain: bool = False) -> bytes:
    """A whole PUBLISH (the hot path: no packet object; ``encode`` of a ``Publish`` is this)."""
    head = string(topic)
    if qos:
        if packet_id is None:
            raise ValueError("a QoS 1 or 2 PUBLISH needs a packet id")
        head += _U16.pack(packet_id)
    if v5:
        head += write_props(props) if props else b"\x00"
    n = len(head) + len(payload)
    flags = (0x08 if dup else 0) | (qos << 1) | (0x01 if retain else 0)
    return (bytes((0x30 | flags, n)) if n < 128 else bytes((0x30 | flags,)) + varint(n)) + head + payload


def ack_bytes(kind: int, packet_id: int, reason: Reason = Reason.SUCCESS, props: Props = (), v5: bool = False) -> bytes:
    """A whole PUBACK, PUBREC, PUBREL or PUBCOMP (5.0 leaves out a success without properties)."""
    first = (kind << 4) | (0x02 if kind == PacketType.PUBREL else 0)
    if v5 and (reason is not Reason.SUCCESS or props):
        body = _U16.pack(packet_id) + bytes((reason,)) + (write_props(props) if props else b"")
        return bytes((first,)) + varint(len(body)) + body
    return bytes((first, 2, packet_id >> 8, packet_id & 0xFF))


def _encode_connect(c: Connect) -> bytes:
    v5 = c.version is Version.V5
    will = c.will
    cflags = ((0x80 if c.username is not None else 0) | (0x40 if c.password is not None else 0)
              | (0x02 if c.clean_start else 0))
    if will is not None:
        cflags |= 0x04 | (will.qos << 3) | (0x20 if will.retain else 0)
    body = string("MQTT") + bytes([c.version, cflags]) + _U16.pack(c.keep_alive)
    if v5:
        body += write_props(c.props)
    body += string(c.client_id)
    if will is not None:
        body += (write_props(will.props) if v5 else b"") + string(will.topic) + binary(will.payload)
    if c.username is not None:
        body += string(c.username)
    if c.password is not None:
        body += binary(c.password)
    return body
