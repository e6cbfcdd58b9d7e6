"""The AMQP connection's state and the rules every layer of it uses: modes, the connection
states and what each admits (a table: a frame a state does not list is a protocol error),
and the error a condition makes."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from .endpoints import EndpointState
from .errors import Condition, LocalProtocolError, ProtocolError
from .performatives import Attach, Begin, Close, Detach, Disposition, End, Error, Flow, Open, Transfer

if TYPE_CHECKING:
    pass


class Mode(Enum):
    CLIENT = "client"
    SERVER = "server"


class State(Enum):
    START = "start"  # nothing exchanged
    SASL = "sasl"  # SASL frames flowing
    AMQP_HEADER = "amqp-header"  # waiting for the peer's AMQP header (after SASL, or as client)
    OPEN = "open"  # AMQP frames flowing
    CLOSE_SENT = "close-sent"
    CLOSED = "closed"


OPEN_STATES = (State.OPEN, State.CLOSE_SENT)
MAX_UINT = 0xFFFFFFFF

_SESSION_WORK = frozenset({Begin, End, Attach, Detach, Flow, Transfer, Disposition})
# What the peer may send in each state once AMQP frames flow; ``open`` itself comes first
# (before it only ``open`` is admitted, see ``admits``). A state missing here takes no
# AMQP frame at all (its bytes are headers or SASL frames).
ADMITS: dict[State, frozenset[type]] = {
    State.OPEN: _SESSION_WORK | {Open, Close},
    State.CLOSE_SENT: _SESSION_WORK | {Open, Close},  # (discarded on ended sessions, as the spec says)
}


def admits(state: State, opened: bool, kind: type) -> str | None:
    """Why an AMQP frame of ``kind`` is a protocol error now (None: it is not)."""
    allowed = ADMITS.get(state)
    if allowed is None or kind not in allowed:
        return f"{kind.__name__} in connection state {state.value}"
    if not opened and kind is not Open:
        return f"{kind.__name__} before open"
    return None


class Step(Enum):
    """What moves a session or link endpoint (AMQP 1.0 section 2.5.5 / 2.6.3)."""

    SEND_OPEN = "our begin/attach"
    RECV_OPEN = "the peer's begin/attach"
    SEND_CLOSE = "our end/detach"
    RECV_CLOSE = "the peer's end/detach"
    ENDED = "the end of its session"


_E = EndpointState
# Every move an endpoint may make; a step missing here is a protocol error (the peer's)
# or a misuse (ours).
ENDPOINT_STEPS: dict[tuple[EndpointState, Step], EndpointState] = {
    (_E.UNMAPPED, Step.SEND_OPEN): _E.SENT,
    (_E.UNMAPPED, Step.RECV_OPEN): _E.RECEIVED,
    (_E.SENT, Step.RECV_OPEN): _E.MAPPED,
    (_E.RECEIVED, Step.SEND_OPEN): _E.MAPPED,
    (_E.SENT, Step.SEND_CLOSE): _E.CLOSE_SENT,
    (_E.RECEIVED, Step.SEND_CLOSE): _E.CLOSE_SENT,  # (refusing: the router answers, then detaches)
    (_E.MAPPED, Step.SEND_CLOSE): _E.CLOSE_SENT,
    (_E.RECEIVED, Step.RECV_CLOSE): _E.CLOSED,  # the peer gave up before we answered (we answer the detach)
    (_E.MAPPED, Step.RECV_CLOSE): _E.CLOSED,  # we answer at once
    (_E.CLOSE_SENT, Step.RECV_CLOSE): _E.CLOSED,
    **{(state, Step.ENDED): _E.CLOSED for state in _E},
}


def step(endpoint: Any, move: Step) -> None:
    """Move a session or link endpoint by the table; raise if the table has no such move."""
    nxt = ENDPOINT_STEPS.get((endpoint.state, move))
    if nxt is None:
        what = f"{move.value} in endpoint state {endpoint.state.value} ({endpoint!r})"
        if move is Step.RECV_OPEN or move is Step.RECV_CLOSE:
            raise ProtocolError(Condition.ILLEGAL_STATE, what)
        raise LocalProtocolError(what)
    endpoint.state = nxt


def error_of(condition: Condition | str, description: str) -> Error:
    cond = condition.value if isinstance(condition, Condition) else condition
    return Error(condition=cond, description=description or None)
