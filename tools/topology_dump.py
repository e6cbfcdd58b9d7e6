"""``once topology dump [--router URL] [-o FILE]``: the running network written back as a
topology file, as one router sees it: every router that advertised where it listens (a
router that joined at runtime included, ``once router --join``) and the links of the
link-state graph with their costs. ``auth``, ``settings`` and ``tls`` travel in no
advertisement: the file says so, and they are copied from the network's own file."""

from __future__ import annotations

import sys
import time
from typing import Any

import yaml

from .exits import CommandError, Exit
from .stat_view import read_views

KINDS = ("listen", "inter_router", "http", "mqtt", "amqps", "mqtts")


def topology_of(network: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The topology document for ``/api/network``'s answer, and the routers left out (none
    of their advertisements said where they listen)."""
    routers: dict[str, dict[str, Any]] = {}
    left_out = []
    for r in network["routers"]:
        if r.get("left"):
            continue  # (it stopped cleanly: no longer part of the network)
        at = r.get("addresses") or {}
        if "listen" not in at:
            left_out.append(r["router"])
            continue
        routers[r["router"]] = {kind: at[kind] for kind in KINDS if kind in at}
    links = []
    for e in network["edges"]:
        a, b = e["a"], e["b"]
        if not (e["up"] and a in routers and b in routers):
            continue
        if "inter_router" in routers[a] and "inter_router" in routers[b]:
            links.append({"between": [a, b], "cost": e["cost"] or 1})
            continue
        # A router that listens for no router dialled out to join: its link is a join
        # (``routers.ID.join``) to the other end's inter_router address.
        joiner, other = (a, b) if "inter_router" not in routers[a] else (b, a)
        if "inter_router" in routers[other]:
            joins = routers[joiner].setdefault("join", [])  # type: ignore[arg-type]
            joins.append(routers[other]["inter_router"])  # type: ignore[attr-defined]
    return {"routers": routers, "links": links}, left_out


def dump(router: str, out: str | None, timeout: float, tls: Any = None) -> int:
    where, answers = read_views(router, ["/api/network"], timeout, tls)
    network = answers["/api/network"]
    doc, left_out = topology_of(network)
    if not doc["routers"]:
        raise CommandError(Exit.FAILED, f"{where}: no router advertised where it listens (routers before this "
                                        "version do not)")
    head = [f"# The running network as router {network['router']} saw it ({where}, "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}): {len(doc['routers'])} routers, {len(doc['links'])} links up.",
            "# auth (router_secret or tls), settings and groups are in no advertisement: copy them from the",
            "# network's own file."]
    if left_out:
        head.append(f"# Left out (no advertisement of theirs said where they listen): {', '.join(left_out)}.")
    text = "\n".join(head) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    if out is None or out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
        print(f"wrote {out}: {len(doc['routers'])} routers, {len(doc['links'])} links", file=sys.stderr)
    return Exit.OK
