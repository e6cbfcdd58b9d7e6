"""``once bench --against qdrouterd=PATH``: another router under the same load, in the same run.

The bench starts the peer itself from the scenario's topology: one ``qdrouterd`` (Qpid
Dispatch Router, built by the user; this project ships none of its code) per router, each
with a normal listener for the clients, an inter-router listener, connectors for the
topology's links (the first router of a pair dials, as ours do), one worker thread (a
single router is pinned to one core, as ours is: more threads would only take turns), and
every bench topic a multicast address: each subscriber gets every message, the nearest
meaning to ours (Dispatch tells the publisher ``accepted`` when one subscriber accepted;
once when all of them did). The C load clients, credit and body are the same as ours.

Ready means: the client listener takes a connection, and each router's link-state has
computed a next hop to every other router (its ``Computed next hops`` log line names them
all). Dispatch grants a sender credit only once its address has a consumer somewhere, so a
publisher never sends before the subscriber's address reached its router.

With ``--tls`` both sides run over TLS with the same certificates: clients check the
router's, and routers link over mutual TLS, authenticated by their certificates (SASL
EXTERNAL for Dispatch, as ours do).

Consumer groups are ours alone: a scenario with a group is refused for the peer.
"""

from __future__ import annotations

import ast
import re
import socket
import subprocess
import time
from pathlib import Path

import yaml
from once.tools.exits import CommandError, Exit

from .procs import ROOT, two_cores
from .scenarios import SCENARIOS, Scenario

KINDS = ("qdrouterd",)


def parse(spec: str) -> tuple[str, Path]:
    """``qdrouterd=PATH``: the kind and the executable."""
    kind, sep, path = spec.partition("=")
    if kind not in KINDS or not sep or not path:
        raise CommandError(Exit.USAGE, f"--against {spec}: expected qdrouterd=PATH (the qdrouterd executable)")
    exe = Path(path).expanduser()
    if not exe.is_file():
        raise CommandError(Exit.USAGE, f"--against {spec}: no such file {exe}")
    return kind, exe


def _config(rid: str, doc: dict, log: Path, tls: tuple[Path, Path, Path] | None = None) -> str:
    r = doc["routers"][rid]
    host, port = r["listen"].rsplit(":", 1)
    parts = [f"router {{\n    mode: interior\n    id: {rid}\n    workerThreads: 1\n}}",
             f"log {{\n    module: DEFAULT\n    enable: info+\n    outputFile: {log}\n}}"]
    # --tls: clients over TLS (the router's certificate checked, no client certificate, as
    # ours), and mutual TLS between routers, each authenticated by its certificate (EXTERNAL).
    client_tls = inter_tls = dial_tls = ""
    if tls is not None:
        cert, key, ca = tls
        parts.append(f"sslProfile {{\n    name: bench-tls\n    certFile: {cert}\n    privateKeyFile: {key}\n"
                     f"    caCertFile: {ca}\n}}")
        client_tls = "    sslProfile: bench-tls\n    requireSsl: yes\n"
        inter_tls = "    sslProfile: bench-tls\n    requireSsl: yes\n"
        dial_tls = "    sslProfile: bench-tls\n    verifyHostname: yes\n"
    parts.append(f"listener {{\n    host: {host}\n    port: {port}\n    role: normal\n    authenticatePeer: no\n"
                 f"    saslMechanisms: ANONYMOUS\n{client_tls}}}")
    if r.get("inter_router"):
        ihost, iport = r["inter_router"].rsplit(":", 1)
        auth = "    authenticatePeer: yes\n    saslMechanisms: EXTERNAL\n" if tls is not None else \
            "    authenticatePeer: no\n    saslMechanisms: ANONYMOUS\n"
        parts.append(f"listener {{\n    host: {ihost}\n    port: {iport}\n    role: inter-router\n{auth}{inter_tls}}}")
    for a, b in doc.get("links") or []:
        a, b = str(a), str(b)
        if rid == min(a, b):
            other = doc["routers"][max(a, b)]["inter_router"]
            ohost, oport = other.rsplit(":", 1)
            mech = "EXTERNAL" if tls is not None else "ANONYMOUS"
            parts.append(f"connector {{\n    host: {ohost}\n    port: {oport}\n    role: inter-router\n"
                         f"    saslMechanisms: {mech}\n{dial_tls}}}")
    for name in SCENARIOS:  # (the C clients' topic: bench-NAME)
        parts.append(f"address {{\n    prefix: bench-{name}\n    distribution: multicast\n}}")
    return "\n".join(parts) + "\n"


def _listening(host: str, port: int) -> bool:
    # (a TCP connect only: with TLS, Dispatch logs the handshake that never came, nothing worse)
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _next_hops(log: Path) -> int:
    """How many routers this one has a next hop to, by its latest computation."""
    text = log.read_text(errors="replace") if log.exists() else ""
    found = re.findall(r"Computed next hops: (\{.*?\})", text)
    if not found:
        return 0
    try:
        return len(ast.literal_eval(found[-1]))
    except (ValueError, SyntaxError):
        return 0


def start(exe: Path, scenario: Scenario, tmp: Path, tls: tuple[Path, Path, Path] | None = None,
          ) -> tuple[list[subprocess.Popen[str]], dict[str, tuple[str, int]]]:
    """The peer's routers for ``scenario`` as OS processes; their client addresses.
    ``tls``: (certificate, key, CA) for TLS to clients and mutual TLS between routers."""
    from once.tools.topology_ports import with_free_ports

    if scenario.group or scenario.idle_links:
        raise CommandError(Exit.USAGE, "--against: consumer groups and idle links are ours alone; give scenarios "
                                       "without them (single-1to1, single-1to3, line3-1to1, single-ping ...)")
    topo = with_free_ports(ROOT / "topologies" / scenario.topology, tmp / f"peer-{scenario.topology}")
    doc = yaml.safe_load(topo.read_text())
    ids = sorted(doc["routers"])
    single = len(ids) == 1 and two_cores()
    procs, addrs, logs = [], {}, {}
    for rid in ids:
        logs[rid] = tmp / f"qdrouterd-{rid}.log"
        conf = tmp / f"qdrouterd-{rid}.conf"
        conf.write_text(_config(rid, doc, logs[rid], tls))
        cmd = [str(exe), "-c", str(conf)]
        if single:
            cmd = ["taskset", "-c", "0", *cmd]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        host, port = doc["routers"][rid]["listen"].rsplit(":", 1)
        addrs[rid] = (host, int(port))
    deadline = time.monotonic() + 60
    while not all(_listening(*addrs[r]) for r in ids) or any(_next_hops(logs[r]) < len(ids) - 1 for r in ids):
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            why = (dead[0].stderr.read().strip().splitlines() or ["?"])[-1] if dead and dead[0].stderr else "timed out"
            raise CommandError(Exit.FAILED, f"--against qdrouterd: the routers did not come up: {why}")
        time.sleep(0.05)
    return procs, addrs
