"""The engine's state tables: what a connection state admits, how endpoints move."""

from __future__ import annotations

import pytest
from once.router.amqp.connection_state import ENDPOINT_STEPS, State, Step, admits, step
from once.router.amqp.endpoints import EndpointState
from once.router.amqp.errors import LocalProtocolError, ProtocolError
from once.router.amqp.performatives import Attach, Begin, Open, Transfer


class Endpoint:
    def __init__(self, state: EndpointState) -> None:
        self.state = state


def test_an_endpoint_opens_from_either_side_and_closes_by_the_table():
    ours, theirs = Endpoint(EndpointState.UNMAPPED), Endpoint(EndpointState.UNMAPPED)
    step(ours, Step.SEND_OPEN)
    step(ours, Step.RECV_OPEN)
    step(theirs, Step.RECV_OPEN)
    step(theirs, Step.SEND_OPEN)
    assert ours.state is theirs.state is EndpointState.MAPPED
    step(ours, Step.SEND_CLOSE)
    step(ours, Step.RECV_CLOSE)
    assert ours.state is EndpointState.CLOSED


@pytest.mark.parametrize("state", list(EndpointState))
@pytest.mark.parametrize("move", list(Step))
def test_a_move_the_table_lacks_is_the_peers_protocol_error_or_our_misuse(state: EndpointState, move: Step):
    e = Endpoint(state)
    if (state, move) in ENDPOINT_STEPS:
        step(e, move)
        assert e.state is ENDPOINT_STEPS[(state, move)]
        return
    remote = move in (Step.RECV_OPEN, Step.RECV_CLOSE)
    with pytest.raises(ProtocolError if remote else LocalProtocolError):
        step(e, move)
    assert e.state is state  # nothing moved


def test_a_connection_admits_nothing_but_open_before_the_peers_open():
    assert admits(State.OPEN, False, Open) is None
    assert admits(State.OPEN, False, Begin) == "Begin before open"
    assert admits(State.OPEN, True, Attach) is None
    assert admits(State.SASL, True, Transfer) is not None  # AMQP frames have no place in SASL
