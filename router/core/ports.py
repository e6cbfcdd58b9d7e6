"""What the core and its adaptors say to each other: outcomes, conditions and the ports.

The core knows no protocol. An adaptor (AMQP client connections, inter-router links,
MQTT next) translates its protocol's delivery states into an ``Outcome`` before it calls
the core, and the core's answers back into its own protocol. The ports are the small
interfaces the core calls an adaptor through, one per kind of peer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from mypy_extensions import mypyc_attr
from once.records.membership import GroupId, Key, Member
from once.records.outcomes import ACCEPTED, RELEASED, Outcome, OutcomeKind

from .messages import Copy

__all__ = ["ACCEPTED", "ALONE", "NO_GROUPS", "RELEASED", "Conditions", "HopPort", "Outcome", "OutcomeKind",
           "NetworkEvents", "PublisherPort", "Refused", "RoutesPort", "SubscriberPort", "UpstreamPort", "rejected"]


class Conditions(StrEnum):
    """Every error condition the core itself puts on an outcome: stable codes, one table."""

    REJECTED_BY_SUBSCRIBER = "amqp:not-allowed"  # a rejection that named no condition
    UNDELIVERABLE_HERE = "once:undeliverable-here"
    REDELIVERY_LIMIT = "once:redelivery-limit"
    UNAUTHORIZED = "amqp:unauthorized-access"  # a destination's policy refused the publisher's user
    # (on a subscriber's link, not an outcome: another router gave it up while out of reach)
    SUBSCRIPTION_GAP = "once:subscription-gap"
    # (on a subscriber's link: it answered nothing for ``subscriber_stall`` while it held deliveries)
    SUBSCRIBER_STALLED = "once:subscriber-stalled"


def rejected(condition: str | Conditions, description: str = "") -> Outcome:
    return Outcome(OutcomeKind.REJECTED, str(condition), description)


class PublisherPort(Protocol):
    """A publisher's link."""

    def grant(self, credit: int) -> None: ...  # the link's absolute credit
    def outcome(self, handle: Any, outcome: Outcome, settle: bool) -> None: ...


class UpstreamPort(Protocol):
    """A neighbour's data link towards us: copies come on it as its credit allows (transit
    credit, ``credit.py``); nothing goes back on it (answers go to the root by router id)."""

    def grant(self, credit: int) -> None: ...  # the link's absolute credit


@dataclass(frozen=True, slots=True)
class Refused:
    """What ``SubscriberPort.deliver`` returns for a message its peer can never take (an
    MQTT client's maximum packet size): the core answers it rejected for that subscriber
    there and then, with this description. (A value, not a call back into the core: the
    core is sending when it asks.)"""

    description: str


class SubscriberPort(Protocol):
    def credit(self) -> int: ...
    # the delivery's handle (given back to ``settle``), or ``Refused``
    def deliver(self, record: Any, settled: bool, redelivery: int) -> Any: ...
    def settle(self, handle: Any) -> None: ...
    def drained(self) -> None: ...
    def draining(self) -> bool: ...
    # a standby of an exclusive group became its active member (only those are told)
    def activated(self) -> None: ...
    # the same subscriber key attached again: this link ends (``lifecycle.py``)
    def stolen(self) -> None: ...
    # ``router`` gave this subscription up while out of reach (its roots accepted messages
    # without it): the link ends with ``Conditions.SUBSCRIPTION_GAP`` (``docs/protocol.md`` 7)
    def gap(self, router: str) -> None: ...
    # it answered nothing for ``subscriber_stall`` while it held deliveries (``stalls.py``): the
    # link is detached without closing, with ``Conditions.SUBSCRIBER_STALLED``, and suspended
    def stalled(self, why: str) -> None: ...


