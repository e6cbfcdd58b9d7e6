"""The AMQP management node, ``$management`` (AMQP Management 1.0, working draft 16): what
the HTTP endpoint shows and changes, for any AMQP client, over the client port and its
SASL and TLS, so that an operator needs no HTTP port (``once stat --router amqp://...``,
qdmanage-style scripts).

A request is a message to ``$management`` with ``reply-to`` naming a link the client
attached with a dynamic source (``management_links.py``); its application properties say
``operation``, ``type`` and, for one entity, ``identity`` (or ``name``); a ``QUERY`` names
``entityType`` and may carry ``{"attributeNames": [...]}`` as its body. The response has
``statusCode`` and ``statusDescription`` and the request's ``message-id`` as its
``correlation-id``. The entities are the HTTP endpoint's views (``http/views.py``), read
the same way, and the writes are its writes (``http/manage.py``): an admin's only (a user of
the users file in group ``admin``, as the connection authenticated), logged with who.

This module holds no link: it turns a request's bytes into a response's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...amqp.codec import decode, dumps
from ...amqp.errors import DecodeError
from ...amqp.types import Described, ulong
from ...http import views
from ...http.manage import is_admin, writes
from .message import sections

if TYPE_CHECKING:
    from ...http.observed import Observed as Router

log = logging.getLogger("once.router")

ADDRESS = "$management"
PROPERTIES, APPLICATION_PROPERTIES, AMQP_VALUE = 0x73, 0x74, 0x77
_MESSAGE_ID, _REPLY_TO, _CORRELATION_ID = 0, 4, 5
MANAGEMENT = "org.amqp.management"
READS = ("READ", "QUERY")
NOT_HERE = ("CREATE", "UPDATE")  # (a router's configuration is its topology file: ``once reload``)


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity type: its view (a list of rows for ``many``, else one map), the HTTP
    write a ``DELETE`` is (with the query it takes from the request), and its own
    operations (each an HTTP write)."""

    view: Callable[[Router], Any]
    many: bool = False
    delete: str | None = None
    operations: tuple[tuple[str, str], ...] = ()


TYPES: dict[str, Entity] = {
    "once.router": Entity(views.general, operations=(("RELOAD", "/api/reload"), ("DRAIN", "/api/drain"))),
    "once.connection": Entity(views.connections, many=True, delete="/api/connections/close"),
    "once.link": Entity(views.links, many=True, delete="/api/links/detach"),
    "once.topic": Entity(views.topics, many=True),
    "once.network": Entity(views.network),
    "once.subscribers": Entity(views.subscribers, delete="/api/subscribers/drop"),
    "once.memory": Entity(views.memory),
    "once.policy": Entity(views.policy),
}


@dataclass(frozen=True, slots=True)
class Response:
    """Where it goes (the request's ``reply-to``; None: the request had none) and its bytes."""

    to: str | None
    payload: bytes


class ManagementNode:
    """``$management`` for one router: ``answer`` turns a request into its response."""

    def __init__(self, router: Router, refused: Callable[[str, str, str], None]) -> None:
        self.router = router
        self.refused = refused  # (user, what, host): logged as the HTTP endpoint's refusals are
        self.writes = writes(router)

    def answer(self, request: bytes, user: str, host: str, anonymous: bool = False) -> Response:
        """``anonymous``: the asker did not authenticate where the router has users: it may
        read nothing (what the views show of other clients is theirs), as HTTP with
        ``auth.http`` asks every reader who it is."""
        try:
            props, app, body = _read(request)
        except (DecodeError, ValueError) as e:
            return Response(None, _response(None, 400, f"not a management request: {e}", None))
        reply_to = props[_REPLY_TO] if len(props) > _REPLY_TO and isinstance(props[_REPLY_TO], str) else None
        correlation = props[_MESSAGE_ID] if props else None
        if correlation is None and len(props) > _CORRELATION_ID:
            correlation = props[_CORRELATION_ID]
        try:
            if anonymous:
                status, text, value = 401, ("this router authenticates its clients: $management answers a user of "
                                            "its users file (SASL), not an anonymous one"), None
            else:
                status, text, value = self._operation(app, body, user, host)
        except Exception as e:  # noqa: BLE001 - a view's bug must not take the router down: say it, keep serving
            log.exception("router %s: $management %r failed", self.router.id, app.get("operation"))
            status, text, value = 500, f"{type(e).__name__}: {e}", None
        return Response(reply_to, _response(correlation, status, text, value, reply_to))

    def _operation(self, app: dict[str, Any], body: Any, user: str, host: str) -> tuple[int, str, Any]:
        op = str(app.get("operation") or "").upper()
        kind = str(app.get("entityType") or app.get("type") or "") if op == "QUERY" else str(app.get("type") or "")
        if op == "GET-TYPES":
            return 200, "OK", {t: [MANAGEMENT] for t in TYPES}
        if op == "GET-OPERATIONS":
            return 200, "OK", {t: self._operations_of(e) for t, e in TYPES.items()}
        if op == "GET-ATTRIBUTES":
            return 200, "OK", {t: list(_attribute_names(self._rows(e), None)) for t, e in TYPES.items()}
        if op == "GET-MGMT-NODES":
            return 200, "OK", []  # (no other management node)
        if not op:
            return 400, "a management request names its operation (application property 'operation')", None
        entity = TYPES.get(kind)
        if entity is None:
            return 404, (f"no entity type {kind!r}: one of {', '.join(TYPES)}" if kind else
                         f"{op} needs a type (application property '{'entityType' if op == 'QUERY' else 'type'}')"), None
        if op == "QUERY":
            names = body.get("attributeNames") if isinstance(body, dict) else None
            rows = self._rows(entity)
            attributes = _attribute_names(rows, names if isinstance(names, list) and names else None)
            return 200, "OK", {"attributeNames": attributes, "results": [[row.get(a) for a in attributes]
                                                                         for row in rows]}
        if op == "READ":
            return self._read_one(entity, kind, app)
        if op in NOT_HERE:
            return 501, (f"{op} is not supported: a router's configuration is its topology file (edit it, then "
                         "once reload or the RELOAD operation of once.router)"), None
        path = entity.delete if op == "DELETE" else dict(entity.operations).get(op)
        if path is None:
            return 501, f"{kind} has no operation {op}: it has {', '.join(self._operations_of(entity))}", None
        return self._write(path, _query(op, path, app, body), user, host, f"{op} of {kind}")

    def _operations_of(self, entity: Entity) -> list[str]:
        return list(READS) + (["DELETE"] if entity.delete else []) + [name for name, _ in entity.operations]

    def _rows(self, entity: Entity) -> list[dict[str, Any]]:
        value = entity.view(self.router)
        return value if entity.many else [value]

    def _read_one(self, entity: Entity, kind: str, app: dict[str, Any]) -> tuple[int, str, Any]:
        if not entity.many:
            return 200, "OK", entity.view(self.router)
        wanted = app.get("identity") or app.get("name")
        if wanted is None:
            return 400, f"READ of {kind} names one by its identity (a QUERY lists them all)", None
        key = "id" if kind == "once.connection" else None
        for row in entity.view(self.router):
            if str(row.get(key) if key else _identity(row)) == str(wanted):
                return 200, "OK", row
        return 404, f"no {kind} {wanted!r}", None

    def _write(self, path: str, query: dict[str, list[str]] | str, user: str, host: str,
               what: str) -> tuple[int, str, Any]:
        if isinstance(query, str):
            return 400, query, None
        if not is_admin(self.router, user):
            self.refused(user, f"{what} ($management)", host)
            return 403, f"{user} may not change the router: management writes are for users in group admin", None
        reply = self.writes[path](query, user)
        value = json.loads(reply.body) if reply.body else None
        if reply.status >= 400:
            return reply.status, str(value.get("error", "refused")) if isinstance(value, dict) else "refused", None
        return (204, "No Content", None) if path.endswith(("/close", "/detach")) else (200, "OK", value)


