"""``once bench network``: a network of many routers, as processes on this machine, boots and
carries a failover harness run (issue 51).

The topology: ``--routers`` routers in a ring, each also linked to the router a third of the
way round (degree 4 at most; a diameter of a few hops), every one listening on free ports.
The harness draws a random fault schedule on it (routers killed and restarted, links cut,
subscribers killed and restarted) and judges the run as every harness run is judged: lost,
duplicated and reordered must be zero. What it measures: how long the routers take to boot
(every one ready), their resident memory at the end of the run, and the run's own figures.
``--edges``: that many of the routers are edges (``router/uplink.py``), each carried by two
interiors.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from once.tools.exits import CommandError, Exit

SECRET = "bench-network-secret"


def topology(path: Path, routers: int, edges: int = 0) -> Path:
    """A ring of ``routers - edges`` interiors with chords a third of the way round, and
    ``edges`` edge routers, each with two interiors for uplinks (ports: placeholders the
    harness replaces with free ones)."""
    interiors = routers - edges
    names = [f"R{i:02d}" for i in range(interiors)]
    routers = interiors
    links = {tuple(sorted((names[i], names[(i + 1) % routers]))) for i in range(routers)}
    if routers > 4:
        step = max(2, routers // 3)
        links |= {tuple(sorted((names[i], names[(i + step) % routers]))) for i in range(0, routers, 2)}
    spec: dict[str, dict[str, object]] = {n: {"listen": "127.0.0.1:1", "inter_router": "127.0.0.1:1"} for n in names}
    for j in range(edges):
        spec[f"E{j:02d}"] = {"listen": "127.0.0.1:1", "uplink": [names[j % routers], names[(j + 1) % routers]]}
    doc = {"routers": spec,
           "links": [list(lk) for lk in sorted(links) if lk[0] != lk[1]],
           "settings": {"max_in_flight": 10000, "subscriber_grace": "30s"},
           "auth": {"router_secret": SECRET}}
    path.write_text(yaml.safe_dump(doc))
    return path


def main(routers: int = 30, messages: int = 6000, seed: int = 1, json_path: str | None = None, edges: int = 0) -> int:
    from once.tools.harness.run import run
    from once.tools.harness.scenario import randomized

    tmp = Path(tempfile.mkdtemp(prefix="once-bench-network-"))
    if not 0 <= edges <= routers - 2:
        raise CommandError(Exit.USAGE, f"--edges {edges}: expected 0 to {routers - 2} (at least two interiors)")
    topo = topology(tmp / f"ring{routers}.yaml", routers, edges)
    scenario = randomized(seed, messages, topology=str(topo), rate=1000)
    print(f"bench network: {routers} routers ({routers - edges} interiors in a ring with chords, {edges} edges), "
          f"harness seed {seed}, {messages} messages; "
          f"run in {tmp / 'run'}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    report = run(scenario, tmp / "run", progress=False)
    wall = time.monotonic() - t0
    rss = sorted(kib for r, kib in report.rss_kib.items() if not r.startswith("E"))
    edge_rss = sorted(kib for r, kib in report.rss_kib.items() if r.startswith("E"))
    figures = {
        "routers": routers,
        "edges": edges,
        "links": len(yaml.safe_load(topo.read_text())["links"]),
        "boot_s": round(report.boot_s, 2),
        "rss_mib_median": round(statistics.median(rss) / 1024, 1) if rss else None,
        "rss_mib_max": round(rss[-1] / 1024, 1) if rss else None,
        "rss_mib_total": round(sum(rss) / 1024, 1) if rss else None,
        "edge_rss_mib_median": round(statistics.median(edge_rss) / 1024, 1) if edge_rss else None,
        "run_s": round(wall, 1),
        "faults": len(scenario.faults),
        "sent": report.sent,
        "accepted": report.accepted,
        "violations": report.violations,
        "ok": report.ok,
    }
    width = max(len(k) for k in figures)
    for k, v in figures.items():
        print(f"{k:<{width}}  {v}")
    if not report.ok:
        print(report.text(), file=sys.stderr)
    if json_path:
        Path(json_path).write_text(json.dumps(figures, indent=1))
    return 0 if report.ok else 1
