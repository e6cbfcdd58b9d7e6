"""AMQP delivery states to the core's outcomes and back: the translation every AMQP
adaptor (client connections, inter-router links) makes at the core's ports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...amqp import performatives as amqp
from ...core.ports import ACCEPTED, RELEASED, Outcome, OutcomeKind, rejected

_AMQP_ACCEPTED = amqp.ACCEPTED
_AMQP_RELEASED = amqp.RELEASED
_RECEIVED = Outcome(OutcomeKind.RECEIVED)


def to_outcome(state: Any) -> Outcome | None:
    """A peer's delivery state as an outcome; None for none (settlement alone)."""
    if state is None:
        return None
    kind = type(state)
    if kind is amqp.Accepted:
        return ACCEPTED
    if kind is amqp.Rejected:
        error = state.error
        if error is None:
            return Outcome(OutcomeKind.REJECTED)
        return Outcome(OutcomeKind.REJECTED, str(error.condition or ""), error.description or "")
    if kind is amqp.Released:
        return RELEASED
    if kind is amqp.Modified:
        return Outcome(OutcomeKind.MODIFIED, delivery_failed=bool(state.delivery_failed),
                       undeliverable_here=bool(state.undeliverable_here))
    if kind is amqp.Received:
        return _RECEIVED
    # (transactional states: this router does not do transactions)
    return rejected("amqp:not-implemented", f"delivery state {kind.__name__} is not supported here")


_OUTCOME_ACCEPTED = OutcomeKind.ACCEPTED  # (a global: an enum member lookup is slow on 3.11)


def to_amqp(outcome: Outcome) -> Any:
    """The core's outcome as the AMQP delivery state to send."""
    kind = outcome.kind
    if kind is _OUTCOME_ACCEPTED:
        return _AMQP_ACCEPTED
    if kind is OutcomeKind.REJECTED:
        return amqp.Rejected(error=amqp.Error(condition=outcome.condition or "amqp:not-allowed",
                                              description=outcome.description or None))
    if kind is OutcomeKind.RELEASED:
        return _AMQP_RELEASED
    if kind is OutcomeKind.MODIFIED:
        return amqp.Modified(delivery_failed=outcome.delivery_failed or None,
                             undeliverable_here=outcome.undeliverable_here or None)
    return amqp.Received()


def outcomes_in(unsettled: dict[Any, Any]) -> dict[Any, Outcome | None]:
    return {key: to_outcome(state) for key, state in unsettled.items()}


def states_out(ours: Mapping[Any, Outcome | None]) -> dict[Any, Any]:
    return {key: to_amqp(o) if o is not None else None for key, o in ours.items()}
