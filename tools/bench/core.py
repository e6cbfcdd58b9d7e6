"""``once bench core``: the forwarding core alone, in-process, no sockets and no engine.

On this machine the whole-router figures move by 5-10 % from round to round (the
hypervisor); the core's own cost per message, measured in one process with nothing
else running, moves by about 1 %. So a change to the core is judged here first, and on
the whole router with ``once bench --compare``.

Five loops, each a message and its answers through ``Core`` with ports that do nothing,
each step a batch of its own (``after_batch`` after it: the ports are called there):
``local-1to1`` and ``local-1to3`` (a publish and its subscribers' acceptances on one
router), ``root-hop`` (a publish forwarded to a neighbour and its answer), ``transit``
(a copy from one neighbour forwarded to another: under protocol version 2 answered and
settled, under version 3 relayed and forgotten), ``destination`` (a copy taken for a
subscriber here, accepted, answered and settled). Best of five runs, microseconds per
message.

The loops run in a subprocess from the source text below, so ``--compare REF`` runs
the same loops over another checkout's core (one from before the ``once`` namespace
imports ``router...``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .procs import ROOT, checkout_cli

LOOPS = r'''
import json, sys, time
try:
    from once.router.config import Settings
    from once.router.core import ACCEPTED, Core
    from once.router.core.ports import Alone
except ImportError:  # a checkout from before the once namespace
    from router.config import Settings
    from router.core import ACCEPTED, Core
    from router.core.ports import Alone

class Port:
    def grant(self, credit): pass
    def outcome(self, handle, outcome, settle): pass
    def credit(self): return 1 << 30
    def deliver(self, record, settled, redelivery): return record
    def forward(self, record, dests, settled, keys=None): return record
    def settle(self, handle): pass
    def draining(self): return False
    def drained(self): pass
    def activated(self): pass
    def stolen(self): pass
    def gap(self, router): pass
    def stalled(self, why): pass
    def marker(self, msg): pass

    def copy(self, c): self.last = c

class ToC(Alone):
    def remote_routers(self, topic): return {"C"}
    def route(self, dests, exclude): return {"C": set(dests)}, set()
    def keys_at(self, topic, router): return frozenset({("cs", "s")})
    def homes(self, keys): return {"C": set(keys)}

def v3(core):
    return getattr(core, "copies", None) is not None

BIG = dict(max_in_flight=10**7, link_credit=10**6, initial_credit=10**6)

def local(n, subs):
    core = Core("A", Settings(**BIG))
    ss = [core.add_subscriber(Port(), "t", f"c{i}", "s", False)[0] for i in range(subs)]
    pub = core.add_publisher(Port(), "t", "cp", "p", False)
    body = b"x" * 100
    t = time.perf_counter()
    for i in range(n):
        tag = i.to_bytes(8, "big")
        pub.credit = 10
        rec = core.publish(pub, tag, body, False, tag)
        core.after_batch()
        for s in ss:
            core.subscriber_update(s, rec, rec, ACCEPTED, True)
        core.after_batch()
    return time.perf_counter() - t

def root_hop(n):
    """A publish with one subscriber at the next router: the copy, and its answer (version 2:
    the hop's disposition; version 3: the destination's answer, routed to the root)."""
    core = Core("A", Settings(**BIG), routes=ToC())
    port = Port()
    hop = core.add_hop("C", port)
    pub = core.add_publisher(Port(), "t", "cp", "p", False)
    body = b"x" * 100
    if v3(core):
        from once.router.core.messages import Answer
        from once.records.owed import Said
        said = ((("cs", "s"), Said.ACCEPTED, None),)
    t = time.perf_counter()
    for i in range(n):
        tag = i.to_bytes(8, "big")
        pub.credit = 10
        rec = core.publish(pub, tag, body, False, tag)
        core.after_batch()
        if v3(core):
            c = port.last
            core.control("C", (Answer(c.gid, c.stream, c.targets[0].position, said),))
        else:
            core.hop_update(hop, rec, rec, ACCEPTED, True)
        core.after_batch()
    return time.perf_counter() - t

def transit(n):
    """A copy through a router in the middle (version 2: forwarded, answered, settled; version 3:
    relayed, nothing kept)."""
    core = Core("B", Settings(**BIG), routes=ToC())
    hop = core.add_hop("C", Port())
    up = core.add_upstream("A", Port())
    dests, body = frozenset({"C"}), b"x" * 100
    if v3(core):
        from once.router.core import messages
        Copy, Target = messages.Copy, getattr(messages, "CopyTarget", None) or messages.Target  # (older refs: Target)
        keys, visited = frozenset({("cs", "s")}), frozenset({"A"})
    t = time.perf_counter()
    for i in range(n):
        gid = i.to_bytes(16, "big")
        if v3(core):
            core.copy_arrived(up, Copy(gid, "t", body, False, 0, "A", b"A/1", i,
                                       (Target("C", keys, i + 1, i + 1),), visited))
        else:
            rec = core.forwarded(up, gid, gid, "t", body, dests, False, 0)
            core.hop_update(hop, rec, rec, ACCEPTED, True)
            core.upstream_settled(up, rec)
        core.after_batch()
    return time.perf_counter() - t

class FromA(Alone):
    def remote_routers(self, topic): return set()
    def route(self, dests, exclude): return {}, set()

def destination(n):
    """A copy taken for a subscriber here, accepted, answered to the root and settled by it
    (version 2: forwarded, accepted, the upstream's disposition and settlement)."""
    core = Core("C", Settings(**BIG), routes=FromA())
    port = Port()
    port.deliver = lambda record, settled, redelivery: setattr(port, "got", record) or record
    sub = core.add_subscriber(port, "t", "cs", "s", False)[0]
    up = core.add_upstream("A", Port())
    dests, body = frozenset({"C"}), b"x" * 100
    if v3(core):
        from once.router.core import messages
        Copy, Settle = messages.Copy, messages.Settle
        Target = getattr(messages, "CopyTarget", None) or messages.Target  # (older refs: Target)
        keys, visited = frozenset({("cs", "s")}), frozenset({"A"})
    t = time.perf_counter()
    for i in range(n):
        gid = i.to_bytes(16, "big")
        if v3(core):
            core.copy_arrived(up, Copy(gid, "t", body, False, 0, "A", b"A/1", i,
                                       (Target("C", keys, i + 1, i + 1),), visited))
            core.after_batch()
            rec = port.got
            core.subscriber_update(sub, rec, rec, ACCEPTED, True)
            core.control("A", (Settle(gid),))
        else:
            rec = core.forwarded(up, gid, gid, "t", body, dests, False, 0)
            core.subscriber_update(sub, rec, rec, ACCEPTED, True)
            core.upstream_settled(up, rec)
        core.after_batch()
    return time.perf_counter() - t

n = int(sys.argv[1])
loops = {"local-1to1": lambda: local(n, 1), "local-1to3": lambda: local(n, 3), "root-hop": lambda: root_hop(n),
         "transit": lambda: transit(n), "destination": lambda: destination(n)}
print(json.dumps({name: round(min(f() for _ in range(5)) / n * 1e6, 3) for name, f in loops.items()}))
'''


def _run(root: Path, tmp: Path, messages: int) -> dict[str, float]:
    _, env = checkout_cli(root, tmp)
    proc = subprocess.run([sys.executable, "-c", LOOPS, str(messages)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the core loops failed in {root}: {proc.stderr.strip()[-500:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(messages: int, compare: str | None, rounds: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        if compare is None:
            result = _run(ROOT, Path(tmp), messages)
            print(f"{'loop':<12} {'us/msg':>7}")
            for name, us in result.items():
                print(f"{name:<12} {us:>7.3f}")
            return 0
        from .compare import remove_worktree, worktree

        other = Path(tmp) / "ref"
        commit = worktree(compare, other)
        try:
            runs: dict[str, list[dict[str, float]]] = {"new": [], "old": []}
            for i in range(rounds):
                for side in (("new", "old") if i % 2 == 0 else ("old", "new")):
                    print(f"bench core: round {i + 1}/{rounds}, {'this tree' if side == 'new' else compare}",
                          file=sys.stderr, flush=True)
                    runs[side].append(_run(ROOT if side == "new" else other, Path(tmp), messages))
        finally:
            remove_worktree(other)
    print(f"core loops: this tree vs {compare} ({commit[:10]}), best of 5 per round, best of {rounds} rounds, us/msg")
    print(f"{'loop':<12} {'new':>7} {'old':>7} {'ratio':>6}")
    for name in runs["new"][0]:
        new, old = min(r[name] for r in runs["new"]), min(r[name] for r in runs["old"])
        print(f"{name:<12} {new:>7.3f} {old:>7.3f} {new / old:>6.2f}")
    return 0
