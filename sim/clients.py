"""Clients of the in-process network, modelled on the exactly-once client library
(``client/``), and the router's side of their connections: a thin test adaptor
over the link-lifecycle service the AMQP adaptor calls (``router/core/lifecycle.py``), so
the simulator runs the router's own lifecycle, not a copy of it.

A publisher keeps every message until it has its outcome (a durable outbox), resumes
its link with an unsettled map and the same incarnation; a subscriber keeps the gids it
accepted (a durable store), processes messages one at a time in arrival order, and
resumes with the map of what it accepted and the router has not settled yet.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from once.records.gid import compute_gid
from once.records.membership import GroupId
from once.router.core import ACCEPTED, RELEASED, Outcome, OutcomeKind
from once.router.core import Subscriber as CoreSubscriber
from once.router.core.lifecycle import SubscriberAttach
from once.router.core.ports import Conditions

from .links import Handle, Pipe, draining

if TYPE_CHECKING:
    from .net import SimNet, SimRouter

_FINAL = (OutcomeKind.ACCEPTED, OutcomeKind.REJECTED)


def _tag(n: int) -> bytes:
    return n.to_bytes(8, "big")


# --------------------------------------------------------------------- frames

@dataclass(frozen=True, slots=True)
class Attach:
    role: str  # "pub" | "sub"
    topic: str
    container_id: str
    name: str
    unsettled: dict[Any, Any] | None
    incarnation: int = 0
    group: str = ""  # a subscriber joining this consumer group (global)


@dataclass(frozen=True, slots=True)
class Attached:
    unsettled: dict[Any, Any] | None


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    tag: bytes  # the publisher's tag; a subscriber's deliveries carry the gid here
    payload: bytes
    settled: bool
    resume: bool = False
    redelivery: int = 0
    state: Outcome | None = None


@dataclass(frozen=True, slots=True)
class Update:
    id: int  # a publisher's tag (as int) or a subscriber delivery's id
    outcome: Outcome | None
    settled: bool


@dataclass(frozen=True, slots=True)
class Detach:
    """A subscriber closes its link for good (AMQP detach with closed): it leaves."""


@dataclass(frozen=True, slots=True)
class Ended:
    """The router ends a subscriber's link with a condition (AMQP detach with an error):
    ``once:subscription-gap``, another router gave the subscription up while out of reach."""

    condition: str
    router: str


@dataclass(frozen=True, slots=True)
class Credit:
    delivery_count: int
    credit: int


class ClientConn:
    """One client connection: the client's pipe to its router and the router's back."""

    def __init__(self, net: SimNet, client: Any, router: SimRouter) -> None:
        self.net = net
        self.client = client
        self.router = router
        self.edge = EdgeLink(self, router)
        self.to_router = Pipe(net.loop, self.edge.receive, lambda: net.client_latency(router.id))
        self.to_client = Pipe(net.loop, self._to_client, lambda: net.client_latency(router.id))
        self.closed = False

    def _to_client(self, frame: Any) -> None:
        if not self.closed and self.client.conn is self:
            self.client.receive(frame)

    def cut(self) -> None:
        """The connection breaks: both pipes drop; each side notices on its own."""
        if self.closed:
            return
        self.closed = True
        self.to_router.closed = self.to_client.closed = True
        loop = self.net.loop
        loop.call_later(self.net.edge_detect_delay(), self.edge.lost)
        loop.call_later(self.net.detect_delay(), self.client.lost, self)


# ------------------------------------------------------------- router side

class EdgeLink:
    """The router's end of a client connection with its one link (like ``edge.py``)."""

    def __init__(self, conn: ClientConn, router: SimRouter) -> None:
        self.conn = conn
        self.router = router
        self.ctx: Any = None  # the core's Publisher or Subscriber
        self.completed = False
        self.handles: dict[int, Handle] = {}
        self.next_id = 0
        self.snd_count = 0
        self.rcv_count = 0
        self.flow = (0, 0)
        self.gone = False

    # ------------------------------------------------- PublisherPort

    def grant(self, credit: int) -> None:
        draining(self.router)
        self.conn.to_client.send(Credit(self.rcv_count, credit))

    def outcome(self, handle: Handle, outcome: Outcome, settle: bool) -> None:
        draining(self.router)
        self.conn.to_client.send(Update(handle.id, outcome, settle))

    # ------------------------------------------------ SubscriberPort

    def credit(self) -> int:
        draining(self.router)
        if not self.completed or self.gone:
            return 0
        count, credit = self.flow
        return max(0, count + credit - self.snd_count)

    def deliver(self, record: Any, settled: bool, redelivery: int) -> Handle:
        draining(self.router)
        self.next_id += 1
        handle = Handle(self.next_id, record)
        if not settled:
            self.handles[handle.id] = handle
        self.snd_count += 1
        self.conn.to_client.send(Message(handle.id, record.gid, record.payload, settled, redelivery=redelivery))
        return handle

    def settle(self, handle: Handle) -> None:
        draining(self.router)
        self.handles.pop(handle.id, None)
        self.conn.to_client.send(Update(handle.id, None, True))

    def draining(self) -> bool:
        draining(self.router)
        return False

    def drained(self) -> None:
        draining(self.router)
        pass

    def stolen(self) -> None:
        draining(self.router)
        self.gone = True  # the same key attached again: this link is detached

    def gap(self, router: str) -> None:
        draining(self.router)
        self.gone = True  # the core ended it: this link is detached, saying why
        self.conn.to_client.send(Ended(Conditions.SUBSCRIPTION_GAP.value, router))

    def stalled(self, why: str) -> None:
        pass  # (the simulator's routers run no stall checks: its clients answer or go)

    def activated(self) -> None:
        draining(self.router)
        pass

    # ------------------------------------------------------- frames

    def receive(self, frame: Any) -> None:
        router = self.router
        if self.gone or not router.alive:
            return
        core = router.core
        t = type(frame)
        if t is Attach:
            self._attach(frame)
        elif t is Message:
            if not frame.resume:
                self.rcv_count += 1
            new = Handle(int.from_bytes(frame.tag, "big"))
            new.record = core.publish(self.ctx, frame.tag, frame.payload, frame.settled, new, 0, frame.resume)
            if new.record is not None and not frame.settled:
                self.handles[new.id] = new
        elif t is Update:
            handle = self.handles.get(frame.id)
            if handle is None:
                return
            if frame.settled:
                del self.handles[frame.id]
            if isinstance(self.ctx, CoreSubscriber):
                core.subscriber_update(self.ctx, handle.record, handle, frame.outcome, frame.settled)
            elif frame.settled:
                core.publisher_settled(self.ctx, handle.record)
        elif t is Credit:
            self.flow = (frame.delivery_count, frame.credit)
            if self.ctx is not None:  # (none after its detach)
                router.lifecycle.subscriber_credit(self.ctx)
        elif t is Detach:
            if isinstance(self.ctx, CoreSubscriber) and self.completed:
                router.lifecycle.subscriber_gone(self.ctx, False)
                self.ctx = None
        router.after_batch()

    def _attach(self, a: Attach) -> None:
        router = self.router
        lifecycle = router.lifecycle
        if a.role == "pub":
            self.ctx, ours = lifecycle.attach_publisher(self, a.topic, a.container_id, a.name, True,
                                                        a.incarnation or None, a.unsettled)
            self.conn.to_client.send(Attached(ours))
            lifecycle.publisher_answered(self.ctx)
            return

        def answer(ours: dict[Any, Any] | None, active: bool | None) -> None:
            if self.gone or not router.alive:
                return
            self.completed = True
            self.conn.to_client.send(Attached(ours))
            router.after_batch()

        request = SubscriberAttach(a.topic, a.container_id, a.name, group=GroupId(a.group) if a.group else None,
                                   resumable=True, unsettled=a.unsettled)
        self.ctx = lifecycle.attach_subscriber(self, request, answer)

    def lost(self) -> None:
        """The router notices the connection is gone: the link is suspended (it may resume)."""
        router = self.router
        if self.gone or not router.alive or self.ctx is None:
            self.gone = True
            return
        self.gone = True
        ctx = self.ctx
        if isinstance(ctx, CoreSubscriber):
            router.lifecycle.subscriber_gone(ctx, suspend=True)
        else:
            router.lifecycle.publisher_gone(ctx, suspend=True)
        router.after_batch()


