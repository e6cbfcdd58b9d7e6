"""The bounded exhaustive mode of the in-process network (issue 24, ``docs/protocol.md``
section 9): small models, every schedule the scheduler allows within a bound, checked in
every state.

A model is a few routers (line3, a triangle, a ring of four), one publisher, one or two
subscribers (in one, a consumer group of two besides), two or three messages and up to
two faults from a menu (a router killed and restarted, a link cut, a subscriber's
process crashed, a publisher's connection dropped). Everything runs in the production
core, network and lifecycle, as in ``schedules.py``.

What is explored. Once the network has converged and the first message is published,
every step is a choice point; the alternatives are
- the next event in time order (the default: what a seeded run does);
- any event a real scheduler could have run first: the first frame waiting on each other
  connection direction (each stays FIFO, as TCP keeps it) within a link's latency of the
  earliest event (``WINDOW``), and the first timer there (timers keep their order: one
  process's asyncio loop);
- the next fault of the model, injected now.
A schedule is a sequence of these choices. The search runs every schedule that deviates
from the default in at most ``depth`` choices (faults count; so ``depth`` 3 with two
faults is every placement of both and one reordering besides), by replaying from the
start (stateless, like CHESS's preemption bound), and prunes a choice point whose state
it has already expanded with as much budget left. The state hash is an abstraction: the
frames in flight per connection, the pending timers by function, the clients' logs, and
per router its records with their owed sets and sends, its chains, tombstones, positions
and queued answers, its links' credit, its subscribers and publishers, and its
subscriber table. Two states
it confuses are explored once; times are left out on purpose (they differ on every path).

Checked in every state:
- **accepted means every subscriber has it**: a publisher's accepted tag has been
  processed by every subscriber, and by a member of the group (the models close no
  subscription and expire none);
- **no wait cycle**: per message, a root waits on the routers its pending keys live at;
  a destination holding a copy behind a gap waits on the root's copies at the missing
  positions; each of those waits on its own destinations. The graph must stay acyclic
  (version 2's stalls were such cycles);
and at the end of every schedule the sweep's own verdict (``SimNet.check``): nothing lost,
twice, reordered, unanswered, or left behind, and the run settles (no hang).

``PYTHONHASHSEED=0 python -m once.sim.explore [--depth N] [--model NAME]``
prints each model's count of schedules and states, and any violation with the choices
that replay it (``--replay NAME CHOICES``).
"""

from __future__ import annotations

import argparse
import functools
import heapq
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from once.records.owed import KeyState
from once.router.core import OutcomeKind

from .clock import Loop, Runaway, Timer
from .links import Pipe
from .net import SETTINGS, Fault, SimNet

START = 1.0  # the network has converged; the first message goes
WINDOW = 0.002  # a link's largest latency: events this close to the earliest may run first
LIMIT = 40.0  # virtual seconds a schedule may take to settle after START (a hang otherwise)


@dataclass(frozen=True)
class Model:
    name: str
    links: tuple[tuple[str, str], ...]
    publisher: tuple[str, ...]  # its routers in order of preference
    subscribers: tuple[tuple[str, ...], ...]
    messages: int
    faults: tuple[Fault, ...] = ()  # injected as choices, in this order (``at`` is ignored)
    members: tuple[tuple[str, ...], ...] = ()  # of consumer group "g", named g0, g1, ...


LINE3 = (("A", "B"), ("B", "C"))
TRIANGLE = (("A", "B"), ("B", "C"), ("A", "C"))
RING4 = (("A", "B"), ("B", "D"), ("C", "D"), ("A", "C"))


def _f(kind: str, *target: str, duration: float = 0.3) -> Fault:
    return Fault(0.0, kind, target, duration, 0.0)


