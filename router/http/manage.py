"""Management writes over the HTTP endpoint (``docs/operating.md``, "Management writes"):
what an operator may change on a running router, each by an admin only (a user of the users
file in group ``admin``, HTTP Basic), each logged with who did it (``manage.write``).

* ``POST /api/connections/close?id=N``: a client connection closes (AMQP
  ``amqp:connection:forced``, MQTT DISCONNECT 0x98), as if the network had dropped it: its
  subscriptions and publishers are suspended for their grace, and resume where it connects
  again.
* ``POST /api/links/detach?connection=N&name=LINK``: one AMQP link of a connection closes
  (``amqp:link:detach-forced``), suspended for its grace as if its client had gone.
* ``POST /api/subscribers/drop?container=C&name=LINK``: a suspended subscriber is given up
  now, as its grace's end would (its publishers then hear what that tells them); never one
  that may be attached at a router out of reach (``docs/protocol.md`` section 7: it goes
  once the network says so).
* ``POST /api/reload``: what SIGHUP takes up (the users file, the policy, the links, the consumer
  groups, the TLS certificates).
* ``POST /api/drain``: the router takes no new client, closes every client connection (they
  resume at other routers, as when it dies) and stops once none is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..logs import fields
from .server import Reply
from .views import shown

if TYPE_CHECKING:
    from .observed import Observed as Router

log = logging.getLogger("once.router")

Query = dict[str, list[str]]
Write = Callable[[Query, str], Reply]
ADMIN_GROUP = "admin"


def is_admin(router: Router, user: str) -> bool:
    found = router.topology.auth.users.get(user)
    return found is not None and ADMIN_GROUP in found.groups


def _one(q: Query, name: str) -> str | None:
    values = q.get(name)
    return values[0] if values else None


def _done(router: Router, user: str, what: str, **values: Any) -> None:
    log.info("router %s: management: %s %s", router.id, user, what,
             extra=fields("manage.write", user=user, action=what.split(" ", 1)[0], **values))


def writes(router: Router) -> dict[str, Write]:
    def close_connection(q: Query, user: str) -> Reply:
        raw = _one(q, "id")
        if raw is None or not raw.isdigit():
            return Reply.json({"error": "give ?id=N: a connection's id (/api/connections)"}, 400)
        conn = next((c for c in router.connections if c.serial == int(raw)), None)
        if conn is None:
            return Reply.json({"error": f"no connection {raw} (/api/connections lists them)"}, 404)
        conn.closed_by_admin(f"closed by {user} through the management API")
        _done(router, user, f"closed connection {raw} ({conn.peer})", connection=int(raw), peer=conn.peer)
        return Reply.json({"closed": int(raw)})

    def detach_link(q: Query, user: str) -> Reply:
        raw, name = _one(q, "connection"), _one(q, "name")
        if raw is None or not raw.isdigit() or not name:
            return Reply.json({"error": "give ?connection=N&name=LINK: a link of a connection (/api/links)"}, 400)
        conn = next((c for c in router.connections if c.serial == int(raw)), None)
        if conn is None:
            return Reply.json({"error": f"no connection {raw} (/api/connections lists them)"}, 404)
        if not conn.detached_by_admin(name, f"detached by {user} through the management API"):
            return Reply.json({"error": f"connection {raw} has no link {name!r} (an MQTT client's subscriptions "
                                        "end with its connection: close-connection)"}, 404)
        _done(router, user, f"detached link {name!r} of connection {raw} ({conn.peer})", connection=int(raw),
              link=name, peer=conn.peer)
        return Reply.json({"detached": name, "connection": int(raw)})

    def drop_subscriber(q: Query, user: str) -> Reply:
        container, name = _one(q, "container"), _one(q, "name")
        if not container or not name:
            return Reply.json({"error": "give ?container=C&name=LINK: a suspended subscriber (/api/subscribers)"}, 400)
        # (by its container id, or as the endpoint shows an anonymous one: its digest)
        subs = [s for by_key in router.core.tables.topics.values() for s in by_key.values()
                if s.link_name == name and container in (s.container_id, shown(router, s.container_id, s.owner))]
        if not subs:
            return Reply.json({"error": f"no subscriber {container}/{name} here"}, 404)
        if any(s.suspended_until is None for s in subs):
            return Reply.json({"error": f"{container}/{name} is attached: close its connection first (it is "
                                        "then suspended), or let its client detach"}, 409)
        now = router.core.clock()
        for s in subs:
            s.suspended_until = min(s.suspended_until or now, now)
        gone = router.expire_subscribers(now)
        dropped = any(s in gone for s in subs)
        _done(router, user, f"dropped suspended subscriber {container}/{name}" if dropped else
              f"asked to drop suspended subscriber {container}/{name} (it goes once no router out of reach may "
              "hold it attached)", container=container, link=name, dropped=dropped)
        return Reply.json({"dropped": dropped, "waiting": not dropped})

    def drain(q: Query, user: str) -> Reply:
        closed = router.drain(user)
        _done(router, user, f"drains the router: {closed} client connection(s) closed, no new ones taken; it stops "
              "once none is left", closed=closed)
        return Reply.json({"draining": True, "closed": closed})

    def reload(q: Query, user: str) -> Reply:
        _done(router, user, "reloaded the users file, policy, consumer groups, certificates and links")
        router.reload()
        return Reply.json({"reloaded": True})

    return {"/api/connections/close": close_connection, "/api/links/detach": detach_link,
            "/api/subscribers/drop": drop_subscriber,
            "/api/reload": reload, "/api/drain": drain}
