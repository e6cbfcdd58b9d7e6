"""``once stat``: a router's state from its HTTP endpoint, as tables for people or JSON.

Like Qpid Dispatch's ``qdstat``: ``-g`` general, ``-c`` connections, ``-l`` links, ``-a``
topics (addresses), ``-n`` the network, ``-s`` subscribers and groups, ``-m`` memory and
window, ``-p`` what each user and host holds against the policy and what it refused. It reads the router's management API (``/api/...``, ``docs/operating.md``).
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .exits import CommandError, Exit

DEFAULT_ROUTER = "http://127.0.0.1:8672"  # router A's endpoint in the shipped topologies

# option -> (API path, title)
VIEWS = {"g": ("/api/router", "general"), "c": ("/api/connections", "connections"), "l": ("/api/links", "links"),
         "a": ("/api/topics", "topics"), "n": ("/api/network", "network"), "s": ("/api/subscribers", "subscribers"),
         "m": ("/api/memory", "memory"), "p": ("/api/policy", "policy")}


def request_for(base: str, path: str, query: str = "", data: bytes | None = None) -> urllib.request.Request:
    """A request to the endpoint at ``base``: credentials in it, http://USER:PASSWORD@HOST:PORT,
    go as HTTP Basic (``auth.http``, and an admin's for a management write)."""
    parts = urlsplit(base)
    netloc = parts.netloc.rpartition("@")[2]
    url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + path, query, ""))
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if parts.username is not None:
        creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(creds).decode())
    return request


def fetch(base: str, path: str, timeout: float) -> Any:
    """The API's answer, or a one-line ``CommandError``."""
    parts = urlsplit(base)
    netloc = parts.netloc.rpartition("@")[2]
    request = request_for(base, path)
    url = request.full_url
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise CommandError(Exit.FAILED, f"{url}: the router's HTTP endpoint needs a user of its users file "
                                            "(auth.http): --router http://USER:PASSWORD@HOST:PORT") from None
        raise CommandError(Exit.FAILED, f"{url}: HTTP {e.code}: {e.read()[:200].decode(errors='replace')}") from None
    except TimeoutError:
        raise CommandError(Exit.TIMEOUT, f"{url} did not answer within {timeout:g} s") from None
    except urllib.error.URLError as e:
        reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
        raise CommandError(Exit.UNREACHABLE, f"cannot reach {parts.scheme}://{netloc}: {reason} (is the router's "
                                             "http endpoint on? "
                                             "topology key routers.ID.http, or once router --http)") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CommandError(Exit.FAILED, f"{url}: not the once management API (no JSON came back)") from None


def check_base(router: str) -> str:
    parts = urlsplit(router if "://" in router else f"http://{router}")
    if parts.scheme != "http" or not parts.hostname:
        raise CommandError(Exit.USAGE, f"--router {router}: expected the router's http endpoint, such as "
                                       f"{DEFAULT_ROUTER} (https is not served yet), or its AMQP port, "
                                       "amqp://USER:PASSWORD@HOST:PORT or amqps://...")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise CommandError(Exit.USAGE, f"--router {router}: the port is not a number from 0 to 65535") from None
    return f"http://{parts.netloc}"


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """Columns aligned, numbers to the right; an empty table says so."""
    if not rows:
        return "  (none)"
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool) or row[i] is None for row in rows)
               for i in range(len(header))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".")
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v)) or "-"
    return str(v)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _pairs(d: dict[str, Any], keys: Sequence[tuple[str, str]]) -> str:
    return table([(label, _cell(d.get(k))) for k, label in keys], ("attribute", "value"))


def general(d: dict[str, Any]) -> str:
    rows = _pairs(d, [("router", "router"), ("version", "version"), ("protocol", "acceptance protocol"),
                      ("uptime_s", "uptime (s)"), ("ready", "ready"), ("synced", "synced"),
                      ("neighbours_up", "neighbours up"), ("neighbours_down", "neighbours down"),
                      ("connections", "connections"), ("publishers", "publishers"),
                      ("publishers_suspended", "publishers suspended"), ("subscribers", "subscribers"),
                      ("subscribers_suspended", "subscribers suspended"), ("topics", "topics"),
                      ("records", "records in flight"), ("records_own", "of them published here")])
    totals = table(sorted(d.get("totals", {}).items()), ("counter", "total"))
    return f"{rows}\n  memory: {_size(d.get('rss_bytes', 0))} resident, {_size(d.get('records_bytes', 0))} of messages" \
           f"\n\n{totals}"


def connections(d: list[dict[str, Any]]) -> str:
    return table([(c["id"], c["peer"], c["container"], c["user"] or "-", c["mechanism"] or "-", c["open_s"], c["links"],
                   c["publishers"], c["subscribers"]) for c in d],
                 ("id", "peer", "container", "user", "sasl", "open (s)", "links", "pubs", "subs"))


def links(d: list[dict[str, Any]]) -> str:
    rows = []
    for lk in d:
        if lk["role"] == "inter-router":
            rows.append(("router", lk["peer"], "-", "-", lk["state"], lk["credit_out"], lk["queued"], None, None))
        else:
            rows.append((lk["role"][:3], lk["topic"], f"{lk['container']}/{lk['name']}", lk["connection"],
                         lk["state"] + (f" {lk['deadline_s']:g}s" if lk.get("deadline_s") is not None else ""),
                         lk["credit"], lk.get("queued", lk.get("in_flight")), lk["unsettled"], lk.get("group")))
    return table(rows, ("role", "topic/peer", "link", "conn", "state", "credit", "queued", "unsettled", "group"))