MODELS: dict[str, Model] = {m.name: m for m in (
    Model("line3-plain", LINE3, ("A", "B", "C"), (("C", "B", "A"), ("A", "B", "C")), 3),
    Model("line3-kill-relay", LINE3, ("A", "B", "C"), (("C", "B", "A"), ("A", "B", "C")), 2, (_f("kill", "B"),)),
    Model("line3-kill-root", LINE3, ("A", "B", "C"), (("C", "B", "A"), ("B", "C", "A")), 2, (_f("kill", "A"),)),
    Model("line3-kill-destination", LINE3, ("A", "B", "C"), (("C", "B", "A"), ("A", "B", "C")), 2,
          (_f("kill", "C"),)),
    Model("line3-cut-and-crash", LINE3, ("A", "B", "C"), (("C", "B", "A"), ("A", "B", "C")), 2,
          (_f("cut", "B", "C"), _f("crash", "s0"))),
    Model("line3-drop-and-kill", LINE3, ("A", "B", "C"), (("C", "B", "A"),), 2, (_f("drop", "p0"), _f("kill", "A"))),
    Model("triangle-kill-and-cut", TRIANGLE, ("A", "B", "C"), (("C", "A", "B"), ("B", "C", "A")), 2,
          (_f("kill", "B"), _f("cut", "A", "C"))),
    Model("triangle-crash-and-kill", TRIANGLE, ("A", "C", "B"), (("C", "B", "A"), ("B", "A", "C")), 2,
          (_f("crash", "s1"), _f("kill", "C"))),
    # The situations of the earlier protocol's open bugs (strict xfails once, these models
    # now): seed 2439, a relay lost its way to the destination
    # and handed the copy back, then the other way died too;
    Model("ring4-relay-loses-its-way", RING4, ("D", "C", "B", "A"), (("A", "B", "C", "D"), ("B", "A", "D", "C")), 2,
          (_f("cut", "A", "B"), _f("kill", "C"))),
    # seed 1350, the copy for a router behind another destination, and an answer that must
    # speak only for the copy it answers;
    Model("line3-answer-for-its-copy", LINE3, ("A", "B", "C"), (("B", "A", "C"), ("C", "B", "A")), 2,
          (_f("cut", "B", "C"), _f("crash", "s1"))),
    # harness --groups seeds 407 and 605, a subscriber moved off a router that then restarted
    # while its links came back one by one (version 2 bounced keyed copies between two routers).
    Model("triangle-moved-off-a-restarted-router", TRIANGLE, ("B", "A", "C"), (("C", "A", "B"), ("A", "B", "C")), 2,
          (_f("kill", "C", duration=0.2), _f("cut", "A", "C", duration=0.4))),
    # A consumer group: the root chooses a member per message; one member's process crashes
    # and the router of the other dies (the root chooses again, never the members' routers).
    Model("triangle-group-member-crashes", TRIANGLE, ("A", "B", "C"), (("B", "A", "C"),), 2,
          (_f("crash", "g1"), _f("kill", "B")), members=(("C", "B", "A"), ("B", "C", "A"))),
)}


class ChoiceLoop(Loop):
    """The simulator's loop with its next event chosen by ``choose`` (see the module doc)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.choose: Callable[[list[tuple[float, int, Timer, Callable[..., Any], tuple[Any, ...]]]], int | None] | None = None

    def run_until(self, until: float, idle: Callable[[], bool] | None = None) -> None:
        heap = self._heap
        while heap:
            while heap and heap[0][2].cancelled:
                heapq.heappop(heap)
            if not heap or heap[0][0] > until:
                break
            if self.events > self.max_events:
                raise Runaway(f"more than {self.max_events} events by {self.now:.3f} s virtual")
            entry = None
            if self.choose is not None and self.now >= START:
                entry = self._chosen(until)
            if entry is None:
                entry = heapq.heappop(heap)
                if entry[2].cancelled:
                    continue
            when, _, timer, fn, args = entry
            self.now = max(self.now, when)
            self.events += 1
            fn(*args)
            if idle is not None and idle():
                return
        self.now = max(self.now, until)

    def _chosen(self, until: float) -> tuple[float, int, Timer, Callable[..., Any], tuple[Any, ...]] | None:
        """Pop the events that could run next, let ``choose`` pick one; push back the rest.
        None: ``choose`` ran something else (a fault) instead."""
        heap = self._heap
        horizon = min(heap[0][0] + WINDOW, until)
        near = []
        while heap and heap[0][0] <= horizon:
            entry = heapq.heappop(heap)
            if not entry[2].cancelled:
                near.append(entry)
        candidates, seen = [], set()
        for entry in near:
            fn = entry[3]
            channel = id(cast(Any, fn).__self__) if getattr(fn, "__func__", None) is Pipe._arrive else None
            if channel not in seen:
                seen.add(channel)
                candidates.append(entry)
        assert self.choose is not None
        pick = self.choose(candidates)
        for entry in near:
            if pick is None or entry is not candidates[pick]:
                heapq.heappush(heap, entry)
        return None if pick is None else candidates[pick]


@dataclass
class Point:
    """One choice point of a run: how many alternatives, and the state's hash there."""

    alternatives: int
    digest: int | None  # (None where the search will not expand the point: not computed)


