"""What the core's entry calls leave for the end of the batch.

An entry call (``publish``, ``subscriber_update``, ``copy_arrived``, ``control``, an
attach ...) changes the core's state and records here what must reach a port: a
publisher's outcome, a settlement, a subscriber or a neighbour's data link with
something to send, a link whose credit changed, a notice. It never calls a port itself.
The adaptors and the network end each batch with ``Core.after_batch``, which drains
this (``facade.py``), as ``linkstate/engine.py`` hands back a ``Result`` for its caller
to carry out. So no adaptor is ever inside the core when the core calls it, and what a
batch did to one link reaches it once: credit is sent as the link's credit at the end,
not as every step towards it (``test_effects.py``).

Ports are taken when an effect is recorded (the link that delivered is the one settled),
and links are read when it is drained (the credit a link has then). ``grants`` and
``hops`` are never replaced, only emptied (the credit window and the relay write to them
directly); the others are swapped for empty ones as they are drained.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .peers import Hop, Publisher, Subscriber, Upstream
    from .ports import Outcome, PublisherPort, SubscriberPort


class Notice(Enum):
    ACTIVATED = "activated"  # a standby of an exclusive group became its active member
    STOLEN = "stolen"  # the same subscriber key attached again: this link ends
    GAP = "gap"  # another router gave its key up while out of reach: this link ends (``docs/protocol.md`` 7)


class Effects:
    __slots__ = ("outcomes", "settles", "notices", "pumps", "hops", "grants")

    def __init__(self) -> None:
        self.outcomes: list[tuple[PublisherPort, Any, Outcome, bool]] = []
        self.settles: list[tuple[SubscriberPort, Any]] = []
        self.notices: list[tuple[SubscriberPort, Notice, str]] = []  # (port, notice, the router a gap names)
        self.pumps: dict[Subscriber, None] = {}  # subscribers that may have something to send
        self.hops: dict[Hop, None] = {}  # neighbours' data links with copies queued
        self.grants: dict[Publisher | Upstream, None] = {}  # links whose credit changed

    def settle(self, port: SubscriberPort, handle: Any) -> None:
        self.settles.append((port, handle))

    def notice(self, port: SubscriberPort, notice: Notice, router: str = "") -> None:
        self.notices.append((port, notice, router))

    def pump(self, sub: Subscriber) -> None:
        self.pumps[sub] = None

    def answer(self) -> None:
        """Settlements, outcomes, then notices, each kind in the order recorded."""
        if self.settles:
            settles, self.settles = self.settles, []
            for port, handle in settles:
                port.settle(handle)
        if self.outcomes:
            outcomes, self.outcomes = self.outcomes, []
            for pub_port, handle, outcome, settle in outcomes:
                pub_port.outcome(handle, outcome, settle)
        if self.notices:
            notices, self.notices = self.notices, []
            for port, notice, router in notices:
                if notice is Notice.STOLEN:
                    port.stolen()
                elif notice is Notice.GAP:
                    port.gap(router)
                else:
                    port.activated()

    def send_grants(self) -> None:
        """Each link whose credit changed hears its credit now (absolute: the last value
        is all the peer needs); a link gone meanwhile hears nothing."""
        if self.grants:
            grants = list(self.grants)
            self.grants.clear()
            for link in grants:
                if link.attached:
                    link.port.grant(link.credit)