# -------------------------------------------------------------- clients

class Client:
    def __init__(self, net: SimNet, name: str, topic: str, routers: list[str]) -> None:
        self.net = net
        self.name = name
        self.container_id = f"c-{name}"
        self.topic = topic
        self.routers = routers  # preference order; failover goes to the next alive one
        self.at = 0
        self.conn: ClientConn | None = None
        self.ever_attached = False
        self.attached = False
        self.alive = True
        self.left = False  # closed its link for good: never comes back

    def connect(self) -> None:
        """Dial the first alive router from the current one on; retry later if none is."""
        if not self.alive or self.conn is not None:
            return
        net = self.net
        for i in range(len(self.routers)):
            name = self.routers[(self.at + i) % len(self.routers)]
            router = net.routers.get(name)
            if router is not None and router.alive and not router.draining:
                self.at = (self.at + i) % len(self.routers)
                self.conn = ClientConn(net, self, router)
                self.attached = False
                self.conn.to_router.send(self.attach_frame())
                return
        net.loop.call_later(0.1, self.connect)

    def lost(self, conn: ClientConn) -> None:
        if self.conn is not conn:
            return
        self.conn = None
        self.attached = False
        self.on_down()
        self.at += 1  # the next router in the list
        self.net.loop.call_later(self.net.reconnect_delay(), self.connect)

    def crash(self) -> None:
        """The process dies (what it keeps durably stays: a publisher's outbox, a subscriber's
        accepted gids); it does nothing until ``restart``."""
        self.alive = False
        if self.conn is not None:
            self.conn.cut()
        self.conn = None
        self.attached = False
        self.on_down()

    def restart(self) -> None:
        if self.left:
            return
        self.alive = True
        self.connect()

    def send(self, frame: Any) -> None:
        if self.conn is not None:
            self.conn.to_router.send(frame)

    def attach_frame(self) -> Attach:
        raise NotImplementedError

    def on_down(self) -> None:
        pass

    def receive(self, frame: Any) -> None:
        raise NotImplementedError


