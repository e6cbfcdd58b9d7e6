"""Control-plane messages between routers: plain records with ``to_dict``/``from_dict``.

They travel pre-settled on the inter-router control links, encoded as AMQP maps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class LinkStateAd:
    """A router's own view of its live neighbour links, flooded with a sequence number."""

    origin: str
    seq: int
    neighbours: dict[str, int]  # neighbour id -> cost
    # Where the origin listens, by kind (listen, inter_router, http, mqtt, amqps, mqtts:
    # HOST:PORT): what ``once topology dump`` writes back, a router that joined included
    addresses: dict[str, str] = field(default_factory=dict)
    # The origin stopped cleanly and left the network (``ControlPlane.leave``): no links, and
    # nobody waits for it as for a router cut off. A later life of it advertises past it.
    leaving: bool = False


@dataclass(frozen=True, slots=True)
class Subscription:
    router: str
    topic: str
    container_id: str
    link_name: str
    resumed: bool = False
    timeout: float = 0.0
    # When it attached (microseconds of the attaching router's wall clock). A key attached
    # at several routers lives at the newest attach: the others are left-overs of a move
    # (or of a router's earlier life) that no delivery may wait for.
    since: int = 0
    # The authenticated user that made it (when the routers authenticate clients): only
    # that user may take the key over. Empty: authentication is off.
    owner: str = ""
    # A consumer group member (``records/membership.py``): the group's subscription name
    # and, for a group that is not global, the container-id that scopes it.
    group: str = ""
    scope: str = ""
    exclusive: bool = False
    # Its link went without closing, and it waits here for its grace (flooded as an event of
    # its own). Stamps from clocks that disagree cannot order attaches made on both sides of
    # a partition: a router whose client is attached, hearing of a suspended attach stamped
    # newer than its own, stamps its own again past it (``Network._outrank``).
    suspended: bool = False
    # On a detach: the router gave the key up past ``partition_grace`` with a router out of
    # reach, where the key may be attached (its wall clock then, microseconds; 0: no gap).
    # Its attach elsewhere, hearing of it, ends with ``once:subscription-gap``: messages
    # were told ``accepted`` without it (``docs/protocol.md`` section 7).
    gap: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.link_name)


@dataclass(frozen=True, slots=True)
class SubEvent:
    """Subscriber attach (``attached``) or detach at ``origin``; ``seq`` numbers them per origin."""

    origin: str
    seq: int
    attached: bool
    subscription: Subscription


@dataclass(frozen=True, slots=True)
class SubAck:
    """Echo acknowledgement: the sender and everything it flooded to have applied the event."""

    origin: str
    seq: int


@dataclass(frozen=True, slots=True)
class OriginState:
    """Everything known about one origin: for a full sync."""

    origin: str
    ls_seq: int
    neighbours: dict[str, int]
    sub_seq: int
    subscriptions: tuple[Subscription, ...] = field(default_factory=tuple)
    gaps: tuple[Subscription, ...] = field(default_factory=tuple)  # its keys given up as gaps, not yet cleared
    addresses: dict[str, str] = field(default_factory=dict)  # as its advertisement says (``LinkStateAd``)
    leaving: bool = False  # its advertisement says it left (``LinkStateAd.leaving``)


@dataclass(frozen=True, slots=True)
class Sync:
    """Full state, sent when an inter-router link (re)connects."""

    states: tuple[OriginState, ...]
    # The sender's view holds every subscription there is (it never restarted, or it
    # synced with a router whose view did): a restarted router whose view is not complete
    # takes publishes only once it has such a sync (``docs/protocol.md``, the cold-start rule).
    complete: bool = True
    # Only the origins whose state changed at the sender (news passed on, ``ControlPlane``):
    # merged as a full one is, but it neither makes the receiver synced nor complete.
    partial: bool = False
    # The sender had a neighbour's whole view before it sent this (``ControlPlane.synced``):
    # a router that never had one (it just came up, fresh) says complete only because it
    # knows of no earlier life, which is no evidence for a router that restarted.
    synced: bool = True