def topics(d: list[dict[str, Any]]) -> str:
    return table([(t["topic"], t["publishers"], t["subscribers"], t["subscribers_suspended"], t["routers"],
                   t["in_flight"], t["received"], t["delivered"], t["accepted"], t["rejected"]) for t in d],
                 ("topic", "pubs", "subs", "suspended", "other routers", "in flight", "received", "delivered",
                  "accepted", "rejected"))


def network(d: dict[str, Any]) -> str:
    routers = table([(r["router"], "this one" if r["router"] == d["router"] else "yes" if r["reachable"]
                      else "left" if r.get("left") else "NO") for r in d["routers"]], ("router", "reachable"))
    edges = table([(e["a"], e["b"], e["cost"]) for e in d["edges"]], ("from", "to", "cost"))
    neighbours = table([(n["router"], "up" if n["up"] else "DOWN", n["cost"], n["since_s"], n["flaps"])
                        for n in d["neighbours"]], ("neighbour", "link", "cost", "since (s)", "flaps"))
    return f"router {d['router']} sees:\n{routers}\n\nlinks:\n{edges}\n\nits neighbours:\n{neighbours}"


def subscribers(d: dict[str, Any]) -> str:
    local = table([(s["topic"], f"{s['container']}/{s['name']}", s["state"], s["deadline_s"], s["credit"], s["queued"],
                    s["unsettled"], s.get("quiet_s"), s["group"], s["active"]) for s in d["local"]],
                  ("topic", "subscriber", "state", "deadline (s)", "credit", "queued", "unsettled", "quiet (s)", "group",
                   "active"))
    remote = table([(s["router"], s["topic"], f"{s['container']}/{s['name']}", s["group"],
                     "suspended" if s["suspended"] else "attached") for s in d["remote"]],
                   ("router", "topic", "subscriber", "group", "state"))
    groups = table([(g["topic"], g["group"], len(g["members"]),
                     ", ".join(f"{m['router']}:{m['container']}/{m['name']}{'*' if m['active'] else ''}"
                               f"{' (suspended)' if m['suspended'] else ''}" for m in g["members"]))
                    for g in d["groups"]], ("topic", "group", "members", "who (* the active one)"))
    return f"here:\n{local}\n\nat other routers:\n{remote}\n\nconsumer groups:\n{groups}"


def memory(d: dict[str, Any]) -> str:
    return _pairs({**d, "rss": _size(d["rss_bytes"]), "held_b": _size(d["records_bytes"]),
                   "max_b": _size(d["max_in_flight_bytes"])},
                  [("rss", "resident memory"), ("records", "records in flight"), ("max_in_flight", "max_in_flight"),
                   ("held_b", "message bytes held"), ("max_b", "max_in_flight_bytes"),
                   ("publisher_credit_outstanding", "publisher credit outstanding"),
                   ("held", "held behind older"), ("placeholders", "placeholders open"), ("gc_counts", "gc counts")])


def _limit(name: str, limit: int) -> str:
    short = name.removeprefix("max_")
    return f"{short} {_size(limit)}" if name.endswith(("bytes", "size")) else f"{short} {limit}"


def policy(d: dict[str, Any]) -> str:
    rows = [(p["kind"], p["name"], p["connections"], p["sessions"], p["links"],
             None if p["in_flight_bytes"] is None else _size(p["in_flight_bytes"]),
             ", ".join(_limit(n, v["limit"]) for n, v in p["limits"].items()) or "-",
             ", ".join(f"{n} {k}" for n, k in p["refused"].items()) or "-")
            for p in d["principals"]]
    held = table(rows, ("kind", "name", "conns", "sessions", "links", "in flight", "limits", "refused"))
    refused = table([(n, k) for n, k in d["refused"].items() if k], ("refused for", "times"))
    head = "" if d["policy"] else "  (no policy in the topology: nothing is limited or refused)\n"
    return f"{head}{held}\n\nrefusals since the router started:\n{refused}"


RENDER: dict[str, Callable[[Any], str]] = {"g": general, "c": connections, "l": links, "a": topics, "n": network,
                                           "s": subscribers, "m": memory, "p": policy}


def read_views(router: str, paths: Sequence[str], timeout: float, tls: Any = None) -> tuple[str, dict[str, Any]]:
    """The API's answers for ``paths`` from ``router``: its HTTP endpoint, or its AMQP port
    (``amqp://``, ``amqps://``: its ``$management`` node, ``tools/amqp_management.py``),
    and the router as a message may name it (a password as ``***``)."""
    if router.startswith(("amqp://", "amqps://")):
        from .amqp_management import ManagementClient
        from .clients import shown

        client = ManagementClient(router, timeout, tls)
        try:
            return shown(router), {path: client.view(path) for path in paths}
        finally:
            client.close()
    base = check_base(router)
    return base, {path: fetch(base, path, timeout) for path in paths}


def stat(router: str, chosen: Sequence[str], as_json: bool, timeout: float = 10.0, tls: Any = None) -> int:
    chosen = list(chosen) or ["g"]
    base, by_path = read_views(router, [VIEWS[k][0] for k in chosen], timeout, tls)
    answers = {k: by_path[VIEWS[k][0]] for k in chosen}
    if as_json:
        out = answers[chosen[0]] if len(chosen) == 1 else {VIEWS[k][1]: answers[k] for k in chosen}
        json.dump(out, sys.stdout, indent=2)
        print()
        return Exit.OK
    print("\n\n".join(f"{VIEWS[k][1]} ({base})\n{RENDER[k](answers[k])}" for k in chosen))
    return Exit.OK
