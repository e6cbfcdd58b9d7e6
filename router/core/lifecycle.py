"""The link lifecycle, protocol-neutral: what happens to a publisher's or a subscriber's
link between its attach and its end, the same for every adaptor.

Every client adaptor calls this service (the AMQP one in ``adaptors/amqp/edge.py``, the
MQTT one in ``adaptors/mqtt/edge.py``) and so does the in-process network's test adaptor
(``sim/``): there is one lifecycle, and the simulator runs the code the router runs. An adaptor reads its
protocol's attach into the arguments below, answers the attach when the service says
so, and tells the service when a link goes (closed, or interrupted).

The rules (``docs/failover.md`` says them for users):

* **Attach.** A publisher's attach is answered at once: fresh (a new incarnation) or
  resuming (its incarnation carried back, its unsettled map answered with what we know).
  Credit follows only after the answer (``publisher_answered``).
* **Effective.** A subscriber's attach is answered only when every reachable router has
  acknowledged the subscription and handed over what it held for it (the network's
  completion): any message published after the answer reaches it. Its resume map is
  taken first, so what it already accepted is never sent again.
* **Stolen.** The same subscriber key attaching again takes the subscription over; the
  older link is told (``SubscriberPort.stolen``) and ends.
* **Suspend or end.** A link that goes without closing is suspended for its grace (a
  subscriber: the larger of its terminus timeout and ``subscriber_grace``; a publisher:
  ``publisher_grace``); a closed one ends. A group member that cannot resume has its
  deliveries passed on at once instead; the last member of a durable group stands in
  for the group until a member attaches again.
* **Credit.** A subscriber's new credit pumps its queue; a publisher's lowered credit
  (drain) returns to the window.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from once.linkstate.messages import Subscription
from once.records.membership import GroupId

from ..logs import fields
from .effects import Notice
from .facade import Core
from .peers import Publisher, Subscriber
from .ports import Outcome, PublisherPort, SubscriberPort

log = logging.getLogger("once.links")

# The attach answer for a subscriber: (our unsettled map or None, active in an exclusive group or None)
Answer = Callable[[dict[bytes, Outcome] | None, bool | None], None]


class SubscriptionsPort(Protocol):
    """The control plane as the lifecycle needs it (``router/network.py`` provides it)."""

    def subscribe(self, sub: Subscription, attached: bool, on_complete: Callable[[], None] | None = None) -> None: ...
    def follow_moved_subscribers(self) -> None: ...
    def key_owners(self, key: tuple[str, str]) -> set[str]: ...
    def newest_attach(self, key: tuple[str, str]) -> int: ...  # the largest ``since`` known for the key
    # ours is suspended until then (wall clock, microseconds; inf: a durable group's stand-in)
    def suspended(self, key: tuple[str, str], until_us: float) -> None: ...
    def finished(self, sub: Subscription) -> None: ...  # ours closed: over, and remembered as ended here


@dataclass(frozen=True, slots=True)
class SubscriberAttach:
    """A subscriber's attach as its adaptor read it."""

    topic: str
    container_id: str
    link_name: str
    presettled: bool = False  # it asked for at-most-once
    group: GroupId | None = None  # it joins this consumer group
    exclusive: bool = False  # an exclusive group: one active member, standbys
    resumable: bool = False  # it can resume (says so): a member's deliveries wait for it
    owner: str = ""  # the authenticated user ("" when authentication is off)
    unsettled: dict[bytes, Any] | None = None  # a resuming link's map: gid -> Outcome


