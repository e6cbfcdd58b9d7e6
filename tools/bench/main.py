"""``once bench`` from the command line: run the scenarios, print the table, write JSON."""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

import yaml
from once.router.loop import run
from once.tools.exits import CommandError, Exit
from tqdm import tqdm

from . import cclients, certs, pyclients
from .procs import ROOT, Meter, pin, start_routers, stop, unpin
from .scenarios import DEFAULT_SCENARIOS, SCENARIOS, Result


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


class Scraper:
    """``--http``: every router serves its endpoint and this scrapes each one's /metrics
    once a second while the scenario runs (what a Prometheus server does), from a thread
    of the bench process: its cost lands on the routers, not on the C clients' processes."""

    def __init__(self, urls: list[str], every: float = 1.0) -> None:
        self.urls = urls
        self.every = every
        self.done = threading.Event()
        self.scrapes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(self.every):
            for url in self.urls:
                with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                    r.read()
                self.scrapes += 1

    def stop(self) -> int:
        self.done.set()
        self.thread.join(10)
        return self.scrapes


def _one(name: str, i: int, total: int, messages: int, credit: int, clients: str, journal: bool,
         tmp: Path, root: Path | None, http: bool = False, peer: Path | None = None, tls: bool = False) -> Result:
    scenario = SCENARIOS[name]
    if scenario.max_messages:
        messages = min(messages, scenario.max_messages)
    unpin()  # children inherit affinity: never start routers from a pinned process
    urls: dict[str, str] | None = {} if http else None
    files = certs.make(tmp / "certs", sorted(yaml.safe_load((ROOT / "topologies" / scenario.topology).read_text())
                                             ["routers"])) if tls else None
    if peer is not None:  # (--against: another router under the same clients)
        from .peer import start as start_peer

        procs, addrs = start_peer(peer, scenario, tmp, tls=files)
    else:
        procs, addrs = start_routers(scenario, tmp, journal=journal, root=root or ROOT, http=urls, tls=files)
    scraper = Scraper(list(urls.values())) if urls else None
    meter = Meter([p.pid for p in procs])
    tty = sys.stderr.isatty()
    bar = None
    try:
        if clients == "c":
            print(f"bench {name} ({i}/{total}): {messages} messages, C clients ...", file=sys.stderr, flush=True)
            result = cclients.run_scenario(name, scenario, messages, credit, addrs, meter,
                                           ca=tmp / "certs" / "ca.pem" if tls else None)
        else:
            if len(addrs) == 1:
                pin(1)
            # a bar on a terminal; a line per scenario otherwise (logs, CI)
            if tty:
                bar = tqdm(total=messages, desc=f"{name} ({i}/{total})", unit="msg", unit_scale=True, leave=False,
                           file=sys.stderr)
            else:
                print(f"bench {name} ({i}/{total}): {messages} messages ...", file=sys.stderr, flush=True)
            result = run(pyclients.run_scenario(name, scenario, messages, credit, addrs, meter, bar))
        result.router_cpu_us = meter.cpu_us_per(messages)
        result.router_peak_rss_mib = meter.peak_rss_mib()
    finally:
        if bar is not None:
            bar.close()
        if scraper is not None:
            scrapes = scraper.stop()
            print(f"bench {name}: {scrapes} scrapes of /metrics", file=sys.stderr, flush=True)
        stop(procs)
    print(f"bench {name}: {result.msgs_per_s} msg/s, p50 {result.p50_ms} ms, router {result.router_cpu_us} us/msg",
          file=sys.stderr, flush=True)
    return result


def table(results: list[Result]) -> str:
    rows = [f"{'scenario':<16} {'clients':>7} {'msgs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'e2e p50':>8} {'e2e p99':>8} "
            f"{'cpu us/msg':>10} {'peak MiB':>8} {'messages':>9}"]
    for r in results:
        shares = f"  shares {' '.join(f'{x:.0%}' for x in r.shares)}" if r.shares else ""
        e2e = (f"{r.e2e_p50_ms:>8} {r.e2e_p99_ms:>8}" if r.e2e_p50_ms is not None else f"{'-':>8} {'-':>8}")
        cpu = r.router_cpu_us if r.router_cpu_us is not None else "-"
        rss = r.router_peak_rss_mib if r.router_peak_rss_mib is not None else "-"
        rows.append(f"{r.scenario:<16} {r.clients:>7} {r.msgs_per_s:>8} {r.p50_ms:>8} {r.p99_ms:>8} {e2e} {cpu:>10} "
                    f"{rss:>8} {r.messages:>9}{shares}")
    return "\n".join(rows)


def measure(names: list[str], messages: int, credit: int, clients: str = "python", journal: bool = False,
            root: Path | None = None, http: bool = False, peer: Path | None = None, tls: bool = False) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names, 1):
            results.append(_one(name, i, len(names), messages, credit, clients, journal, Path(tmp), root, http,
                                peer, tls))
    return results


def bench(names: list[str], json_path: str | None, messages: int, credit: int, no_router: bool,
          journal: bool = False, clients: str = "python", http: bool = False, tls: bool = False) -> int:
    names = names or list(DEFAULT_SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise CommandError(Exit.USAGE, f"unknown scenario {unknown[0]!r} (have {', '.join(SCENARIOS)}, memory)")
    if no_router:
        pin(1)
        results = [run(pyclients.run_direct(messages, credit))]
    else:
        if clients == "c":
            cclients.build()  # (before any router starts: the first build may install Proton-C)
        if tls and clients != "c":
            raise CommandError(Exit.USAGE, "--tls needs --clients c (the Proton-C clients speak TLS)")
        results = measure(names, messages, credit, clients, journal, http=http, tls=tls)
    print(table(results))
    if json_path:
        doc = [dict(asdict(r), date=time.strftime("%Y-%m-%d"), machine=machine()) for r in results]
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
    return 0