class Publisher(Client):
    def __init__(self, net: SimNet, name: str, topic: str, routers: list[str]) -> None:
        super().__init__(net, name, topic, routers)
        self.link = f"pub-{name}"
        self.incarnation = net.loop.rng.randrange(1, 1 << 62)
        self.next = 0
        self.unsettled: dict[int, bytes] = {}
        self.outcomes: dict[int, Outcome] = {}
        self.to_send: deque[int] = deque()
        self.credit = 0
        self.snd_count = 0
        self.conflicts: list[str] = []
        self._gids: dict[int, bytes] = {}
        # ``--presettled``: some messages go pre-settled (at most once), mixed with the
        # unsettled ones on the one link, drawn from a stream of their own
        self.presettled_rng = random.Random(f"{net.seed}/{name}/presettled") if net.presettled else None
        self.presettled: set[int] = set()  # tags sent (or to be sent) pre-settled
        self.sent_at: dict[int, list[float]] = {}  # when each tag went to a router (again, after a resume)

    def gid(self, tag: int) -> bytes:
        # (memoized: the explorer's check asks for every accepted tag's gid at every event)
        gid = self._gids.get(tag)
        if gid is None:
            gid = self._gids[tag] = compute_gid(self.container_id, self.link, self.incarnation, _tag(tag))
        return gid

    def publish(self, n: int = 1) -> None:
        if not self.alive:
            return  # (a crashed application publishes nothing)
        for _ in range(n):
            tag = self.next
            self.next += 1
            self.unsettled[tag] = f"{self.name}:{tag}".encode()
            if self.presettled_rng is not None and self.presettled_rng.random() < self.net.presettled:
                self.presettled.add(tag)  # (forgotten once sent: at most once)
            self.to_send.append(tag)
        self.pump()

    def attach_frame(self) -> Attach:
        unsettled = ({_tag(t): None for t in self.unsettled if t not in self.presettled}
                     if self.ever_attached else None)
        return Attach("pub", self.topic, self.container_id, self.link, unsettled, self.incarnation)

    def on_down(self) -> None:
        self.credit = 0

    def receive(self, frame: Any) -> None:
        t = type(frame)
        if t is Attached:
            self._attached(frame.unsettled or {})
        elif t is Credit:
            self.credit = frame.delivery_count + frame.credit - self.snd_count
        elif t is Update:
            self._outcome(frame.id, frame.outcome)
        self.pump()

    def _attached(self, theirs: dict[Any, Any]) -> None:
        self.ever_attached = self.attached = True
        self.snd_count = 0
        fresh = []
        for tag in sorted(self.unsettled):
            key = _tag(tag)
            if tag in self.presettled:
                fresh.append(tag)  # (not sent yet: a pre-settled one is forgotten once sent)
            elif key in theirs:
                state = theirs[key]
                if state is not None and state.kind in _FINAL:
                    del self.unsettled[tag]
                    self.send(Message(tag, key, b"", True, resume=True, state=state))
                    self._record(tag, state)
                else:
                    self.sent_at.setdefault(tag, []).append(self.net.loop.now)
                    self.send(Message(tag, key, self.unsettled[tag], False, resume=True))
            else:
                fresh.append(tag)
        self.to_send = deque(fresh)

    def _outcome(self, tag: int, outcome: Outcome | None) -> None:
        if outcome is None or outcome.kind not in _FINAL or tag not in self.unsettled:
            return
        del self.unsettled[tag]
        self._record(tag, outcome)
        self.send(Update(tag, None, True))  # we settle: the router relays settlement

    def _record(self, tag: int, outcome: Outcome) -> None:
        old = self.outcomes.get(tag)
        if old is not None and old != outcome:
            self.conflicts.append(f"{self.name}:{tag} answered {old.kind.value} then {outcome.kind.value}")
        self.outcomes[tag] = outcome

    def pump(self) -> None:
        if not self.attached:
            return
        while self.to_send and self.credit > 0:
            tag = self.to_send.popleft()
            payload = self.unsettled.get(tag)
            if payload is None:
                continue
            self.credit -= 1
            self.snd_count += 1
            if tag in self.presettled:
                del self.unsettled[tag]  # at most once: nothing to wait for, nothing to send again
                self.send(Message(tag, _tag(tag), payload, True))
                continue
            self.sent_at.setdefault(tag, []).append(self.net.loop.now)
            self.send(Message(tag, _tag(tag), payload, False))


