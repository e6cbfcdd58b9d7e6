"""``once bench attach``: what a storm of connections attaching links costs a router, with
and without a policy that limits links.

``CONNECTIONS`` clients each open a connection and a session and attach ``LINKS`` sender
links, all from one asyncio loop, as fast as the router answers. We read the router's CPU
(utime + stime) from the first connection to the last link answered. With ``policy`` the
topology's default rule sets ``max_links``, so every attach is checked against what its
user and host already hold (``router/security/quotas.py``); a check whose cost grows with what the
principal holds shows up here as CPU that grows with the square of the connections.
The wall time is the client's: dialling thousands of connections in a row waits on the
kernel (more so with many of the machine's ports in TIME_WAIT from earlier runs), while
the router sits idle; its CPU is the figure to read.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from once.client.shell import ClientProtocol, connect
from once.router.amqp.events import LinkAttached
from once.router.amqp.performatives import Role, Source, Target
from once.router.loop import run

from .procs import ROOT, checkout_cli, cpu_seconds, stop

CONNECTIONS = 2000
LINKS = 2
_SETTINGS = {"max_connections": 4 * CONNECTIONS, "max_connections_per_host": 4 * CONNECTIONS}
_POLICY = {"default": {"publish": ["#"], "subscribe": ["#"], "max_links": 10 * CONNECTIONS * LINKS}}


@dataclass(frozen=True)
class Storm:
    side: str  # "this tree" or the git ref compared with
    policy: bool
    seconds: float  # wall time (mostly the client's dialling)
    cpu: float  # the router's, seconds

    @property
    def us_per_attach(self) -> float:
        return self.cpu * 1e6 / (CONNECTIONS * LINKS)


def _start(tmp: Path, policy: bool, root: Path) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "single.yaml", tmp / "single.yaml", _SETTINGS)
    doc = yaml.safe_load(topo.read_text())
    for spec in doc["routers"].values():
        spec.pop("http", None)
    if policy:
        doc["policy"] = _POLICY
    topo.write_text(yaml.safe_dump(doc))
    cli, env = checkout_cli(root, tmp)
    proc = subprocess.Popen([sys.executable, "-m", cli, "router", str(topo), "--id", "A"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=root, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise RuntimeError(f"the router failed to start: {line!r}")
    host, port = line.split()[3].removeprefix("amqp://").rsplit(":", 1)
    return proc, (host, int(port))


async def _storm(addr: tuple[str, int], pid: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    answered = 0
    done = loop.create_future()

    def handler(proto: ClientProtocol, events: list[Any]) -> None:
        nonlocal answered
        engine = proto.engine
        answered += sum(type(e) is LinkAttached for e in events)
        if engine.remote_open is not None and not engine.sessions:
            session = engine.begin()
            for i in range(LINKS):
                engine.attach(session, f"storm-{i}", Role.SENDER, source=Source(), target=Target(address=f"storm/{i}"))
        proto.flush()
        if answered == CONNECTIONS * LINKS and not done.done():
            done.set_result(None)

    cpu0, t0 = cpu_seconds(pid), loop.time()
    conns = [await connect(*addr, f"storm-{i}", handler) for i in range(CONNECTIONS)]
    await asyncio.wait_for(done, 300)
    took, cpu = loop.time() - t0, cpu_seconds(pid) - cpu0
    for conn in conns:
        if conn.transport is not None:
            conn.transport.close()
    return took, cpu


def measure(rounds: int, compare: str | None) -> list[Storm]:
    from .compare import remove_worktree, worktree

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sides = [("this tree", ROOT)]
        if compare:
            worktree(compare, Path(tmp) / "ref")
            sides.append((compare, Path(tmp) / "ref"))
        try:
            for r in range(rounds):
                for side, root in sides if r % 2 == 0 else sides[::-1]:  # (alternating: neither always first)
                    for policy in (False, True):
                        print(f"bench attach: round {r + 1}/{rounds}, {side}, policy {'on' if policy else 'off'}: "
                              f"{CONNECTIONS} connections x {LINKS} links ...", file=sys.stderr, flush=True)
                        proc, addr = _start(Path(tempfile.mkdtemp(dir=tmp)), policy, root)
                        try:
                            took, cpu = run(_storm(addr, proc.pid))
                        finally:
                            stop([proc])
                        results.append(Storm(side, policy, took, cpu))
        finally:
            if compare:
                remove_worktree(Path(tmp) / "ref")
    return results


def report(results: list[Storm]) -> str:
    """The median of the rounds, per side and policy."""
    rows = [f"{'side':<12} {'policy':>6} {'wall s':>8} {'router cpu s':>12} {'us/attach':>10}"]
    for side in dict.fromkeys(r.side for r in results):
        for policy in (False, True):
            mine = sorted((r for r in results if r.side == side and r.policy is policy), key=lambda r: r.cpu)
            m = mine[len(mine) // 2]
            rows.append(f"{side:<12} {'on' if policy else 'off':>6} {m.seconds:>8.2f} {m.cpu:>12.2f} "
                        f"{m.us_per_attach:>10.1f}")
    return "\n".join(rows)


def main(rounds: int, compare: str | None) -> int:
    print(report(measure(rounds, compare)))
    return 0
