"""``once stat`` and ``once manage`` over AMQP (``--router amqp://USER:PASSWORD@HOST:PORT``
or ``amqps://...``): requests to the router's ``$management`` node
(``router/adaptors/amqp/management.py``) on its client port, authenticated as any client
is (SASL, TLS), as ``qdstat`` and ``qdmanage`` do; no HTTP port needed.

Proton's blocking request-response client carries them (a link to ``$management``,
responses on a link with a dynamic source).
"""

from __future__ import annotations

from typing import Any

from proton import ConnectionException, Message, Timeout
from proton.utils import BlockingConnection, LinkDetached, SyncRequestResponse

from .clients import ClientTls, connect, shown
from .exits import CommandError, Exit

# An HTTP view's path -> its entity type, and whether it is many rows (``QUERY``) or one map (``READ``)
ENTITIES = {"/api/router": ("once.router", False), "/api/connections": ("once.connection", True),
            "/api/links": ("once.link", True), "/api/topics": ("once.topic", True),
            "/api/network": ("once.network", False), "/api/subscribers": ("once.subscribers", False),
            "/api/memory": ("once.memory", False), "/api/policy": ("once.policy", False)}
# ``once manage`` ACTION -> (operation, entity type)
WRITES = {"close-connection": ("DELETE", "once.connection"), "detach-link": ("DELETE", "once.link"),
          "drop-subscriber": ("DELETE", "once.subscribers"), "reload": ("RELOAD", "once.router"),
          "drain": ("DRAIN", "once.router")}


class ManagementClient:
    """One connection to a router's ``$management``: ``view`` reads, ``write`` changes."""

    def __init__(self, url: str, timeout: float, tls: ClientTls | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.conn: BlockingConnection = connect(url, timeout, tls=tls)
        try:
            self.client = SyncRequestResponse(self.conn, "$management")
        except (LinkDetached, ConnectionException) as e:
            self.conn.close()
            raise CommandError(Exit.FAILED, f"{shown(url)} has no management node: {e}") from None

    def close(self) -> None:
        self.conn.close()

    def call(self, properties: dict[str, Any], body: Any = None) -> Any:
        """The response's body, or a one-line ``CommandError`` with its status."""
        try:
            response = self.client.call(Message(properties=properties, body=body))
        except Timeout:
            raise CommandError(Exit.TIMEOUT, f"{shown(self.url)} did not answer within {self.timeout:g} s") from None
        except (LinkDetached, ConnectionException) as e:
            raise CommandError(Exit.UNREACHABLE, f"{shown(self.url)} went away: {e}") from None
        props = response.properties or {}
        status = int(props.get("statusCode", 0))
        if status in (200, 201, 204):
            return response.body
        said = props.get("statusDescription") or f"status {status}"
        code = Exit.REFUSED if status in (401, 403) else Exit.USAGE if status in (400, 404, 409, 501) else Exit.FAILED
        raise CommandError(code, f"{shown(self.url)} $management {properties.get('operation')}: {said}")

    def view(self, path: str) -> Any:
        """What the HTTP endpoint's ``path`` shows, as it shows it (rows as maps)."""
        kind, many = ENTITIES[path]
        if not many:
            return self.call({"operation": "READ", "type": kind})
        found = self.call({"operation": "QUERY", "entityType": kind}, {"attributeNames": []})
        names = [str(n) for n in found["attributeNames"]]
        return [dict(zip(names, row, strict=True)) for row in found["results"]]

    def write(self, action: str, args: list[str]) -> Any:
        op, kind = WRITES[action]
        props: dict[str, Any] = {"operation": op, "type": kind}
        if action == "close-connection":
            props["identity"] = args[0]
        elif action == "detach-link":
            props["identity"] = f"{args[0]}/{args[1]}"
        elif action == "drop-subscriber":
            props["container"], props["name"] = args
        return self.call(props)
