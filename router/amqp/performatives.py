"""AMQP 1.0 composite types: performatives, SASL frames, termini, delivery states.

Each class declares its fields once; ``composite`` derives the list decoding (with the
type checks and defaults of the specification) and the described-list encoding.
Trailing null fields are not written, absent ones take their default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, TypeVar

from . import codec
from .errors import DecodeError
from .types import Array, TypeCode, symbol, ubyte, uint, ulong, ushort


class Role(IntEnum):
    SENDER = 0
    RECEIVER = 1


class SenderSettleMode(IntEnum):
    UNSETTLED = 0
    SETTLED = 1
    MIXED = 2


class ReceiverSettleMode(IntEnum):
    FIRST = 0
    SECOND = 1


@dataclass(frozen=True, slots=True)
class Kind:
    """How one field is checked on decode and typed on encode."""

    name: str
    check: Callable[[Any], bool]
    wire: Callable[[Any], Any]
    read: Callable[[Any], Any] = lambda v: v


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _multiple(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return None if v is None else symbol(v)
    return Array(TypeCode.SYMBOL, tuple(symbol(s) for s in v))


def _read_multiple(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return (v,)
    if isinstance(v, Array):
        return tuple(v.items)
    return tuple(v)


UINT = Kind("uint", _is_int, uint, int)
USHORT = Kind("ushort", _is_int, ushort, int)
ULONG = Kind("ulong", _is_int, ulong, int)
BOOL = Kind("boolean", lambda v: isinstance(v, bool), bool)
STR = Kind("string", lambda v: isinstance(v, str), str)
SYM = Kind("symbol", lambda v: isinstance(v, str), symbol)
BIN = Kind("binary", lambda v: isinstance(v, bytes), bytes)
MAP = Kind("map", lambda v: isinstance(v, dict), lambda v: v)
SYMS = Kind("symbol array", lambda v: isinstance(v, (str, Array, list)), _multiple, _read_multiple)
ANY = Kind("any", lambda v: True, lambda v: v)
SETTLE_S = Kind("ubyte", lambda v: _is_int(v) and 0 <= v <= 2, lambda v: ubyte(v), SenderSettleMode)
SETTLE_R = Kind("ubyte", lambda v: _is_int(v) and 0 <= v <= 1, lambda v: ubyte(v), ReceiverSettleMode)
ROLE = Kind("boolean", lambda v: isinstance(v, bool), lambda v: bool(v), lambda v: Role(int(v)))
UBYTE = Kind("ubyte", _is_int, ubyte, int)

T = TypeVar("T")


def composite(code: int, name: str, kinds: dict[str, Kind], mandatory: tuple[str, ...] = ()) -> Callable[[type[T]], type[T]]:
    """Class decorator: give a dataclass its AMQP descriptor, decoding and encoding."""

    def wrap(cls: type[T]) -> type[T]:
        flds = [f for f in fields(cls)]  # type: ignore[arg-type]
        names = [f.name for f in flds]
        spec = [(f.name, kinds.get(f.name, ANY)) for f in flds]

        def from_list(values: list[Any]) -> Any:
            kw: dict[str, Any] = {}
            for (fname, kind), v in zip(spec, values):
                if v is None:
                    continue
                if not kind.check(v):
                    raise DecodeError(f"{name}.{fname}: expected {kind.name}, got {type(v).__name__}")
                kw[fname] = kind.read(v)
            for m in mandatory:
                if m not in kw:
                    raise DecodeError(f"{name}.{m} is mandatory")
            try:
                return cls(**kw)
            except (TypeError, ValueError) as e:
                raise DecodeError(f"{name}: {e}") from None

        def amqp_encode(self: Any, out: bytearray) -> None:
            values = []
            for fname, kind in spec:
                v = getattr(self, fname)
                values.append(None if v is None else kind.wire(v))
            while values and values[-1] is None:
                values.pop()
            out.append(0x00)
            out.append(0x53)
            out.append(code)
            codec.encode(values, out)

        cls.DESCRIPTOR = code  # type: ignore[attr-defined]
        cls.NAME = name  # type: ignore[attr-defined]
        cls.from_list = staticmethod(from_list)  # type: ignore[attr-defined]
        cls.amqp_encode = amqp_encode  # type: ignore[attr-defined]
        cls.FIELD_NAMES = tuple(names)  # type: ignore[attr-defined]
        codec.register_composite(code, name, from_list)
        return cls

    return wrap


# ------------------------------------------------------------ errors, outcomes


@composite(0x1D, "amqp:error:list", {"condition": SYM, "description": STR, "info": MAP}, ("condition",))
@dataclass(slots=True)
class Error:
    condition: str = ""
    description: str | None = None
    info: dict[Any, Any] | None = None


@composite(0x23, "amqp:received:list", {"section_number": UINT, "section_offset": ULONG}, ("section_number", "section_offset"))
@dataclass(frozen=True, slots=True)
class Received:
    section_number: int = 0
    section_offset: int = 0


@composite(0x24, "amqp:accepted:list", {})
@dataclass(frozen=True, slots=True)
class Accepted:
    pass


@composite(0x25, "amqp:rejected:list", {})
@dataclass(frozen=True, slots=True)
class Rejected:
    error: Error | None = None


@composite(0x26, "amqp:released:list", {})
@dataclass(frozen=True, slots=True)
class Released:
    pass


@composite(0x27, "amqp:modified:list", {"delivery_failed": BOOL, "undeliverable_here": BOOL, "message_annotations": MAP})
@dataclass(frozen=True, slots=True)
class Modified:
    delivery_failed: bool | None = None
    undeliverable_here: bool | None = None
    message_annotations: dict[Any, Any] | None = None


Outcome = Accepted | Rejected | Released | Modified
DeliveryState = Outcome | Received
ACCEPTED = Accepted()
RELEASED = Released()
TERMINAL = (Accepted, Rejected, Released, Modified)


# ------------------------------------------------------------------ termini

_TERMINUS = {"address": STR, "durable": UINT, "expiry_policy": SYM, "timeout": UINT, "dynamic": BOOL,
             "dynamic_node_properties": MAP, "capabilities": SYMS}


@composite(0x28, "amqp:source:list", {**_TERMINUS, "distribution_mode": SYM, "filter": MAP, "outcomes": SYMS})
@dataclass(slots=True)
class Source:
    address: str | None = None
    durable: int = 0
    expiry_policy: str = "session-end"
    timeout: int = 0
    dynamic: bool = False
    dynamic_node_properties: dict[Any, Any] | None = None
    distribution_mode: str | None = None
    filter: dict[Any, Any] | None = None
    default_outcome: Any = None
    outcomes: tuple[str, ...] | None = None
    capabilities: tuple[str, ...] | None = None


@composite(0x29, "amqp:target:list", _TERMINUS)
@dataclass(slots=True)
class Target:
    address: str | None = None
    durable: int = 0
    expiry_policy: str = "session-end"
    timeout: int = 0
    dynamic: bool = False
    dynamic_node_properties: dict[Any, Any] | None = None
    capabilities: tuple[str, ...] | None = None


# ------------------------------------------------------------- performatives

_CAPS = {"offered_capabilities": SYMS, "desired_capabilities": SYMS, "properties": MAP}


@composite(0x10, "amqp:open:list", {"container_id": STR, "hostname": STR, "max_frame_size": UINT, "channel_max": USHORT,
                                    "idle_time_out": UINT, "outgoing_locales": SYMS, "incoming_locales": SYMS, **_CAPS},
           ("container_id",))
@dataclass(slots=True)
class Open:
    container_id: str = ""
    hostname: str | None = None
    max_frame_size: int = 0xFFFFFFFF
    channel_max: int = 0xFFFF
    idle_time_out: int | None = None
    outgoing_locales: tuple[str, ...] | None = None
    incoming_locales: tuple[str, ...] | None = None
    offered_capabilities: tuple[str, ...] | None = None
    desired_capabilities: tuple[str, ...] | None = None
    properties: dict[Any, Any] | None = None


@composite(0x11, "amqp:begin:list", {"remote_channel": USHORT, "next_outgoing_id": UINT, "incoming_window": UINT,
                                     "outgoing_window": UINT, "handle_max": UINT, **_CAPS},
           ("next_outgoing_id", "incoming_window", "outgoing_window"))
@dataclass(slots=True)
class Begin:
    remote_channel: int | None = None
    next_outgoing_id: int = 0
    incoming_window: int = 0
    outgoing_window: int = 0
    handle_max: int = 0xFFFFFFFF
    offered_capabilities: tuple[str, ...] | None = None
    desired_capabilities: tuple[str, ...] | None = None
    properties: dict[Any, Any] | None = None


@composite(0x12, "amqp:attach:list", {"name": STR, "handle": UINT, "role": ROLE, "snd_settle_mode": SETTLE_S,
                                      "rcv_settle_mode": SETTLE_R, "unsettled": MAP, "incomplete_unsettled": BOOL,
                                      "initial_delivery_count": UINT, "max_message_size": ULONG, **_CAPS},
           ("name", "handle", "role"))
@dataclass(slots=True)
class Attach:
    name: str = ""
    handle: int = 0
    role: Role = Role.SENDER
    snd_settle_mode: SenderSettleMode = SenderSettleMode.MIXED
    rcv_settle_mode: ReceiverSettleMode = ReceiverSettleMode.FIRST
    source: Source | None = None
    target: Target | None = None
    unsettled: dict[Any, Any] | None = None
    incomplete_unsettled: bool = False
    initial_delivery_count: int | None = None
    max_message_size: int | None = None
    offered_capabilities: tuple[str, ...] | None = None
    desired_capabilities: tuple[str, ...] | None = None
    properties: dict[Any, Any] | None = None


@composite(0x13, "amqp:flow:list", {"next_incoming_id": UINT, "incoming_window": UINT, "next_outgoing_id": UINT,
                                    "outgoing_window": UINT, "handle": UINT, "delivery_count": UINT, "link_credit": UINT,
                                    "available": UINT, "drain": BOOL, "echo": BOOL, "properties": MAP},
           ("incoming_window", "next_outgoing_id", "outgoing_window"))
@dataclass(slots=True, init=False)  # (per message: its __init__ compiled, see Transfer)
class Flow:
    next_incoming_id: int | None
    incoming_window: int
    next_outgoing_id: int
    outgoing_window: int
    handle: int | None
    delivery_count: int | None
    link_credit: int | None
    available: int | None
    drain: bool
    echo: bool
    properties: dict[Any, Any] | None

    def __init__(self, next_incoming_id: int | None = None, incoming_window: int = 0, next_outgoing_id: int = 0,
                 outgoing_window: int = 0, handle: int | None = None, delivery_count: int | None = None,
                 link_credit: int | None = None, available: int | None = None, drain: bool = False,
                 echo: bool = False, properties: dict[Any, Any] | None = None) -> None:
        self.next_incoming_id = next_incoming_id
        self.incoming_window = incoming_window
        self.next_outgoing_id = next_outgoing_id
        self.outgoing_window = outgoing_window
        self.handle = handle
        self.delivery_count = delivery_count
        self.link_credit = link_credit
        self.available = available
        self.drain = drain
        self.echo = echo
        self.properties = properties


@composite(0x14, "amqp:transfer:list", {"handle": UINT, "delivery_id": UINT, "delivery_tag": BIN, "message_format": UINT,
                                        "settled": BOOL, "more": BOOL, "rcv_settle_mode": SETTLE_R, "resume": BOOL,
                                        "aborted": BOOL, "batchable": BOOL},
           ("handle",))
# Written out, the per-message performatives' ``__init__`` is compiled with them; a
# dataclass's generated one runs as Python code even in a compiled build.
@dataclass(slots=True, init=False)
class Transfer:
    handle: int
    delivery_id: int | None
    delivery_tag: bytes | None
    message_format: int | None
    settled: bool | None
    more: bool
    rcv_settle_mode: ReceiverSettleMode | None
    state: Any
    resume: bool
    aborted: bool
    batchable: bool

    def __init__(self, handle: int = 0, delivery_id: int | None = None, delivery_tag: bytes | None = None,
                 message_format: int | None = None, settled: bool | None = None, more: bool = False,
                 rcv_settle_mode: ReceiverSettleMode | None = None, state: Any = None, resume: bool = False,
                 aborted: bool = False, batchable: bool = False) -> None:
        self.handle = handle
        self.delivery_id = delivery_id
        self.delivery_tag = delivery_tag
        self.message_format = message_format
        self.settled = settled
        self.more = more
        self.rcv_settle_mode = rcv_settle_mode
        self.state = state
        self.resume = resume
        self.aborted = aborted
        self.batchable = batchable


@composite(0x15, "amqp:disposition:list", {"role": ROLE, "first": UINT, "last": UINT, "settled": BOOL, "batchable": BOOL},
           ("role", "first"))
@dataclass(slots=True, init=False)  # (per message: its __init__ compiled, see Transfer)
class Disposition:
    role: Role
    first: int
    last: int | None
    settled: bool
    state: Any
    batchable: bool

    def __init__(self, role: Role = Role.SENDER, first: int = 0, last: int | None = None, settled: bool = False,
                 state: Any = None, batchable: bool = False) -> None:
        self.role = role
        self.first = first
        self.last = last
        self.settled = settled
        self.state = state
        self.batchable = batchable


@composite(0x16, "amqp:detach:list", {"handle": UINT, "closed": BOOL}, ("handle",))
@dataclass(slots=True)
class Detach:
    handle: int = 0
    closed: bool = False
    error: Error | None = None


@composite(0x17, "amqp:end:list", {})
@dataclass(slots=True)
class End:
    error: Error | None = None


@composite(0x18, "amqp:close:list", {})
@dataclass(slots=True)
class Close:
    error: Error | None = None


PERFORMATIVES = (Open, Begin, Attach, Flow, Transfer, Disposition, Detach, End, Close)

# ---------------------------------------------------------------------- SASL


class SaslCode(IntEnum):
    OK = 0
    AUTH = 1
    SYS = 2
    SYS_PERM = 3
    SYS_TEMP = 4


@composite(0x40, "amqp:sasl-mechanisms:list", {"sasl_server_mechanisms": SYMS}, ("sasl_server_mechanisms",))
@dataclass(slots=True)
class SaslMechanisms:
    sasl_server_mechanisms: tuple[str, ...] = field(default_factory=tuple)


@composite(0x41, "amqp:sasl-init:list", {"mechanism": SYM, "initial_response": BIN, "hostname": STR}, ("mechanism",))
@dataclass(slots=True)
class SaslInit:
    mechanism: str = ""
    initial_response: bytes | None = None
    hostname: str | None = None


@composite(0x42, "amqp:sasl-challenge:list", {"challenge": BIN}, ("challenge",))
@dataclass(slots=True)
class SaslChallenge:
    challenge: bytes = b""


@composite(0x43, "amqp:sasl-response:list", {"response": BIN}, ("response",))
@dataclass(slots=True)
class SaslResponse:
    response: bytes = b""


@composite(0x44, "amqp:sasl-outcome:list", {"code": UBYTE, "additional_data": BIN}, ("code",))
@dataclass(slots=True)
class SaslOutcome:
    code: int = 0
    additional_data: bytes | None = None


SASL_FRAMES = (SaslMechanisms, SaslInit, SaslChallenge, SaslResponse, SaslOutcome)
