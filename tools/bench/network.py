"""``once bench network``: a network of many routers, as processes on this machine, boots and
carries a failover harness run (issue 51).

The topology: ``--routers`` routers in a ring, each also linked to the router a third of the
way round (degree 4 at most; a diameter of a few hops), every one listening on free ports.
The harness draws a random fault schedule on it (routers killed and restarted, links cut,
subscribers killed and restarted) and judges the run as every harness run is judged: lost,
duplicated and reordered must be zero. What it measures: how long the routers take to boot
(every one ready), their resident memory at the end of the run, and the run's own figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

SECRET = "bench-network-secret"


def topology(path: Path, routers: int) -> Path:
    """A ring of ``routers`` with chords a third of the way round (ports: placeholders the
    harness replaces with free ones)."""
    names = [f"R{i:02d}" for i in range(routers)]
    links = {tuple(sorted((names[i], names[(i + 1) % routers]))) for i in range(routers)}
    if routers > 4:
        step = max(2, routers // 3)
        links |= {tuple(sorted((names[i], names[(i + step) % routers]))) for i in range(0, routers, 2)}
    doc = {"routers": {n: {"listen": "127.0.0.1:1", "inter_router": "127.0.0.1:1"} for n in names},
           "links": [list(lk) for lk in sorted(links) if lk[0] != lk[1]],
           "settings": {"max_in_flight": 10000, "subscriber_grace": "30s"},
           "auth": {"router_secret": SECRET}}
    path.write_text(yaml.safe_dump(doc))
    return path


def main(routers: int = 30, messages: int = 6000, seed: int = 1, json_path: str | None = None) -> int:
    from once.tools.harness.run import run
    from once.tools.harness.scenario import randomized

    tmp = Path(tempfile.mkdtemp(prefix="once-bench-network-"))
    topo = topology(tmp / f"ring{routers}.yaml", routers)
    scenario = randomized(seed, messages, topology=str(topo), rate=1000)
    print(f"bench network: {routers} routers (ring with chords), harness seed {seed}, {messages} messages; "
          f"run in {tmp / 'run'}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    report = run(scenario, tmp / "run", progress=False)
    wall = time.monotonic() - t0
    rss = sorted(report.rss_kib.values())
    figures = {
        "routers": routers,
        "links": len(yaml.safe_load(topo.read_text())["links"]),
        "boot_s": round(report.boot_s, 2),
        "rss_mib_median": round(statistics.median(rss) / 1024, 1) if rss else None,
        "rss_mib_max": round(rss[-1] / 1024, 1) if rss else None,
        "rss_mib_total": round(sum(rss) / 1024, 1) if rss else None,
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