@dataclass
class Explored:
    points: list[Point] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    injected: int = 0  # faults of the model injected in this schedule


def digest(net: SimNet, faults_left: int) -> int:
    """The abstraction of the global state the search prunes on (see the module doc)."""
    loop = net.loop
    frames: dict[int, list[str]] = {}
    timers: list[str] = []
    for _, _, timer, fn, args in sorted(loop._heap):
        if timer.cancelled:
            continue
        if getattr(fn, "__func__", None) is Pipe._arrive:
            frames.setdefault(id(cast(Any, fn).__self__), []).append(repr(args))
        else:
            timers.append(getattr(fn, "__qualname__", repr(fn)))
    parts: list[object] = [faults_left, sorted(map(tuple, frames.values())), tuple(timers)]
    for p in net.publishers:
        parts.append((p.alive, p.attached, p.next, tuple(sorted(p.unsettled)), tuple(sorted(p.outcomes)),
                      p.credit, tuple(p.to_send)))
    for s in net.subscribers:
        parts.append((s.alive, s.attached, tuple(s.effects), tuple(sorted(s.held.items())), tuple(s.queue),
                      tuple(sorted(s.unsettled_accepted))))
    for name in sorted(net.routers):
        r = net.routers[name]
        if not r.alive:
            parts.append((name, "dead"))
            continue
        core = r.core
        recs: list[tuple[object, ...]] = []
        for gid, rec in sorted(core.records.records.items()):
            far = rec.far
            if far is None:
                recs.append((gid, None))
                continue
            owed = far.owed
            recs.append((gid, tuple(sorted((k, s.value) for k, s in owed.states.items())) if owed else None,
                         tuple(sorted((d, tuple(v)) for d, v in far.sends.items())), len(far.takes)))
        dest = core.copies.dest
        chains = tuple(sorted((s, c.next, tuple(sorted(c.held))) for s, c in dest.chains.items())) if dest else ()
        tombs = tuple(sorted(dest.tombstones)) if dest else ()
        ends = tuple(sorted((peer, e.up, e.closed, e.credit, e.snd_count, e.rcv_count) for peer, e in r.ends.items()))
        subs = tuple(sorted((key, s.attached, s.suspended_until is not None, len(s.queue), tuple(sorted(s.attempts)))
                            for topic in core.topics.values() for key, s in topic.items()))
        pubs = tuple(sorted((p.container_id, p.link_name, p.credit, p.attached, p.in_flight)
                            for p in core.publishers))
        table = r.network.plane.table
        origins = tuple(sorted((o, st.watermark, repr(sorted(st.keys.items()))) for o, st in table.origins.items()))
        copies = core.copies
        boxes = tuple(sorted((k, b.next, tuple(b.unanswered)) for k, b in copies.positions.items())) if copies else ()
        parts.append((name, tuple(recs), chains, tombs, ends, subs, pubs, origins, boxes,
                      repr(copies.outgoing) if copies else ""))
    return hash(repr(parts))


