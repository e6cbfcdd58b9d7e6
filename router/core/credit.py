"""The credit window: how much a router lets its publishers and neighbours send.

Two windows of ``max_in_flight`` deliveries each: one for our own publishers' records,
one (transit) for deliveries neighbours forward to us, so two routers publishing
towards each other can never hold each other's credit. Both also stop at
``max_in_flight_bytes`` of message bytes held.

Publisher credit follows use, so one client can never take the window from the rest:

* a new link gets one credit (the size of its messages is unknown until the first),
  then a ``window`` of ``initial_credit`` that doubles each time it has sent half of it,
  up to ``link_credit``; credit is topped up at three quarters of that window;
* the router's window is shared among the publishers that sent lately (``reclaim``
  counts them), not among every attached link;
* a link holding credit unused for ``credit_idle`` is cut back to one credit (its next
  message brings its window back);
* one connection's publishers (a ``group``) hold at most ``max_connection_credit``;
* a link's credit times its guessed message size stays within ``link_in_flight_bytes``
  and the router's byte room, and a link that passes its bound loses its credit;
* so does the credit of all the links of a user or a host with a ``max_in_flight_bytes``
  in the policy, within that (``purse.py``).

Granting records which links' credit changed (``effects.py``: each hears its credit as
the batch ends) and nothing else; the core tells this window what changed and asks it to
top up.

A pass walks only the links that may want credit. A link that holds credit and can take
no more until it sends (its one credit, at window 1 or its message size still unknown;
or all its target, when no byte budget of the policy bounds it) is *parked*: the pass
skips it, and what it holds counts through sums kept as it parks and unparks (credit
per connection, bytes that credit may bring). Its next message (or losing credit)
unparks it. So a router with thousands of idle links pays for the busy ones only: an
MQTT client publishing to 10,000 topics (a link each) took 64 s when every pass walked
them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..config import Settings
from .ceiling import Phase
from .effects import Effects
from .pace import EPOCH

if TYPE_CHECKING:
    from .peers import Publisher, Upstream
    from .purse import Purse


class CreditWindow:
    __slots__ = ("settings", "outstanding", "transit_outstanding", "busy", "_rr", "dirty", "active",
                 "parked_conn", "parked_bytes", "parked", "changed")

    def __init__(self, settings: Settings, effects: Effects) -> None:
        self.settings = settings
        self.changed = effects.grants  # links whose credit changed: told at the end of the batch
        self.outstanding = 0  # credit granted to publishers and not yet used
        self.transit_outstanding = 0  # the same for upstream neighbours
        self.busy = 0  # publishers that sent since the sweep before last
        self._rr = 0  # where the next top-up starts: fairness when the budget runs out
        self.dirty = False  # something freed room or a window may grow: top up after the batch
        self.active: dict[Publisher, None] = {}  # attached links a pass looks at (insertion order)
        self.parked = 0  # attached links it skips (each holds credit)
        self.parked_conn: dict[object, int] = {}  # parked links' credit per connection (``group``)
        self.parked_bytes = 0  # what the parked links' credit may bring, at their guessed sizes

    # --------------------------------------------------------- bookkeeping

    def attached(self, pub: Publisher) -> None:
        self.active[pub] = None

    def detached(self, pub: Publisher) -> None:
        """The link is gone: its unused credit returns to the window."""
        if pub.parked:
            self.unpark(pub)
        self.active.pop(pub, None)  # (one without credit was never here: ``Core.add_publisher``)
        self.outstanding -= pub.credit
        pub.credit = 0

    def unpark(self, pub: Publisher) -> None:
        """It sends (or loses its credit): passes look at it again."""
        pub.parked = False
        self.parked -= 1
        group = pub.group
        left = self.parked_conn[group] - pub.credit
        if left:
            self.parked_conn[group] = left
        else:
            del self.parked_conn[group]
        self.parked_bytes -= pub.credit * pub.size
        self.active[pub] = None

    def _park_if_full(self, pub: Publisher, per_conn: dict[object, int] | None) -> bool:
        """Park it if it holds its one credit and cannot take more before it sends; its
        credit then leaves this pass's per-connection sum (it counts among the parked)."""
        if pub.credit != 1 or (pub.window != 1 and pub.size):
            return False
        self._park(pub, per_conn)
        return True

    def _park(self, pub: Publisher, per_conn: dict[object, int] | None) -> None:
        # (its credit and size cannot change while parked: a message, or losing credit, unparks it first)
        pub.parked = True
        self.parked += 1
        self.parked_conn[pub.group] = self.parked_conn.get(pub.group, 0) + pub.credit
        self.parked_bytes += pub.credit * pub.size
        del self.active[pub]
        if per_conn is not None:
            per_conn[pub.group] -= pub.credit

    def used(self, pub: Publisher) -> None:
        """``pub`` sent a message on its credit (the per-message bookkeeping)."""
        if pub.parked:
            self.unpark(pub)
        pub.credit -= 1
        self.outstanding -= 1
        pub.sent += 1
        if pub.credit <= pub.refill_at:
            self.dirty = True  # top it up (and its window may grow) after this batch

    def used_resent(self, pub: Publisher, resumed: bool) -> None:
        """``pub`` sent again a message we hold: a resend used a credit, nothing more (a
        transfer with resume=true uses none)."""
        if pub.parked:
            self.unpark(pub)
        if pub.credit > 0 and not resumed:
            pub.credit -= 1
            self.outstanding -= 1

    def transit_used(self, up: Upstream) -> None:
        """A neighbour forwarded a message on its credit."""
        if up.credit > 0:
            up.credit -= 1
            self.transit_outstanding -= 1
            if not up.credit & 7 and up.credit * 2 <= self.settings.link_credit:
                # Look again after this batch (every 8th credit once half is used): a copy
                # of a record we hold frees nothing when answered, so nothing else would, and a
                # neighbour's re-forwards would use its credit up for good
                # (``test_copies_of_a_message_held_here_sent_again_and_again_do_not_use_up_a_neighbours_credit``).
                self.dirty = True

    def upstream_gone(self, up: Upstream) -> None:
        """A neighbour's link towards us is gone: its unused credit returns to the window."""
        self.transit_outstanding -= up.credit
        up.credit = 0

    def want_pass(self) -> None:
        """Room was freed (or a window may grow): a pass after this batch."""
        self.dirty = True

    def take_pass(self) -> bool:
        """Whether a pass is due (and it is taken now)."""
        if self.dirty:
            self.dirty = False
            return True
        return False

    def lowered(self, pub: Publisher, credit: int) -> bool:
        """The publisher drained (or a transfer was refused): its credit is ``credit`` now."""
        if credit >= pub.credit:
            return False
        if pub.parked:
            self.unpark(pub)
        self.outstanding -= pub.credit - credit
        pub.credit = credit
        return True

    def take_back(self, pub: Publisher) -> None:
        """Its bytes in flight (or the router's) passed their bound: no more until they drop."""
        if pub.parked:
            self.unpark(pub)
        self.outstanding -= pub.credit
        pub.credit = 0
        pub.taken_back = True
        self.changed[pub] = None

    # --------------------------------------------------------------- grants

    def grant(self, in_flight: int, held_bytes: int, now: float) -> None:
        """Top up publisher credit within the room left: ``in_flight`` records of our own
        publishers and ``held_bytes`` of message bytes are held now."""
        if not self.active:
            return
        settings = self.settings
        window = settings.max_in_flight
        budget = window - in_flight - self.outstanding
        if budget <= 0:
            return
        link_credit = settings.link_credit
        # Topping up at three quarters keeps the pipe full without letting one publisher
        # queue the whole router window (latency grows with what is queued).
        share = max(1, min(link_credit, window // max(1, self.busy)))
        pubs = list(self.active)
        n = len(pubs)
        per_conn: dict[object, int] | None = None
        parked_conn = self.parked_conn
        cap = settings.max_connection_credit or max(link_credit, window // 4)
        # Bytes: what the records hold plus what the credit out there may bring (at each
        # link's guessed message size) stays within max_in_flight_bytes.
        link_bytes = settings.link_in_flight_bytes
        if n + self.parked > 1:
            per_conn = {}
            promised = self.parked_bytes
            for pub in pubs:
                per_conn[pub.group] = per_conn.get(pub.group, 0) + pub.credit
                promised += pub.credit * pub.size
        else:
            promised = pubs[0].credit * pubs[0].size
        room = settings.max_in_flight_bytes - held_bytes - promised
        if room <= 0:
            return
        start = self._rr % n
        promised_by: dict[Purse, int] | None = None  # (made when a link with a purse wants credit)
        for i in range(n):
            pub = pubs[(start + i) % n]
            if pub.window < link_credit and pub.sent - pub.grown_at >= max(1, pub.window // 2):
                pub.window = min(pub.window * 2, link_credit)
                pub.grown_at = pub.sent
            if self._park_if_full(pub, per_conn):
                continue
            pace = pub.pace
            target = min(pub.window, share, pace.value)
            held = pub.credit + pub.in_flight
            if held * 4 >= target * 3 and pub.credit * 4 < target:
                pace.bound = True  # it holds what it may, in flight: this epoch's rate measures the path
            if now - pace.epoch_at >= EPOCH:  # (most passes: no call)
                pace.observe(pub.sent, now)
                target = min(target, pace.value)
            if held >= target or (pub.credit and not pub.size):
                if pub.credit and not pub.purses:
                    self._park(pub, per_conn)  # (it holds what it may: nothing to do until it sends)
                continue  # (idle links, and links yet to send their first: keep this loop cheap)
            # Unused credit is what a publisher can queue in front of us: it stays within the
            # probed ceiling, and what it holds unanswered within the window.
            ceiling = pub.ceiling
            if pub.credit == 0 or ceiling.phase is not Phase.MEASURE:
                ceiling.observe(pub.sent, now)  # it used all it had: the ceiling binds
            else:
                ceiling.restart(pub.sent, now)
            unused_room = ceiling.value - pub.credit
            if ceiling.value >= target:  # it does not bind: top up at three quarters of the window
                if held * 4 > target * 3:
                    if pub.credit and not pub.purses:
                        self._park(pub, per_conn)  # (until it sends)
                    continue
                refill_at = target // 4
            else:
                if unused_room * 4 < ceiling.value * 3:
                    if pub.credit and not pub.purses:
                        self._park(pub, per_conn)
                    continue  # topped up once three quarters are used: not a pass per batch
                refill_at = ceiling.value // 4
            give = min(target - held, unused_room, budget)
            if per_conn is not None:
                give = min(give, cap - per_conn[pub.group] - parked_conn.get(pub.group, 0))
            size = pub.size
            if size:
                fits = (link_bytes - pub.bytes) // size
                if fits < 1 and pub.in_flight == 0:
                    fits = 1  # a message larger than the link's bound still goes, alone
                give = min(give, fits - pub.credit, room // size)
            else:
                give = min(give, 1 - pub.credit)  # its size is unknown until its first message
            purses = pub.purses
            if purses and give > 0:  # (its user's or host's byte budget: ``purse.py``)
                if promised_by is None:
                    promised_by = _promised(pubs)
                give = min(give, _purse_fits(pub, purses, size, promised_by))
            if give <= 0:
                continue
            if purses and promised_by is not None:
                for purse in purses:
                    promised_by[purse] = promised_by.get(purse, 0) + give * max(size, 1)
            pub.credit += give
            pub.taken_back = False
            pub.refill_at = refill_at  # ``publish`` asks for a pass when its credit falls to it
            self.outstanding += give
            budget -= give
            room -= give * max(size, 1)
            if per_conn is not None:
                per_conn[pub.group] += give
            self.changed[pub] = None
            if not self._park_if_full(pub, per_conn) and pub.credit + pub.in_flight >= target and not purses:
                self._park(pub, per_conn)  # (it holds what it may now)
            if budget <= 0:
                self._rr = start + i + 1
                break

    def grant_transit(self, ups: Sequence[Upstream], in_transit: int, held_bytes: int) -> None:
        """Credit for neighbours forwarding to us: ``in_transit`` of their records are held.

        A neighbour holding more than today's share (granted while fewer neighbours shared
        the window) is cut back to it: else an idle one keeps it for good and one that came
        up later gets none, and the copies queued for it wait for ever. Transfers it sent on
        the old credit are still admitted (the engine counts revoked credit)."""
        if not ups:
            return
        window = self.settings.max_in_flight
        share = max(1, min(self.settings.link_credit, window // len(ups)))
        for up in ups:
            if up.credit > share:
                self.transit_outstanding -= up.credit - share
                up.credit = share
                self.changed[up] = None
        if held_bytes >= self.settings.max_in_flight_bytes:
            return
        budget = window - in_transit - self.transit_outstanding
        for up in ups:
            if budget <= 0:
                return
            if up.credit * 2 > share:
                continue
            give = min(share - up.credit, budget)
            up.credit += give
            self.transit_outstanding += give
            budget -= give
            self.changed[up] = None

    def reclaim(self, pubs: Iterable[Publisher], now: float) -> int:
        """Take credit back from links that hold it without sending; count the busy ones.

        A link quiet for ``credit_idle`` keeps one credit; the rest returns to the window.
        Returns how many links were cut back (top up afterwards). The peer may have sent
        on the old credit already: the engine admits those transfers (they crossed our flow).
        """
        idle = self.settings.credit_idle
        busy = 0
        cut = 0
        for pub in pubs:
            if pub.sent != pub.seen:
                pub.seen = pub.sent
                pub.quiet_since = now
                busy += 1
            elif pub.window > 1 and now - pub.quiet_since >= idle:
                pub.window = 1
                pub.grown_at = pub.sent
                if pub.credit > 1:
                    if pub.parked:
                        self.unpark(pub)  # (what it holds leaves the parked sums before it changes)
                    self.outstanding -= pub.credit - 1
                    pub.credit = 1
                    self.changed[pub] = None
                    cut += 1
        self.busy = busy
        return cut


def _promised(pubs: Sequence[Publisher]) -> dict[Purse, int]:
    """What the credit out there may bring, at each link's guessed size, per purse. (The
    parked links' one credit each is left out: their size is a guess of one message.)"""
    promised: dict[Purse, int] = {}
    for pub in pubs:
        if pub.purses and pub.credit:
            for purse in pub.purses:
                promised[purse] = promised.get(purse, 0) + pub.credit * max(pub.size, 1)
    return promised


def _purse_fits(pub: Publisher, purses: tuple[Purse, ...], size: int, promised: dict[Purse, int]) -> int:
    """How many more credits ``pub``'s purses leave room for."""
    fits = 1 << 30
    for purse in purses:
        left = purse.limit - purse.bytes - promised.get(purse, 0)
        if size:
            n = left // size
            if n < 1 and purse.bytes == 0 and not promised.get(purse):
                n = 1  # a message larger than the budget still goes, alone
        else:
            n = 1 if left > 0 else 0  # (its size unknown: its first message, once there is room)
        fits = min(fits, n)
    return fits
