"""How a router logs: levels per module and the line format, set from the command line.

``--log-level info,edge=debug``: a level for everything, and levels for modules (the
part after ``once.`` of a logger's name, ``MODULES``). ``--log-format text`` (the
default) is for people; ``json`` writes one object per line for a log shipper: time,
router, level, module, the ``event`` a call names and its fields as fields of their own
(connection, peer, container, user, link, topic, counts, ...: ``fields()``), and the
message for people last. The events are listed in ``docs/operating.md``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LEVELS = ("debug", "info", "warning", "error")
# client connections (AMQP); any connection's protocol errors; links attached, suspended and
# detached (the link lifecycle); the control plane; neighbour links; the router's life;
# refusals and limits (rate-limited); one line per authenticated connection; the http endpoint
MODULES = ("edge", "mqtt", "connections", "links", "network", "interrouter", "router", "guard", "access", "http")


class LogSpecError(ValueError):
    pass


def parse_levels(spec: str) -> dict[str, int]:
    """``"info,edge=debug"`` -> {"": INFO, "edge": DEBUG}; a one-line ``LogSpecError`` if bad."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        module, _, level = part.rpartition("=")
        if level.lower() not in LEVELS:
            raise LogSpecError(f"--log-level {spec}: {level!r} is not one of {', '.join(LEVELS)} "
                               "(e.g. info,edge=debug)")
        if module and module not in MODULES:
            raise LogSpecError(f"--log-level {spec}: no module {module!r} (there are {', '.join(MODULES)})")
        out[module] = getattr(logging, level.upper())
    return out


def fields(event: str, **values: Any) -> dict[str, Any]:
    """``extra=`` of a log call: its event's name and values, each a field of its own in
    ``--log-format json`` (the text format shows only the message)."""
    return {"event": event, "fields": values}


class _Json(logging.Formatter):
    def __init__(self, router_id: str) -> None:
        super().__init__()
        self.router_id = router_id

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                               + f".{int(record.msecs):03d}Z", "router": self.router_id,
                               "level": record.levelname.lower(), "module": record.name.removeprefix("once.")}
        event = getattr(record, "event", None)
        if event is not None:
            out["event"] = event
        for key, value in (getattr(record, "fields", None) or {}).items():
            out.setdefault(key, value)  # (never over time, router, level, module or event)
        out["message"] = record.getMessage()
        return json.dumps(out, default=str)


def configure(router_id: str, levels: str = "info", fmt: str = "text") -> None:
    parsed = parse_levels(levels)
    if fmt not in ("text", "json"):
        raise LogSpecError(f"--log-format {fmt}: expected text or json")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Json(router_id) if fmt == "json" else
                         logging.Formatter(f"%(asctime)s {router_id} %(levelname)s %(message)s"))
    root = logging.getLogger("once")
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(parsed.get("", logging.INFO))
    for module, level in parsed.items():
        if module:
            logging.getLogger(f"once.{module}").setLevel(level)