LEAVE_WAIT = 2.0  # seconds a leaving member waits for what it accepted to be settled (our client's)


class Subscriber(Client):
    def __init__(self, net: SimNet, name: str, topic: str, routers: list[str], window: int = 20,
                 group: str = "") -> None:
        super().__init__(net, name, topic, routers)
        self.group = group  # a member of this consumer group (modelled on our client: it resumes)
        self.link = f"{group}|{name}" if group else f"sub-{name}"
        self.window = window
        self.accepted: set[bytes] = set()  # durable: what the application processed
        self.unsettled_accepted: set[bytes] = set()  # durable: accepted, not settled by the router yet
        self.effects: list[bytes] = []  # what the application did, in order (each gid once, if all is well)
        self.payloads: dict[bytes, bytes] = {}
        self.held: dict[bytes, int] = {}  # with the application, not accepted yet -> its delivery id
        self.queue: deque[bytes] = deque()  # the application works through these in order
        self.busy = False
        self.ids: dict[int, bytes] = {}  # delivery id -> gid (what the router may settle)
        self.rcv_count = 0
        self.received = 0
        # What the wire handed this subscriber, every frame in order (virtual time, gid,
        # delivery-count, pre-settled): what a standard client sees, judged by ``SimNet.check``
        # as the least capable client would (it processes every frame not marked as a repeat).
        self.handed: list[tuple[float, bytes, int, bool]] = []
        self.redelivered: set[bytes] = set()  # taken when it came marked as a possible repeat
        # ``--releases``: a group member gives some messages back (AMQP ``released``), each at
        # most once, drawn from its own stream (the rest of a seed's schedule stays the same)
        self.release_rng = random.Random(f"{net.seed}/{name}") if group and net.releases else None
        self.released: set[bytes] = set()
        self.leaving = False  # closes its link once what it accepted is settled (``leave``)
        # Its link ended with ``once:subscription-gap`` (virtual times): it attached again,
        # and what was published from the gap until then may be missing, told (the verdict
        # counts it ``told_expired``, never lost)
        self.gaps: list[float] = []
        self.fresh_at = 0.0  # when its attach after its last gap completed (0: none yet)
        self.waited = False  # ... or once it waited ``LEAVE_WAIT`` for that
        self.told_again = False  # ... then attached again, its map saying what it accepted

    def attach_frame(self) -> Attach:
        unsettled = {g: ACCEPTED for g in self.unsettled_accepted} if self.ever_attached else None
        return Attach("sub", self.topic, self.container_id, self.link, unsettled, group=self.group)

    def on_down(self) -> None:
        self.ids.clear()
        self.rcv_count = 0
        for gid in self.held:  # their deliveries were on that connection: the next attach's map tells
            self.held[gid] = -2

    def leave(self) -> None:
        """The application closes its link for good (``--leaves``): what it had not accepted
        goes to another member of its group. What it accepted is settled first (as our
        client's ``close(unsubscribe=True)`` waits for): had its router died meanwhile, a
        close with the message unsettled would leave nobody knowing this member processed
        it (--groups --leaves seed 114), and it would go to another member too."""
        if not self.alive or self.leaving:
            return
        self.leaving = True
        self.held.clear()
        self.queue.clear()
        self.busy = False
        self._detach_when_settled()
        self.net.loop.call_later(LEAVE_WAIT, self._detach_when_settled, True)

    def _detach_when_settled(self, waited: bool = False) -> None:
        self.waited = self.waited or waited
        if not self.leaving or self.left or (self.unsettled_accepted and not self.waited):
            return  # (again when the router settles, or when the wait is over)
        if not self.attached or self.conn is None:
            return  # (on its next attach)
        if self.unsettled_accepted and not self.told_again:
            # Waited, and still not settled: the acceptance may be lost with this connection
            # (its router paused, the connection about to be given up), and closing now
            # would leave nobody knowing this member processed the message (``--hard
            # --groups`` churn seed 33). Not waiting for ever (a settlement that never comes
            # stalled the group: fresh churn seed 213206751478): it attaches again, on a new
            # connection, its map naming what it accepted; the answer to that attach means
            # the router has the map, and then it closes (as our client's close does).
            self.told_again = True
            self._reattach()
            return
        self.send(Detach())
        self.alive = False
        self.left = True

    def crash(self) -> None:
        """The process dies: what the application had not accepted is gone with it."""
        super().crash()
        self.held.clear()
        self.queue.clear()
        self.busy = False

    def receive(self, frame: Any) -> None:
        if self.left:
            return  # (its link is closed)
        t = type(frame)
        if t is Ended:
            self._gap()
            return
        if t is Attached:
            if self.gaps and not self.fresh_at:
                self.fresh_at = self.net.loop.now
            self.ever_attached = self.attached = True
            if self.leaving:
                # (no credit: it takes nothing new, closing; what it accepted its map names,
                # and the router settles it without sending it again)
                self._detach_when_settled()
            else:
                self.send(Credit(self.rcv_count, self.window - len(self.held)))
        elif t is Message:
            self._message(frame)
        elif t is Update and frame.settled:
            gid = self.ids.pop(frame.id, None)
            if gid is not None:
                self.unsettled_accepted.discard(gid)
                if self.leaving:
                    self._detach_when_settled()

    def _reattach(self) -> None:
        """A new connection (to the same router first), attaching again with its map."""
        conn, self.conn = self.conn, None
        self.attached = False
        self.on_down()
        if conn is not None:
            conn.closed = conn.to_router.closed = conn.to_client.closed = True
            if not conn.edge.gone:
                # The client aborts it, as ours does (a TCP reset): its router notices (once it
                # runs again, if paused) and suspends the link, as for any connection that
                # drops. Unnoticed, the router kept the member attached for ever, and a router
                # that left with it in its state stayed its home to every root (fresh
                # --elastic churn seed 430033339710). (No random draw: the rest of a seed's
                # schedule stays as it was.)
                rid = conn.router.id
                self.net.loop.call_later(0.001 + self.net.stall(rid, rid), conn.edge.lost)
        self.net.loop.call_later(self.net.reconnect_delay(), self.connect)

    def _gap(self) -> None:
        """Its link ended with a subscription gap: it attaches again (as our client does,
        resuming: the subscription waits for it), on a new connection to the same router.
        The verdict no longer owes it what was published while it was given up."""
        self.gaps.append(self.net.loop.now)
        self.fresh_at = 0.0
        self._reattach()

    def _message(self, m: Message) -> None:
        self.handed.append((self.net.loop.now, m.tag, m.redelivery, m.settled))
        self.rcv_count += 1
        self.received += 1
        gid = m.tag
        if self.leaving and gid not in self.accepted:
            self._top_up()
            return  # (not taken: its router gives it to another member when we close)
        if gid in self.accepted:  # a copy of what we processed: accept it again, nothing more
            if not m.settled:
                self.ids[m.id] = gid
                self.unsettled_accepted.add(gid)
                self.send(Update(m.id, ACCEPTED, False))
            self._top_up()
            return
        if gid in self.held:  # the application has it (from before a reconnect): answer this copy
            self.held[gid] = -1 if m.settled else m.id
            return
        if (self.release_rng is not None and not m.settled and gid not in self.released
                and self.release_rng.random() < self.net.releases):
            self.released.add(gid)  # (the router settles it: its id is not ours to keep)
            self.send(Update(m.id, RELEASED, False))
            self._top_up()
            return
        self.held[gid] = -1 if m.settled else m.id
        self.payloads[gid] = m.payload
        if m.redelivery:
            self.redelivered.add(gid)
        self.queue.append(gid)
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if not self.queue:
            self.busy = False
            return
        self.busy = True
        self.net.loop.call_later(self.net.process_delay(), self._processed, self.queue[0])

    def _processed(self, gid: bytes) -> None:
        if not self.alive or not self.queue or self.queue[0] != gid:
            return  # crashed meanwhile
        self.queue.popleft()
        self.accepted.add(gid)
        self.effects.append(gid)
        id = self.held.pop(gid, -1)
        if id != -1:  # (-1: it came pre-settled)
            self.unsettled_accepted.add(gid)  # in the next attach's map until the router settles
        if id >= 0 and self.conn is not None:
            self.ids[id] = gid
            self.send(Update(id, ACCEPTED, False))
        self._top_up()
        self._next()

    def _top_up(self) -> None:
        if self.attached:
            self.send(Credit(self.rcv_count, self.window - len(self.held)))