Message = LinkStateAd | SubEvent | SubAck | Sync


def coalesce(items: list[object]) -> list[object]:
    """What one router sends one neighbour in one turn, without what its later items
    supersede: an origin's advertisement only at its newest (an advertisement applies by
    its number alone), and partial syncs that follow one another as one, each origin's
    state as last said (the sender's later view of an origin holds all it said before).
    Nothing moves past another kind of item: events, acknowledgements and whole views keep
    their places between them. Taken in order, the receiver ends where it would have
    taken them all. Booting, a router's links come up one by one and it advertises each
    time: the versions of one turn go as one."""
    newest: dict[str, int] = {}
    ads = runs = 0
    previous_partial = False
    for i, item in enumerate(items):
        partial = type(item) is Sync and item.partial
        if type(item) is LinkStateAd:
            ads += 1
            j = newest.get(item.origin)
            if j is None or item.seq >= items[j].seq:  # type: ignore[attr-defined]
                newest[item.origin] = i
        elif partial and previous_partial:
            runs += 1
        if type(item) is not LinkStateAd:
            previous_partial = partial
    if len(newest) == ads and not runs:
        return items  # (nothing superseded: the common case)
    out: list[object] = []
    states: dict[str, OriginState] | None = None  # the run of partial syncs being merged
    complete = synced = True

    def close_run() -> None:
        nonlocal states
        if states is not None:
            out.append(Sync(tuple(states.values()), complete, partial=True, synced=synced))
            states = None

    for i, item in enumerate(items):
        if type(item) is LinkStateAd:
            if newest[item.origin] == i:
                out.append(item)  # (an advertisement may sit inside a run: it is independent of it)
        elif type(item) is Sync and item.partial:
            if states is None:
                states = {}
            for st in item.states:
                states.pop(st.origin, None)
                states[st.origin] = st
            complete = item.complete
            synced = item.synced
        else:
            close_run()
            out.append(item)
    close_run()
    return out


def to_dict(msg: Message) -> dict[str, Any]:
    d = asdict(msg)
    d["kind"] = type(msg).__name__
    return d


def from_dict(d: dict[str, Any]) -> Message:
    kind = d.get("kind")
    body = {k: v for k, v in d.items() if k != "kind"}
    if kind == "LinkStateAd":
        return LinkStateAd(body["origin"], int(body["seq"]), {str(k): int(v) for k, v in body["neighbours"].items()},
                           _addresses(body), bool(body.get("leaving", False)))
    if kind == "SubEvent":
        return SubEvent(body["origin"], int(body["seq"]), bool(body["attached"]), _sub(body["subscription"]))
    if kind == "SubAck":
        return SubAck(body["origin"], int(body["seq"]))
    if kind == "Sync":
        return Sync(tuple(OriginState(s["origin"], int(s["ls_seq"]), {str(k): int(v) for k, v in s["neighbours"].items()},
                                      int(s["sub_seq"]), tuple(_sub(x) for x in s["subscriptions"]),
                                      tuple(_sub(x) for x in s.get("gaps") or ()), _addresses(s),
                                      bool(s.get("leaving", False)))
                          for s in body["states"]), bool(body.get("complete", True)), bool(body.get("partial", False)),
                    bool(body.get("synced", True)))
    raise ValueError(f"unknown control message kind {kind!r}")


def _addresses(d: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (d.get("addresses") or {}).items()}


def _sub(d: dict[str, Any]) -> Subscription:
    return Subscription(d["router"], d["topic"], d["container_id"], d["link_name"], bool(d["resumed"]), float(d["timeout"]),
                        int(d.get("since", 0)), str(d.get("owner") or ""), str(d.get("group") or ""),
                        str(d.get("scope") or ""), bool(d.get("exclusive", False)), bool(d.get("suspended", False)),
                        int(d.get("gap", 0)))
