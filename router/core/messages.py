"""The acceptance protocol's messages between routers (``docs/protocol.md``, section 2), as the
core sends and receives them. Adaptors carry them: the in-process network's links as
they are, the AMQP inter-router links in their own encoding (``adaptors/amqp/copies_wire.py``).

A ``Copy`` travels on the data links, towards the destination routers it names, and is
consumed there. ``Answer`` and ``Settle`` travel on the control links, routed by router
id (``Routed``): they never wait for data credit.

The per-message ones (``CopyTarget``, ``Copy``, ``Answer``, ``Settle``) are slotted classes
whose ``__init__`` is written out: a router in the middle builds a ``Copy`` and its
``CopyTarget``s for every message it relays, and compiled, a written ``__init__`` runs as C
where a named tuple's ``__new__`` (a lambda) and a dataclass's generated ``__init__`` run as
Python code (a frozen dataclass was worse still: each field through
``object.__setattr__``, 12 % of a relay's CPU once). Nothing changes one after it is made.
The rarer ones stay ``NamedTuple``s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from once.records.membership import GroupId, Key
from once.records.outcomes import Outcome
from once.records.owed import Said

# The acceptance protocol these messages are (``docs/protocol.md``): reported by ``/api/router``
# and ``once_router_info``; every router of a network runs the same one.
PROTOCOL_VERSION = 3


@dataclass(slots=True, init=False)
class CopyTarget:
    """One destination router of a copy: the keys it is owed to there, its position in the
    root's sequence to that router, and the lowest position there with no answer yet."""

    router: str
    keys: frozenset[Key]
    position: int
    low: int
    redelivery: bool  # re-targeted keys (they moved): they may have seen it

    def __init__(self, router: str, keys: frozenset[Key], position: int, low: int, redelivery: bool = False) -> None:
        self.router = router
        self.keys = keys
        self.position = position
        self.low = low
        self.redelivery = redelivery


@dataclass(slots=True, init=False)
class Copy:
    gid: bytes
    topic: str
    payload: bytes
    presettled: bool
    message_format: int
    root: str
    stream: bytes  # one publisher attach at its root: positions count per stream and router
    born: int
    targets: tuple[CopyTarget, ...]
    visited: frozenset[str]  # the routers it passed: it never goes back to one
    # consumer groups: the member the root chose per group, (key, group, router), so that
    # a destination the publisher resumes at knows the choice when it becomes the root
    chosen: tuple[tuple[Key, GroupId, str], ...]
    # the user its publisher authenticated as at the root ("": the root knew none: not checked)
    user: str
    # its publisher sent it again, to this root (it resumed here): this stream is newer than
    # any other that brought it (``docs/protocol.md`` section 5, pre-settled copies)
    resent: bool

    def __init__(self, gid: bytes, topic: str, payload: bytes, presettled: bool, message_format: int, root: str,
                 stream: bytes, born: int, targets: tuple[CopyTarget, ...], visited: frozenset[str],
                 chosen: tuple[tuple[Key, GroupId, str], ...] = (), user: str = "", resent: bool = False) -> None:
        self.gid = gid
        self.topic = topic
        self.payload = payload
        self.presettled = presettled
        self.message_format = message_format
        self.root = root
        self.stream = stream
        self.born = born
        self.targets = targets
        self.visited = visited
        self.chosen = chosen
        self.user = user
        self.resent = resent


@dataclass(slots=True, init=False)
class Answer:
    """A destination's answer for one copy it took: what each of its keys did. None named:
    every key of that copy accepted (the usual answer; the root knows the copy's keys)."""

    gid: bytes
    stream: bytes
    position: int
    said: tuple[tuple[Key, Said, Outcome | None], ...]

    def __init__(self, gid: bytes, stream: bytes, position: int,
                 said: tuple[tuple[Key, Said, Outcome | None], ...]) -> None:
        self.gid = gid
        self.stream = stream
        self.position = position
        self.said = said


@dataclass(slots=True, init=False)
class Settle:
    """From the root: the message is settled; a destination settles and forgets it."""

    gid: bytes

    def __init__(self, gid: bytes) -> None:
        self.gid = gid


@dataclass(slots=True, init=False)
class Forgot:
    """From a router that holds nothing of a message a destination answered it about (it
    restarted since: the life of it that sent the copy is gone). The destination lets the
    copy go once its own subscribers' deliveries of it are answered, not before: a
    ``Settle`` dropped a delivery still queued for a subscriber, which then had it from the
    publisher's new root after newer messages (fresh hard churn seed 446487839842)."""

    gid: bytes

    def __init__(self, gid: bytes) -> None:
        self.gid = gid


class Ask(NamedTuple):
    """From a root that took a message over and must choose its consumer groups' members
    (a publisher resent it there, and the first root's choice did not come with it):
    what does this router know of the members it went to? (``docs/protocol.md`` §8)"""

    gid: bytes
    topic: str
    stamp: int = 0  # when the root first asked (its wall clock, microseconds): the newest asker chooses


class Told(NamedTuple):
    """The answer to ``Ask``: members this router knows were chosen for the message, as
    (key, group, router, had): ``had`` 1 when the member had it here (it answered, or it
    said so when it resumed), 2 when it released it here (the root passed it on, or will),
    else 0: a root's choice a copy named, or a member it is queued or sent to here with
    no answer yet.
    ``unsure``: this router may not know yet (asked again later). ``taken``: a root that
    asked later chooses (its publisher resumed there since): not the one asking; ``stamp``
    is that root's question's (a root whose publisher is attached asks again past it)."""

    gid: bytes
    members: tuple[tuple[Key, GroupId, str, int], ...]
    unsure: bool = False
    taken: bool = False
    stamp: int = 0


class Ended(NamedTuple):
    """From a router where a group member's subscription ended (it closed there): told to
    every router, again every ``router_dead_after`` while that router keeps what it had.
    A router that restarted and took the member back from its journal, suspended, with an
    older attach (``since``) learns it will not resume: it would keep every question about
    the group's messages unsure until the member's grace ended (``docs/protocol.md`` §8)."""

    key: Key
    since: int  # when the member attached where it ended (that router's wall clock, microseconds)


class Handed(NamedTuple):
    """From a router leaving the network (``Network.leave``), to every router it reaches:
    what a group member that ended there had (``Destination.left_had``), kept and told by
    each as its own for ``ttl`` more seconds. Only the leaver knew it, and a root still
    asking about one of those messages heard nobody had it once the leaver was gone: it
    gave it to a second member (fresh ``--elastic`` churn seed 969268099062)."""

    key: Key
    group: GroupId
    gids: tuple[bytes, ...]
    ttl: float  # seconds it is kept from now (each router's own clock)
    since: int  # when the member attached where it ended, for ``Ended`` (0: not told so)


class Note(NamedTuple):
    """For a component of an adaptor at the router it is routed to (the MQTT session
    store's replicas, ``adaptors/mqtt/sessions.py``): the network carries it, ``channel``
    names who reads it, and the core never sees it."""

    channel: str
    body: bytes


Control = Answer | Settle | Forgot | Ask | Told | Ended | Handed | Note


class Routed(NamedTuple):
    """Control items for one router, relayed towards it neighbour by neighbour."""

    to: str
    frm: str
    items: tuple[Control, ...]
    ttl: int = 32  # hops left: a route that loops while the graph settles cannot carry it for ever
    # The items as an adaptor encoded them, when a router in the middle relays them: it
    # passes them on without reading them (then ``items`` is empty).
    blob: bytes = b""