def wait_cycle(net: SimNet) -> list[object] | None:
    """A cycle in the wait-for graph of the live routers (see the module doc), or None."""
    edges: dict[object, set[object]] = {}
    numbered: dict[tuple[str, bytes, str, int], bytes] = {}  # (root, stream, router, position) -> gid
    for name, r in net.routers.items():
        if not r.alive:
            continue
        for gid, rec in r.core.records.records.items():
            far = rec.far
            if far is None or far.owed is None or not rec.local:
                continue
            node = ("root", name, gid)
            for key, state in far.owed.states.items():
                where = far.owed.where.get(key)
                if state is KeyState.PENDING and where is not None and where != name:
                    edges.setdefault(node, set()).add(("dest", where, gid))
            for router, sends in far.sends.items():
                for position, _, _ in sends:
                    numbered[(name, far.stream, router, position)] = gid
    for name, r in net.routers.items():
        if not r.alive or r.core.copies is None:
            continue
        for stream, chain in r.core.copies.dest.chains.items():
            for position, (copy, _) in chain.held.items():
                node = ("dest", name, copy.gid)
                for missing in range(chain.next, position):
                    if missing in chain.held:
                        continue
                    waited = numbered.get((copy.root, stream, name, missing))
                    if waited is not None:
                        edges.setdefault(node, set()).add(("root", copy.root, waited))
    visiting: dict[object, int] = {}  # 1: on the path, 2: done
    path: list[object] = []

    def visit(node: object) -> list[object] | None:
        visiting[node] = 1
        path.append(node)
        for nxt in edges.get(node, ()):
            if visiting.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in visiting:
                found = visit(nxt)
                if found:
                    return found
        visiting[node] = 2
        path.pop()
        return None

    for start in list(edges):
        if start not in visiting:
            found = visit(start)
            if found:
                return found
    return None


def accepted_without(net: SimNet) -> str | None:
    """A tag a publisher heard accepted that a subscriber (or no member of the group) has
    not processed, or None."""
    plain = [s for s in net.subscribers if not s.group]
    members = [s for s in net.subscribers if s.group]
    for p in net.publishers:
        for tag, outcome in p.outcomes.items():
            if outcome.kind is not OutcomeKind.ACCEPTED:
                continue
            gid = p.gid(tag)
            for s in plain:
                if gid not in s.accepted:
                    return f"{p.name}:{tag} accepted before subscriber {s.name} processed it"
            if members and not any(gid in m.accepted for m in members):
                return f"{p.name}:{tag} accepted before any member of the group processed it"
    return None


def run(model: Model, deviations: dict[int, int], seed: int = 1, hash_after: int | None = None) -> Explored:
    """One schedule: the default choice everywhere but at ``deviations`` (point -> choice).
    The state's hash is taken at the points after ``hash_after`` only (None: at none): the
    search expands no other, and hashing was half the time of a search."""
    net = SimNet(seed, list(model.links), SETTINGS)
    loop = ChoiceLoop(seed)
    net.loop = loop
    result = Explored()
    faults = list(model.faults)

    def choose(candidates: list[tuple[float, int, Timer, Callable[..., Any], tuple[Any, ...]]]) -> int | None:
        n = len(candidates) + (1 if faults else 0)
        if n > 1:
            i = len(result.points)
            wanted = hash_after is not None and i > hash_after
            result.points.append(Point(n, digest(net, len(faults)) if wanted else None))
            pick = deviations.get(i, 0)
            if faults and pick == n - 1:
                net._fault(faults.pop(0))
                result.injected += 1
                return None
            return pick
        return 0

    def check_state() -> bool:
        """Raises on a violation; False otherwise (the loop goes on)."""
        bad = accepted_without(net)
        if bad:
            raise Violation(bad)
        cycle = wait_cycle(net)
        if cycle:
            raise Violation(f"wait cycle: {cycle}")
        return False

    net.start()
    for i, prefs in enumerate(model.subscribers):
        net.add_subscriber(f"s{i}", "t", list(prefs))
    for i, prefs in enumerate(model.members):
        net.add_subscriber(f"g{i}", "t", list(prefs), group="g")
    pub = net.add_publisher("p0", "t", list(model.publisher))
    net.run_until(START)
    net.publish_at(pub, [START] * model.messages)
    loop.choose = choose
    real = ChoiceLoop.run_until

    def checked(until: float, idle: Callable[[], bool] | None = None) -> None:
        real(loop, until, lambda: check_state() or (idle is not None and idle()))

    loop.run_until = checked  # type: ignore[method-assign]
    try:
        settled = net.run_to_end(START + LIMIT, step=0.05)
        loop.choose = None
        if settled:  # what is kept for late copies expires too
            loop.run_until(loop.now + net.settings.publisher_grace + 1.0)
    except Violation as v:
        result.violations.append(str(v))
        return result
    except Runaway as e:
        result.violations.append(f"runaway: {e}")
        return result
    result.violations += net.check().violations
    if not settled and not result.violations:
        result.violations.append(f"hang: not settled {LIMIT:.0f} s after the first message")
    return result