class RoutesPort(Protocol):
    """The network as the core sees it: who subscribes where and the ways there. The
    control plane (``router/network.py``) provides it; a lone router uses ``ALONE``."""

    def remote_routers(self, topic: str) -> set[str]: ...  # other routers with subscribers on it
    # dests -> ({neighbour: the dests behind it}, the unreachable ones), never via ``exclude``
    def route(self, dests: set[str], exclude: str | None) -> tuple[dict[str, set[str]], set[str]]: ...
    # where the subscribers of router ``origin`` on ``topic`` attached since: {router: keys}
    def moved(self, topic: str, origin: str) -> dict[str, frozenset[Key]]: ...
    def keys_at(self, topic: str, router: str) -> frozenset[Key]: ...  # that router's subscriber keys
    def homes(self, keys: Iterable[Key]) -> dict[str, set[Key]]: ...  # where each key lives now (reachable or not)
    # consumer groups' members at other routers, per group (``records/membership.py``);
    # the same object until the subscriber table changes (the core caches on it)
    def group_members(self, topic: str) -> Mapping[GroupId, tuple[Member, ...]]: ...
    # control items to a router, relayed over the control links; and the routers we can reach now
    def send_to(self, router: str, items: tuple[Any, ...]) -> None: ...
    def reachable(self) -> set[str]: ...
    def all_routers(self) -> set[str]: ...  # every other router of the network, reachable or not
    # evidence that ``key``, suspended here, is attached nowhere else (``docs/protocol.md`` section 7)
    def gone_everywhere(self, key: Key) -> bool: ...
    # how often the graph changed so far, or -1 while a router is out of reach: equal at two
    # times, nobody was out of reach in between (an attach elsewhere would have been heard)
    def calm(self) -> int: ...


# Tests and the network subclass it (interpreted classes, when this module is compiled).
@mypyc_attr(allow_interpreted_subclasses=True)
class Alone:
    """A router with no neighbours: no other subscribers, no route anywhere."""

    def remote_routers(self, topic: str) -> set[str]:
        return set()

    def route(self, dests: set[str], exclude: str | None) -> tuple[dict[str, set[str]], set[str]]:
        return {}, set(dests)

    def moved(self, topic: str, origin: str) -> dict[str, frozenset[Key]]:
        return {}

    def keys_at(self, topic: str, router: str) -> frozenset[Key]:
        return frozenset()

    def homes(self, keys: Iterable[Key]) -> dict[str, set[Key]]:
        return {}

    def group_members(self, topic: str) -> Mapping[GroupId, tuple[Member, ...]]:
        return NO_GROUPS

    def send_to(self, router: str, items: tuple[Any, ...]) -> None:
        pass

    def reachable(self) -> set[str]:
        return set()

    def all_routers(self) -> set[str]:
        return set()

    def gone_everywhere(self, key: Key) -> bool:
        return True

    def calm(self) -> int:
        return 0


NO_GROUPS: Mapping[GroupId, tuple[Member, ...]] = MappingProxyType({})
ALONE = Alone()


class HopPort(Protocol):
    """A neighbour router's data link, downstream: copies go on it settled, as its credit
    allows (a copy lost with the link is sent again by its root)."""

    def credit(self) -> int: ...
    def copy(self, copy: Copy) -> None: ...


class NetworkEvents(Protocol):
    """What the control plane (``router/network.py``) tells the core and asks it: the one
    interface between them. The network calls these and reads nothing else of the core;
    the core calls the network only as its ``RoutesPort``."""

    def clock(self) -> float: ...
    def wall(self) -> int: ...  # microseconds
    # neighbours: a data link came up (the core's hop and upstream for it) or went down
    def add_hop(self, peer: str, port: HopPort) -> Any: ...
    def add_upstream(self, peer: str, port: UpstreamPort) -> Any: ...
    def hop_lost(self, peer: str) -> None: ...
    def upstream_lost(self, peer: str) -> None: ...
    def synced(self) -> None: ...  # a neighbour's full view came: publishers may have credit
    def hand_over(self) -> None: ...  # we leave: what only we know that others may need goes to them
    def router_left(self, router: str) -> None: ...  # it stopped cleanly: it settles nothing more
    def router_back(self, router: str) -> None: ...  # a later life of one that left
    # the graph or the subscriber table changed: in this order
    def membership_changed(self) -> None: ...
    def follow_moved(self, reachable: set[str]) -> None: ...
    # subscribers: ours from an earlier life, those that moved away, and what is here
    def adopt_subscriber(self, topic: str, container_id: str, link_name: str, until: float, owner: str = "",
                         group: GroupId | None = None, since: int = 0, exclusive: bool = False) -> None: ...
    def suspended(self) -> list[Any]: ...
    def subscriber_moved(self, sub: Any, where: str) -> None: ...
    def live_here(self, key: Key) -> bool: ...
    def subscribed(self, topic: str, key: Key) -> bool: ...
    # what a group member that ends here had (our journal keeps it), and subscriptions
    # our journal says ended here before we restarted
    def member_had(self, key: Key) -> tuple[GroupId, tuple[bytes, ...]] | None: ...
    # router ``frm`` gave ``key`` up as a gap: our live attaches of it, to be told (returned)
    def gap_heard(self, key: Key, frm: str) -> list[Any]: ...
    def ended_here(self, key: Key, until: float, had: tuple[GroupId, tuple[bytes, ...]] | None = None) -> None: ...
