"""What each user and each source host holds on this router, against the policy's limits.

The policy (``policy.py``) may limit, per user (its own rule or its groups') and per
source host (``policy.hosts``), the connections, sessions, links, message size and
in-flight message bytes held at once on a router. The AMQP and MQTT adaptors ask here;
one table serves both, so a user's MQTT and AMQP connections count together.

* Connections are counted as they open (after authentication: the user is known) and
  as they go. Each principal (a user, a host) keeps the set of its connections, and the
  sessions and links they hold in all: each connection reports what it holds when that
  may have changed (``report``, at the end of its batch), so a check costs the same
  whatever the principal holds. (Summing over its connections on each attach was
  quadratic: 2000 anonymous connections attaching two links each under a default
  ``max_links`` took 5.0 s of the router's CPU instead of 0.7 s.)
* In-flight bytes are a ``Purse`` per principal with a limit, which its publisher links
  share; the core's credit keeps them within it (``core/purse.py``).
* A refusal names the limit and the rule that set it, e.g. ``user alice may hold 2
  connections on this router (policy.users.alice.max_connections)``; the adaptor sends it
  with its protocol's error, and it is logged once a while per principal and limit.
* Refusals are counted, by limit (or by what the policy refused: ``publish``,
  ``subscribe``, ``join``) and per principal, for ``once stat -p``, ``/api/policy`` and
  the metrics (``http/views.py``). The per-principal counts are kept for the last
  ``REFUSALS_KEPT`` principals refused: a flood from many addresses cannot grow them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from ..core.purse import Purse
from ..logs import fields
from .authn import user_groups

if TYPE_CHECKING:
    from ..config import Settings, Topology
    from .limits import RateLimitedLog

Principal = tuple[str, str]  # ("user", name) or ("host", address)

NOUNS = {"max_connections": "connections", "max_sessions": "sessions", "max_links": "links"}

# What a refusal is counted under: a limit, or what the policy refused a user.
LIMITS = ("max_connections", "max_sessions", "max_links", "max_message_size", "max_in_flight_bytes", "subscriber_stall")
REFUSED = (*LIMITS, "publish", "subscribe", "join")
REFUSALS_KEPT = 1000


class Owner(Protocol):
    """What of its router the quotas read (the topology changes on SIGHUP)."""

    id: str
    topology: Topology
    settings: Settings
    guard_log: RateLimitedLog


class Holder(Protocol):
    """A client connection as the quotas see it."""

    def holds(self, what: str) -> int:
        """How many ``sessions`` or ``links`` it holds now (answered: not one being opened)."""
        ...


class Quotas:
    def __init__(self, router: Owner) -> None:
        self.router = router
        self.held: dict[Principal, set[Holder]] = {}
        # what each counted connection last reported (sessions, links), under whose principals
        self.reported: dict[Holder, tuple[int, int]] = {}
        self._whose: dict[Holder, tuple[Principal, Principal]] = {}
        self.totals: dict[Principal, list[int]] = {}  # principal -> [sessions, links] its connections hold
        self._purses: dict[Principal, Purse] = {}
        self.refusals: dict[str, int] = dict.fromkeys(REFUSED, 0)  # (since the router started)
        self.refused_by: dict[Principal, dict[str, int]] = {}  # (insertion order: the oldest goes first)
        self._sweep_at = 64  # (``sweep``: when there are more purses than this)

    @staticmethod
    def principals(user: str, host: str) -> tuple[Principal, Principal]:
        return ("user", user or "anonymous"), ("host", host)

    def _limit(self, who: Principal, name: str) -> tuple[int, str] | None:
        policy = self.router.topology.policy
        if policy is None:
            return None
        kind, key = who
        if kind == "user":
            return policy.limit(key, user_groups(self.router.topology.auth, key), name)
        return policy.host_limit(key, name)

    # ------------------------------------------------------------ connections

    def enter(self, conn: Holder, user: str, host: str, serial: int, peer: str,
              replacing: Holder | None = None) -> str | None:
        """Count ``conn`` (opened); why it is one connection too many for its user or host,
        or None. Counted either way: the adaptor closes it, and ``leave`` uncounts it.
        ``replacing``: a connection it takes over if let in (not counted against it)."""
        whose = self.principals(user, host)
        for who in whose:
            self.held.setdefault(who, set()).add(conn)
            self.totals.setdefault(who, [0, 0])
        self._whose[conn] = whose
        self.reported[conn] = (0, 0)
        self.report(conn)
        return self.over(user, host, "max_connections", lambda who: len(self.held[who]) - (replacing in self.held[who]),
                         serial, peer)

    def leave(self, conn: Holder, user: str, host: str) -> None:
        sessions, links = self.reported.pop(conn, (0, 0))
        self._whose.pop(conn, None)
        for who in self.principals(user, host):
            held = self.held.get(who)
            if held is not None and conn in held:
                held.discard(conn)
                total = self.totals[who]
                total[0] -= sessions
                total[1] -= links
                if not held:
                    del self.held[who]
                    del self.totals[who]
                    purse = self._purses.get(who)
                    if purse is not None and purse.bytes == 0:  # (one per host address would pile up)
                        del self._purses[who]
        if len(self._purses) > self._sweep_at:
            self.sweep()

    def sweep(self) -> None:
        """Drop the byte budgets of principals gone whose records were all let go since. (A
        client that left with messages in flight left its purse behind: one per host address
        would pile up. Swept when their number doubles, and for each view: amortised O(1).)"""
        for who in [w for w, purse in self._purses.items() if purse.bytes == 0 and w not in self.held]:
            del self._purses[who]
        self._sweep_at = max(64, 2 * len(self._purses))

    def report(self, conn: Holder) -> None:
        """``conn`` may hold other sessions or links than it last said: its principals' totals
        take the difference. (Not counted yet, or gone: nothing.)"""
        old = self.reported.get(conn)
        if old is None:
            return
        now = (conn.holds("sessions"), conn.holds("links"))
        if now == old:
            return
        self.reported[conn] = now
        for who in self._whose[conn]:
            total = self.totals[who]
            total[0] += now[0] - old[0]
            total[1] += now[1] - old[1]

    def holding_now(self, who: Principal) -> tuple[int, int]:
        """The sessions and links ``who``'s connections hold, as they last reported."""
        total = self.totals.get(who)
        return (total[0], total[1]) if total is not None else (0, 0)

    # ------------------------------------------------------- sessions, links

    def over(self, user: str, host: str, name: str, count: Callable[[Principal], int], serial: int,
             peer: str, refuse: bool = True) -> str | None:
        """Whether a principal's ``count`` (of what its connections hold, the one being
        opened included) passes the limit ``name``: the refusal (logged and counted, unless
        ``refuse`` is False: the caller may yet make room), or None."""
        if self.router.topology.policy is None:
            return None
        for who in self.principals(user, host):
            limit = self._limit(who, name)
            if limit is None:
                continue
            n = count(who)
            if n > limit[0]:
                return self._refused(who, name, limit, serial, peer) if refuse else f"{limit[1]} ({limit[0]})"
        return None

    def holding(self, what: str, mine: int, me: Holder) -> Callable[[Principal], int]:
        """A ``count`` for ``over``: ``mine`` for the connection asking, plus what the
        principal's other connections hold of ``what`` (``sessions`` or ``links``)."""
        i = 0 if what == "sessions" else 1
        own = self.reported.get(me, (0, 0))[i]

        def count(who: Principal) -> int:
            total = self.totals.get(who)
            if total is None:
                return mine
            return mine + total[i] - (own if who in self._whose.get(me, ()) else 0)
        return count

    def count_refusal(self, name: str, *whom: Principal) -> None:
        """One refusal of ``name`` (in ``REFUSED``) for these principals."""
        self.refusals[name] += 1
        for who in whom:
            counts = self.refused_by.pop(who, None)  # (re-inserted: the most recent last)
            if counts is None:
                counts = {}
                while len(self.refused_by) >= REFUSALS_KEPT:
                    del self.refused_by[next(iter(self.refused_by))]
            counts[name] = counts.get(name, 0) + 1
            self.refused_by[who] = counts

    def limits(self, who: Principal) -> dict[str, tuple[int, str]]:
        """The policy's limits on ``who``: by name, the limit and the rule that set it."""
        found = ((name, self._limit(who, name)) for name in LIMITS)
        return {name: limit for name, limit in found if limit is not None}

    def principals_known(self) -> list[Principal]:
        """Every principal holding something here, or limited, or refused lately."""
        self.sweep()
        return sorted(self.held.keys() | self._purses.keys() | self.refused_by.keys())

    def purse(self, who: Principal) -> Purse | None:
        return self._purses.get(who)

    def _refused(self, who: Principal, name: str, limit: tuple[int, str], serial: int, peer: str) -> str:
        self.count_refusal(name, who)
        kind, key = who
        noun = NOUNS.get(name, name)
        why = f"{kind} {key} may hold {limit[0]} {noun} on this router ({limit[1]})"
        router = self.router
        router.guard_log.warning((f"{kind}-limit", key, name), time.monotonic(),
                                 "router %s: refused on connection %d from %s: %s", router.id, serial, peer, why,
                                 extra=fields(f"{kind}.limit", connection=serial, peer=peer, limit=name,
                                              **{kind: key}))
        return why

    # ------------------------------------------------------ size and bytes

    def max_message_size(self, user: str, host: str) -> int:
        """The router's ``max_message_size``, or the smaller one its user or host has."""
        size = self.router.settings.max_message_size
        for who in self.principals(user, host):
            limit = self._limit(who, "max_message_size")
            if limit is not None:
                size = min(size, limit[0])
        return size

    def subscriber_stall(self, user: str, host: str) -> float:
        """How long a subscriber of ``user`` from ``host`` may hold deliveries and answer none
        (``core/stalls.py``): the smallest its user's and host's policy set, else the router's."""
        found = [limit[0] for who in self.principals(user, host) if (limit := self._limit(who, "subscriber_stall"))]
        return float(min(found)) if found else self.router.settings.subscriber_stall

    def refused_size(self, user: str, host: str) -> None:
        """A message too large was refused: counted for the user and the host whose policy limit
        is below the router's ``max_message_size`` (none: the router's own limit refused it)."""
        router_max = self.router.settings.max_message_size
        limits = [(w, self._limit(w, "max_message_size")) for w in self.principals(user, host)]
        binding = [(w, lim[0]) for w, lim in limits if lim is not None and lim[0] < router_max]
        if binding:
            least = min(n for _, n in binding)
            self.count_refusal("max_message_size", *(w for w, n in binding if n == least))

    def purses(self, user: str, host: str) -> tuple[Purse, ...]:
        """The byte budgets a publisher link of ``user`` from ``host`` shares (none, without a
        ``max_in_flight_bytes`` for either)."""
        found: list[Purse] = []
        for who in self.principals(user, host):
            purse = self._purses.get(who)
            if purse is None:
                limit = self._limit(who, "max_in_flight_bytes")
                if limit is None:
                    continue
                purse = self._purses[who] = Purse(limit[0], limit[1])
            found.append(purse)
        return tuple(found)

    def arrivals_over(self, user: str, host: str, arriving: int, alone: bool) -> Purse | None:
        """The purse that ``arriving`` more bytes (messages still arriving, their size known
        only as they come) would pass, or None. A message larger than a budget that holds
        nothing still goes, ``alone`` (as credit lets it: ``core/credit.py``)."""
        for purse in self.purses_of(user, host):
            if purse.bytes + arriving > purse.limit and not (alone and purse.bytes == 0):
                return purse
        return None

    def refused_bytes(self, user: str, host: str, purse: Purse) -> None:
        """A message arriving was refused: it would have passed ``purse`` (its principal's)."""
        self.count_refusal("max_in_flight_bytes", *(w for w in self.principals(user, host) if self._purses.get(w) is purse))

    def purses_of(self, user: str, host: str) -> Iterable[Purse]:
        return (p for p in (self._purses.get(w) for w in self.principals(user, host)) if p is not None)

    def reloaded(self) -> None:
        """SIGHUP brought another policy: each purse takes its new limit (one no longer
        limited gets none to speak of: its links keep it, and it bounds nothing)."""
        for who, purse in self._purses.items():
            limit = self._limit(who, "max_in_flight_bytes")
            purse.limit, purse.where = (limit[0], limit[1]) if limit is not None else (1 << 62, "")
