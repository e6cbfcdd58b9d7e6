"""MQTT sessions that live in the network: each router keeps a replica of every persistent
session, so a client that reconnects to any router after its router died finds its session
there (``docs/mqtt.md``, "Sessions in the network").

A session is small: its subscriptions, the epoch of its QoS 2 messages to us, our
QoS 2 messages in flight to it (packet id -> gid, and whether its PUBREC came), and
those whose flow it completed that the network has not settled yet (their gids). The
router its connection is at (the host) changes it and sends the whole session, stamped
newer, to every router it reaches (``Note`` items on the inter-router control links);
each answers with an acknowledgement. What the client may act on waits until every
router it reached had the change: a PUBLISH to the client waits for its packet id to be
known, a PUBREL for its PUBREC to be, a PUBCOMP for the epoch that makes the packet id
new. A router that goes out of reach is no longer waited for (it has no client to tell).

Sessions are sent whole, not as changes: a few dozen entries at most (the client's
receive maximum bounds what is in flight; what it completed stays until the network
settles it, a round trip to the message's root when every subscriber keeps up), and a
lost or reordered note cannot leave a replica with a hole. Stamps order them: the newest
wins, a stale one is answered but not taken. A router that comes into reach is sent every
session known here.

Why not a library or the core's messages: no store here is replicated (the network keeps
nothing on disk), and a session must not be a message the network holds for a
subscriber: a dead router's subscriber is waited for during its grace, a replica is not.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...logs import fields

if TYPE_CHECKING:
    from ...context import RouterContext

log = logging.getLogger("once.mqtt")
CHANNEL = "mqtt-sessions"
TICK = 0.25  # seconds between checks of reach, resends and expiry
RESEND_AFTER = 1.0  # a change not acknowledged this long is sent again
TOMBSTONE_FOR = 600.0  # an ended session is remembered this long (a late copy must not revive it)


@dataclass(slots=True)
class Session:
    client_id: str
    incarnation: int  # new at each clean start: the gids of its messages to us derive from it
    stamp: int = 0  # when it last changed (the host's clock in microseconds, past every stamp seen)
    host: str = ""  # the router its connection is at
    expiry: int = 0  # seconds it outlives its connection
    subscriptions: dict[str, int] = field(default_factory=dict)  # filter -> QoS
    epoch: int = 0  # its QoS 2 messages to us are tagged (epoch, packet id)
    # our QoS 2 messages in flight to it: packet id -> (gid, PUBREC came, the filter it came by)
    outbound: dict[int, tuple[bytes, bool, str]] = field(default_factory=dict)
    # Our QoS 2 messages whose flow it completed (PUBCOMP) that the network has not settled:
    # gid -> filter. Its client forgot their packet ids, so a copy sent again (the root did
    # not hear our acceptance, and the session resumed elsewhere) could only go as a new
    # message: where the session resumes they are answered for it (``outbound.py``).
    done: dict[bytes, str] = field(default_factory=dict)
    gone_at: float | None = None  # wall clock seconds its connection went (its expiry runs)
    ended: bool = False
    # How often its client connected elsewhere (or started it anew): a change by the router
    # it left, made late, must lose to the newer host's whatever the clocks say.
    moves: int = 0
    # The user it belongs to ("" when the router authenticates nobody): another user may not
    # take it over, resume it or end it with a clean start (a session's subscriptions are
    # its user's, as an AMQP subscriber's key is).
    owner: str = ""

    @property
    def version(self) -> tuple[int, int]:
        return (self.moves, self.stamp)

    def to_bytes(self) -> bytes:
        return json.dumps({"c": self.client_id, "i": self.incarnation, "s": self.stamp, "h": self.host,
                           "x": self.expiry, "sub": self.subscriptions, "e": self.epoch,
                           "o": [[pid, gid.hex(), rec, f] for pid, (gid, rec, f) in self.outbound.items()],
                           "d": [[gid.hex(), f] for gid, f in self.done.items()],
                           "g": self.gone_at, "end": self.ended, "m": self.moves, "u": self.owner},
                          separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Session:
        return cls(str(d["c"]), int(d["i"]), int(d["s"]), str(d["h"]), int(d["x"]),
                   {str(k): int(v) for k, v in d["sub"].items()}, int(d["e"]),
                   {int(pid): (bytes.fromhex(gid), bool(rec), str(f)) for pid, gid, rec, f in d["o"]},
                   {bytes.fromhex(gid): str(f) for gid, f in d.get("d", ())},
                   None if d["g"] is None else float(d["g"]), bool(d["end"]), int(d.get("m", 0)),
                   str(d.get("u") or ""))

    def expired(self, now: float) -> bool:
        return self.ended or self.gone_at is not None and now >= self.gone_at + self.expiry


class SessionStore:
    """One router's replicas of the network's persistent MQTT sessions."""

    def __init__(self, router: RouterContext) -> None:
        self.router = router
        self.me = router.id
        self.network = router.network
        self.sessions: dict[str, Session] = {}
        self.tombstones: dict[str, tuple[tuple[int, int], float]] = {}  # client id -> (version, until)
        # Changes of ours not acknowledged by everyone yet: client id -> (stamp, routers, sent at, then)
        self.waiting: dict[str, tuple[int, set[str], float, list[Callable[[], None]]]] = {}
        self.dirty: dict[str, list[Callable[[], None]]] = {}
        self.reach: set[str] = set()
        self.last_stamp = 0
        self.on_taken: dict[str, Callable[[], None]] = {}  # client id -> its connection here, to close
        self.on_end: Callable[[str], None] | None = None  # its suspended subscriptions here end
        self.flush_scheduled = False
        self.network.listen(CHANNEL, self.note)
        router.call_later(TICK, self.tick)

    # ------------------------------------------------------------------ changes

    def stamp(self) -> int:
        s = max(time.time_ns() // 1000, self.last_stamp + 1)
        self.last_stamp = s
        return s

    def get(self, client_id: str) -> Session | None:
        s = self.sessions.get(client_id)
        if s is None or s.expired(time.time()):
            return None
        return s

    def changed(self, session: Session, then: Callable[[], None] | None = None) -> None:
        """``session`` (hosted here) changed: every router we reach gets it; ``then`` runs
        once they all have it (at once when we reach none)."""
        self.sessions[session.client_id] = session
        waiters = self.dirty.setdefault(session.client_id, [])
        if then is not None:
            waiters.append(then)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.router.call_soon(self.flush)

    def flush(self) -> None:
        """Send this batch's changes: one stamp and one note per session and router."""
        self.flush_scheduled = False
        dirty, self.dirty = self.dirty, {}
        reach = self.network.reachable() - {self.me}
        now = time.monotonic()
        ready: list[Callable[[], None]] = []
        for client_id, then in dirty.items():
            session = self.sessions.get(client_id)
            if session is None:
                ready += then
                continue
            session.stamp = self.stamp()
            earlier = self.waiting.pop(client_id, None)
            if earlier is not None:
                then = earlier[3] + then  # (the new stamp covers the earlier change too)
            body = self._put(session)
            routers = {r for r in reach if self.network.send_note(r, CHANNEL, body)}
            if routers:
                self.waiting[client_id] = (session.stamp, routers, now, then)
            else:
                ready += then
        for f in ready:
            f()
        if ready:
            self.router.flush()

    def next_move(self, client_id: str) -> int:
        """``moves`` for the session its client starts or resumes here: past every one known."""
        known = self.sessions.get(client_id)
        tomb = self.tombstones.get(client_id)
        return max(known.moves if known is not None else 0, tomb[0][0] if tomb is not None else 0) + 1

    def end(self, session: Session) -> None:
        """The session is over (a clean start replaced it, or it expired here)."""
        session.ended = True
        session.moves = self.next_move(session.client_id)
        session.stamp = self.stamp()
        self.tombstones[session.client_id] = (session.version, time.monotonic() + TOMBSTONE_FOR)
        self.changed(session)

    def end_at(self, session: Session) -> None:
        """Its host ends what it holds of it (its client started anew elsewhere)."""
        self.network.send_note(session.host, CHANNEL, json.dumps({"k": "end", "c": session.client_id}).encode())

    def take(self, session: Session) -> None:
        """Its client connected here: its old host closes the connection it may still have."""
        if session.host and session.host != self.me:
            self.network.send_note(session.host, CHANNEL,
                                   json.dumps({"k": "take", "c": session.client_id}).encode())

    # ------------------------------------------------------------------ notes

    def _put(self, session: Session) -> bytes:
        return b'{"k":"put","v":' + session.to_bytes() + b"}"

    def note(self, frm: str, body: bytes) -> None:
        try:
            d = json.loads(body)
            kind = d["k"]
            if kind == "put":
                self._take_copy(frm, Session.from_dict(d["v"]))
            elif kind == "ack":
                self._acked(frm, str(d["c"]), int(d["s"]))
            elif kind in ("take", "end"):
                close = self.on_taken.get(str(d["c"]))
                if close is not None:
                    close()
                if kind == "end" and self.on_end is not None:
                    self.on_end(str(d["c"]))
        except (ValueError, KeyError, TypeError) as e:
            log.warning("router %s: a malformed MQTT session note from %s dropped: %s", self.me, frm, e,
                        extra=fields("mqtt.session.malformed", peer=frm))

    def _take_copy(self, frm: str, copy: Session) -> None:
        self.last_stamp = max(self.last_stamp, copy.stamp)
        known = self.sessions.get(copy.client_id)
        tomb = self.tombstones.get(copy.client_id)
        if (known is None or copy.version > known.version) and (tomb is None or copy.version > tomb[0]):
            if known is not None and known.host == self.me and copy.host != self.me:
                close = self.on_taken.get(copy.client_id)  # (it connected there since)
                if close is not None:
                    close()
            self.sessions[copy.client_id] = copy
            if copy.ended:
                self.tombstones[copy.client_id] = (copy.version, time.monotonic() + TOMBSTONE_FOR)
        self.network.send_note(frm, CHANNEL, json.dumps(
            {"k": "ack", "c": copy.client_id, "s": copy.stamp}).encode())

    def _acked(self, frm: str, client_id: str, stamp: int) -> None:
        waiting = self.waiting.get(client_id)
        if waiting is None or stamp < waiting[0]:
            return
        waiting[1].discard(frm)
        if not waiting[1]:
            del self.waiting[client_id]
            for f in waiting[3]:
                f()
            self.router.flush()

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        try:
            self._tick()
        finally:
            if not getattr(self.router, "stopping", False):
                self.router.call_later(TICK, self.tick)

    def _tick(self) -> None:
        reach = self.network.reachable() - {self.me}
        now, wall = time.monotonic(), time.time()
        for r in reach - self.reach:  # it came into reach (or back): it gets every session we know
            for s in list(self.sessions.values()):
                self.network.send_note(r, CHANNEL, self._put(s))
        self.reach = reach
        done: list[Callable[[], None]] = []
        for client_id, (stamp, routers, sent, then) in list(self.waiting.items()):
            routers &= reach  # (a router out of reach is not waited for)
            if not routers:
                del self.waiting[client_id]
                done += then
            elif now - sent > RESEND_AFTER:
                session = self.sessions.get(client_id)
                if session is not None:
                    for r in routers:
                        self.network.send_note(r, CHANNEL, self._put(session))
                self.waiting[client_id] = (stamp, routers, now, then)
        for f in done:
            f()
        for client_id, s in list(self.sessions.items()):
            if s.host and s.host != self.me and s.host not in reach and s.gone_at is None:
                s.gone_at = wall  # its router is gone: its expiry runs from now, here
            if s.expired(wall):
                del self.sessions[client_id]
                if not s.ended:  # (its subscriptions expire by their own grace, where they are)
                    self.tombstones[client_id] = (s.version, now + TOMBSTONE_FOR)
        for client_id, (_, until) in list(self.tombstones.items()):
            if now > until:
                del self.tombstones[client_id]
        if done:
            self.router.flush()