class LinkLifecycle:
    """One router's link lifecycle over its core and control plane."""

    __slots__ = ("core", "network", "settings", "router_id")

    def __init__(self, core: Core, network: SubscriptionsPort) -> None:
        self.core = core
        self.network = network
        self.settings = core.settings
        self.router_id = core.router_id

    # ------------------------------------------------------------ publishers

    def attach_publisher(self, port: PublisherPort, topic: str, container_id: str, link_name: str,
                         settle_second: bool, incarnation: int | None, unsettled: dict[bytes, Any] | None,
                         group: object = None, credited: bool = True) -> tuple[Publisher, dict[bytes, Any] | None]:
        """A publisher attaches; returns it and our unsettled map for the answer (None for a
        fresh link). ``incarnation``: the one it carried back (it resumes), else None;
        ``group``: its connection (the credit one connection holds is capped)."""
        resuming = unsettled is not None or incarnation is not None
        core = self.core
        pub = core.add_publisher(port, topic, container_id, link_name, settle_second,
                                 incarnation if resuming else None, grant=False, group=group, credited=credited)
        ours = core.publisher_resume_map(pub, unsettled or {}) if resuming else None
        if resuming:
            core.tables.stats["resumed_publishers"] += 1
        # (a line an operator sees for an AMQP publisher's link, as for a subscriber's; an MQTT
        # client's publisher per topic, made at its first message there, stays at debug)
        log.log(logging.INFO if credited else logging.DEBUG, "router %s: %s/%s publishes to %r%s", self.router_id,
                container_id, link_name, topic, ", resuming" if unsettled is not None else "",
                extra=fields("publisher.attached", container=container_id, link=link_name, topic=topic,
                             resuming=unsettled is not None))
        return pub, ours

    def publisher_answered(self, pub: Publisher) -> None:
        """Its attach was answered: now it may get credit (in the pass as the batch ends:
        one pass for every publisher that attached in it, not one each)."""
        self.core.credit.want_pass()

    def publisher_gone(self, pub: Publisher, suspend: bool) -> None:
        """Its link went: closed (it ends) or interrupted (suspended: it may resume anywhere)."""
        core = self.core
        if suspend:
            grace = self.settings.publisher_grace
            core.suspend_publisher(pub, core.clock() + grace)
            log.info("router %s: publisher %s/%s suspended: %d unanswered deliveries wait %gs for it to resume",
                     self.router_id, pub.container_id, pub.link_name, len(pub.live), grace,
                     extra=fields("publisher.suspended", container=pub.container_id, link=pub.link_name, topic=pub.topic,
                                  unanswered=len(pub.live), grace=grace))
        else:
            core.remove_publisher(pub)
            log.log(logging.INFO if pub.credited else logging.DEBUG, "router %s: publisher %s/%s detached",
                    self.router_id, pub.container_id, pub.link_name,
                    extra=fields("publisher.detached", container=pub.container_id, link=pub.link_name, topic=pub.topic))

    # ----------------------------------------------------------- subscribers

    def owned_by_other(self, key: tuple[str, str], owner: str) -> bool:
        """Whether subscriber ``key`` belongs to another user than ``owner`` (here or anywhere)."""
        holders = self.network.key_owners(key)
        here = self.core.key_owner(key)
        if here is not None:
            holders.add(here)
        holders.discard("")
        return bool(holders - {owner})

    def attach_subscriber(self, port: SubscriberPort, a: SubscriberAttach, answer: Answer) -> Subscriber:
        """A subscriber attaches. ``answer`` is called once the attach is effective (every
        reachable router has it); its first delivery goes out right after."""
        core = self.core
        # The attach stamp orders a key's attaches network-wide (the newest is where it
        # lives: ``SubscriberTable.home``). It is our wall clock, but past every stamp we
        # know for the key (a hybrid logical clock), so a router whose clock is behind
        # still makes a newer attach newer than the one it replaces.
        since = max(core.wall(), self.network.newest_attach((a.container_id, a.link_name)) + 1)
        sub, displaced = core.add_subscriber(port, a.topic, a.container_id, a.link_name, a.presettled, a.group,
                                             since, a.resumable, a.exclusive)
        sub.owner = a.owner
        if displaced is not None:
            core.effects.notice(displaced.port, Notice.STOLEN)
        ours = None
        if a.unsettled is not None:  # resuming: what it accepted is never sent again
            ours = core.resume_subscriber(sub, a.unsettled, core.clock() + self.settings.publisher_grace)
            core.tables.stats["resumed_subscribers"] += 1

        def effective() -> None:
            answer(ours, core.is_active(sub))
            if sub.untold and sub.attached and sub.suspended_until is None:
                # (a router gave it up as a gap while it was suspended here: told now)
                self.tell_gap(sub, sub.untold)
                return
            core.attach_completed(sub)
            log.info("router %s: %s/%s subscribed to %r%s%s", self.router_id, a.container_id, a.link_name, a.topic,
                     f" as a member of consumer group {sub.group}" + (" (exclusive)" if sub.exclusive else "")
                     if sub.group is not None else "", ", resuming" if a.unsettled is not None else "",
                     extra=fields("subscriber.attached", container=a.container_id, link=a.link_name, topic=a.topic,
                                  group=sub.group.name if sub.group is not None else None, exclusive=sub.exclusive,
                                  resumed=a.unsettled is not None, user=a.owner))

        self.network.subscribe(self._subscription(sub, since), True, effective)
        return sub

    def tell_gap(self, sub: Subscriber, frm: str) -> None:
        """Router ``frm`` gave ``sub``'s key up as a gap (``docs/protocol.md`` section 7):
        its link ends, saying so, and the subscription waits suspended for the client to
        attach again (the network hears it is suspended, as when a link drops)."""
        core = self.core
        core.tell_gap(sub, frm)
        self.network.suspended(sub.key, core.wall() + self.settings.subscriber_grace * 1e6)
        log.warning("router %s: subscription %s/%s on %r told of a gap: router %s gave it up while out of reach "
                    "(messages were accepted without it)", self.router_id, sub.container_id, sub.link_name,
                    sub.topic, frm, extra=fields("subscriber.gap_told", container=sub.container_id,
                                                 link=sub.link_name, topic=sub.topic, router=frm))

    def subscriber_gone(self, sub: Subscriber, suspend: bool, durable: bool = False, timeout: float = 0.0) -> None:
        """Its link went. ``suspend``: without closing (it may resume); ``durable``: its
        source outlives a clean close (``expiry-policy never``); ``timeout``: its terminus
        timeout, in seconds."""
        core = self.core
        if sub.group is not None:
            if suspend and durable and core.last_member(sub):
                log.info("router %s: consumer group %s has no member left: %s/%s stands in, its messages wait",
                         self.router_id, sub.group, sub.container_id, sub.link_name)
                # A durable group outlives its members: the last one to go stays as its
                # stand-in, and what comes for the group waits with it (bounded by the
                # window) until a member attaches again, or one unsubscribes.
                core.stand_in(sub)
                self.network.suspended(sub.key, math.inf)
                return
            if not sub.resumable:
                # A member that cannot resume (a standard client never sends an unsettled
                # map) would only get its deliveries back as repeats: the group's other
                # members get them now instead of after the grace.
                suspend = durable = False
        if suspend or durable:
            grace = max(timeout, self.settings.subscriber_grace)
            core.suspend_subscriber(sub, core.clock() + grace)
            self.network.suspended(sub.key, core.wall() + grace * 1e6)  # (kept across a restart of ours)
            log.info("router %s: subscriber %s/%s suspended: what it has not accepted waits %gs for it to resume",
                     self.router_id, sub.container_id, sub.link_name, grace,
                     extra=fields("subscriber.suspended", container=sub.container_id, link=sub.link_name,
                                  topic=sub.topic, grace=grace))
            # Its key may have attached elsewhere already (the client was quicker to come
            # back than we were to see it go): hand over now, not at the next change.
            self.network.follow_moved_subscribers()
        else:
            core.remove_subscriber(sub)
            self.network.finished(self._subscription(sub))
            log.info("router %s: subscriber %s/%s unsubscribed from %r", self.router_id, sub.container_id,
                     sub.link_name, sub.topic, extra=fields("subscriber.detached", container=sub.container_id,
                                                             link=sub.link_name, topic=sub.topic))

    # ---------------------------------------------------------------- credit

    def subscriber_credit(self, sub: Subscriber) -> None:
        """It gave credit: send what waits for it."""
        self.core.pump(sub)

    def publisher_credit(self, pub: Publisher, credit: int) -> None:
        """Its credit as the link now stands (a drain took what it did not use)."""
        self.core.publisher_credit_changed(pub, credit)

    def _subscription(self, sub: Subscriber, since: int = 0) -> Subscription:
        group = sub.group
        return Subscription(self.router_id, sub.topic, sub.container_id, sub.link_name, since=since, owner=sub.owner,
                            group=group.name if group else "", scope=group.scope if group else "",
                            exclusive=sub.exclusive)
