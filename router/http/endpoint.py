"""The routes of a router's HTTP endpoint, bound to that router."""

from __future__ import annotations

import time
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from . import views
from .metrics import CONTENT_TYPE, Metrics
from .server import Handler, Reply, Stream

if TYPE_CHECKING:
    from .observed import Observed as Router

Query = dict[str, list[str]]


def console_page() -> bytes:
    return files("once.router.http").joinpath("console.html").read_bytes()


def routes(router: Router) -> dict[str, Handler]:
    metrics = Metrics(router)
    page = console_page()

    def healthz(q: Query) -> Reply:
        return Reply.json({"router": router.id, "alive": True})  # answered at all: the loop turns

    def readyz(q: Query) -> Reply:
        state = views.ready(router)
        return Reply.json({"router": router.id, **state}, 200 if state["ready"] else 503)

    def api(view: Any) -> Handler:
        return lambda q: Reply.json(view(router))

    def summary() -> dict[str, Any]:
        """One console frame: the network, the topics, the subscribers, the counters, and
        what each user and host holds."""
        return {"at": time.time(), "general": views.general(router), "network": views.network(router),
                "topics": views.topics(router), "subscribers": views.subscribers(router),
                "policy": views.policy(router)}

    return {
        "/metrics": lambda q: Reply(200, metrics.render(), CONTENT_TYPE),
        "/healthz": healthz,
        "/readyz": readyz,
        "/api": lambda q: Reply.json({"paths": ["/api/router", "/api/connections", "/api/links", "/api/topics",
                                                "/api/network", "/api/subscribers", "/api/memory", "/api/policy",
                                                "/api/events"]}),
        "/api/router": api(views.general),
        "/api/connections": api(views.connections),
        "/api/links": api(views.links),
        "/api/topics": api(views.topics),
        "/api/network": api(views.network),
        "/api/subscribers": api(views.subscribers),
        "/api/memory": api(views.memory),
        "/api/policy": api(views.policy),
        "/api/summary": lambda q: Reply.json(summary()),
        "/api/events": lambda q: Stream(summary, _every(q)),
        "/": lambda q: Reply(200, page, "text/html; charset=utf-8"),
    }


def _every(q: Query) -> float:
    """``/api/events?every=SECONDS``: from 0.2 to 60 (1 by default, or when it is not a number)."""
    try:
        return max(0.2, min(60.0, float(q.get("every", ["1"])[0])))
    except ValueError:
        return 1.0