class Violation(Exception):
    pass


@dataclass
class Report:
    model: str
    schedules: int = 0
    states: int = 0
    pruned: int = 0
    injected: dict[int, int] = field(default_factory=dict)  # faults injected -> schedules
    failures: list[tuple[dict[int, int], list[str]]] = field(default_factory=list)


def explore(model: Model, depth: int, stop_after: int = 1) -> Report:
    """Every schedule within ``depth`` deviations of the default (see the module doc)."""
    report = Report(model.name)
    expanded: dict[int, int] = {}  # state hash -> the most budget it was expanded with
    stack: list[tuple[dict[int, int], int]] = [({}, -1)]
    while stack:
        deviations, last = stack.pop()
        budget = depth - len(deviations)
        outcome = run(model, deviations, hash_after=last if budget > 0 else None)
        report.schedules += 1
        report.injected[outcome.injected] = report.injected.get(outcome.injected, 0) + 1
        if outcome.violations:
            report.failures.append((deviations, outcome.violations))
            if len(report.failures) >= stop_after:
                break
        if budget <= 0:
            continue
        for i in range(last + 1, len(outcome.points)):
            point = outcome.points[i]
            assert point.digest is not None
            if expanded.get(point.digest, -1) >= budget:
                report.pruned += 1
                continue
            expanded[point.digest] = budget
            for choice in range(1, point.alternatives):
                stack.append(({**deviations, i: choice}, i))
    report.states = len(expanded)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="once sim explore")
    ap.add_argument("--depth", type=int, default=2, help="choices that may deviate from the default (faults count)")
    ap.add_argument("--model", action="append", choices=sorted(MODELS), help="only these models (default: all)")
    ap.add_argument("--replay", nargs=2, metavar=("MODEL", "CHOICES"),
                    help="replay one schedule: CHOICES as point:choice,point:choice (printed with a failure)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="models explored at once")
    args = ap.parse_args(argv)
    if args.replay:
        name, text = args.replay
        deviations = {int(a): int(b) for a, b in (p.split(":") for p in text.split(",") if p)}
        outcome = run(MODELS[name], deviations)
        print(f"{name} {text}: {'PASS' if not outcome.violations else 'FAIL'}")
        for line in outcome.violations:
            print(f"  {line}")
        return 1 if outcome.violations else 0
    failed = 0
    t0 = time.monotonic()
    names = args.model or sorted(MODELS)
    one = functools.partial(_explore_one, depth=args.depth)
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        reports = pool.map(one, names)
        for report, seconds in reports:
            _print(report, seconds)
            failed += len(report.failures)
    print(f"{len(names)} models, depth {args.depth}, {failed} failed, {time.monotonic() - t0:.1f} s")
    return 1 if failed else 0


def _explore_one(name: str, depth: int) -> tuple[Report, float]:
    t0 = time.monotonic()
    report = explore(MODELS[name], depth)
    return report, time.monotonic() - t0


def _print(report: Report, seconds: float) -> None:
    name = report.model
    print(f"{name}: {report.schedules} schedules, {report.states} states expanded, {report.pruned} pruned, "
          f"{len(report.failures)} failed, {seconds:.1f} s", flush=True)
    for deviations, violations in report.failures:
        choices = ",".join(f"{i}:{c}" for i, c in sorted(deviations.items()))
        print(f"  --replay {name} '{choices}': " + "; ".join(violations), flush=True)


if __name__ == "__main__":
    sys.exit(main())