def _identity(row: dict[str, Any]) -> str:
    """A link's identity: ``CONNECTION/NAME`` (the write's ``?connection=N&name=LINK``)."""
    return f"{row.get('connection')}/{row.get('name')}"


def _query(op: str, path: str, app: dict[str, Any], body: Any) -> dict[str, list[str]] | str:
    """The HTTP write's query from a request: its application properties and body map, and
    the identity split as each write names its entity; or what is missing, said."""
    given = {str(k): [str(v)] for k, v in (body.items() if isinstance(body, dict) else ()) if v is not None}
    given.update({str(k): [str(v)] for k, v in app.items() if v is not None})
    identity = str(app.get("identity") or app.get("name") or "")
    if path == "/api/connections/close":
        if not identity:
            return "DELETE of once.connection names its identity: the connection's id (a QUERY lists them)"
        given["id"] = [identity]
    elif path == "/api/links/detach":
        connection, _, name = identity.partition("/")
        if not (connection and name):
            return "DELETE of once.link names its identity: CONNECTION/LINK (a QUERY lists them)"
        given["connection"], given["name"] = [connection], [name]
    elif path == "/api/subscribers/drop" and "container" not in given:
        container, _, name = identity.rpartition("/")
        if not (container and name):
            return ("DELETE of once.subscribers names a suspended subscriber: application properties container "
                    "and name, or identity CONTAINER/LINK")
        given["container"], given["name"] = [container], [name]
    return given


def _attribute_names(rows: list[dict[str, Any]], wanted: list[Any] | None) -> list[str]:
    if wanted is not None:
        return [str(a) for a in wanted]
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return list(names)


def _read(payload: bytes) -> tuple[list[Any], dict[str, Any], Any]:
    props: list[Any] = []
    app: dict[str, Any] = {}
    body: Any = None
    for code, start, end in sections(payload):
        if code not in (PROPERTIES, APPLICATION_PROPERTIES, AMQP_VALUE):
            continue
        value, _ = decode(payload[start:end])
        inner = value.value if isinstance(value, Described) else value
        if code == PROPERTIES and isinstance(inner, list):
            props = inner
        elif code == APPLICATION_PROPERTIES and isinstance(inner, dict):
            app = {str(k): v for k, v in inner.items()}
        elif code == AMQP_VALUE:
            body = inner
    return props, app, body


def _response(correlation: Any, status: int, text: str, value: Any, to: str | None = None) -> bytes:
    fields: list[Any] = [None] * (_CORRELATION_ID + 1)
    fields[2], fields[_CORRELATION_ID] = to, correlation
    out = dumps(Described(ulong(PROPERTIES), fields))
    out += dumps(Described(ulong(APPLICATION_PROPERTIES), {"statusCode": status, "statusDescription": text}))
    return out + dumps(Described(ulong(AMQP_VALUE), _amqp(value)))


def _amqp(value: Any) -> Any:
    """A view's JSON-ready value as AMQP: maps keep string keys; a tuple is a list."""
    if isinstance(value, dict):
        return {str(k): _amqp(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_amqp(v) for v in value]
    return value


__all__ = ["ADDRESS", "ManagementNode", "Response", "TYPES"]
