"""Random fault schedules for the in-process network, and the sweep over many of them.

``PYTHONHASHSEED=0 python -m once.sim.schedules --seeds 0:10000`` runs ten
thousand schedules and prints each failing seed with its violations;
``--seed N --trace`` replays one with its fault log. (The hash seed makes set iteration,
and with it the whole run, repeatable across processes.)
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from once.records.names import is_pattern

from .clock import Runaway
from .net import SETTINGS, Fault, SimNet, Verdict

TOPOLOGIES: dict[str, list[tuple[str, str]]] = {
    "line3": [("A", "B"), ("B", "C")],
    "triangle": [("A", "B"), ("B", "C"), ("A", "C")],
    "ring4": [("A", "B"), ("B", "C"), ("C", "D"), ("A", "D")],
    "ring5": [("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("A", "E")],
    "diamond": [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D"), ("B", "C")],
}
KINDS = ("kill", "cut", "slow", "drop", "crash")


def _ring(n: int, chords: list[tuple[int, int]]) -> list[tuple[str, str]]:
    names = [chr(ord("A") + i) for i in range(n)]
    return [(names[i], names[(i + 1) % n]) for i in range(n)] + [(names[a], names[b]) for a, b in chords]


# ``--hard`` (issue 24): larger networks with chords, faults the first sweeps lacked
# (silent partitions, one way or both, longer than router_dead_after or not; paused
# routers; clock steps; publishers crashing too), and load heavy enough that credit binds.
HARD_TOPOLOGIES: dict[str, list[tuple[str, str]]] = {
    "ring6c": _ring(6, [(0, 3), (1, 4)]),
    "ring8c": _ring(8, [(0, 4), (2, 6), (1, 5)]),
    "ring10c": _ring(10, [(0, 5), (2, 7), (4, 9)]),
}
HARD_KINDS = (*KINDS, "silent", "oneway", "pause", "skew")
# Up to six faults of up to 6 s each may overlap: a subscriber out of reach that long is
# not past a grace of 30 s, and its expiry would be the rule, not a failure.
HARD_SETTINGS = replace(SETTINGS, subscriber_grace=30.0, publisher_grace=30.0)
START = 1.0  # subscribers attached, the network has converged


@dataclass
class Plan:
    """One schedule: where everything is, what is published when, what breaks when."""

    seed: int
    topology: str
    publishers: list[tuple[str, list[str]]]
    subscribers: list[tuple[str, list[str]]]
    messages: int
    interval: float
    faults: list[Fault]
    members: list[tuple[str, list[str]]] = field(default_factory=list)  # of consumer group "g"
    hard: bool = False  # drawn by ``hard_plan``: faults may add up to seconds, so graces are longer
    releases: float = 0.0  # how often a group member releases a message it is given (each at most once)
    presettled: float = 0.0  # how often a publisher sends a message pre-settled (``--presettled``)
    partition_grace: float = 0.0  # the routers' ``partition_grace`` (0: the settings', ``--gaps``)
    topics: dict[str, str] = field(default_factory=dict)  # client (or group "g") -> its topic or pattern (else "t")

    def describe(self) -> str:
        return (f"seed {self.seed}: {self.topology}, publishers {self.publishers}, subscribers {self.subscribers}, "
                + (f"group members {self.members}, " if self.members else "") +
                (f"topics {self.topics}, " if self.topics else "") +
                f"{self.messages} messages every {self.interval * 1000:.1f} ms, faults: "
                + "; ".join(str(f) for f in self.faults))


def topology_links(name: str) -> list[tuple[str, str]]:
    return TOPOLOGIES[name] if name in TOPOLOGIES else HARD_TOPOLOGIES[name]


def hard_plan(seed: int, groups: bool = False) -> Plan:
    """A harder schedule (``--hard``): any topology, heavy load, the harder faults."""
    rng = random.Random(seed * 104729 + 17)
    topology = rng.choice(sorted(TOPOLOGIES) + sorted(HARD_TOPOLOGIES))
    links = topology_links(topology)
    names = sorted({n for pair in links for n in pair})

    def prefs() -> list[str]:
        order = names[:]
        rng.shuffle(order)
        return order

    publishers = [(f"p{i}", prefs()) for i in range(rng.choice((1, 2, 3)))]
    subscribers = [(f"s{i}", prefs()) for i in range(rng.choice((1, 2, 3, 4)))]
    messages = rng.randrange(60, 300)
    interval = rng.uniform(0.0005, 0.01)  # fast enough that the window (400, 40 a link) binds
    span = messages * interval
    faults = []
    clients = [c for c, _ in publishers + subscribers]
    for _ in range(rng.randrange(1, 7)):
        kind = rng.choice(HARD_KINDS)
        at = START + rng.uniform(0.0, span)
        if kind in ("kill", "pause"):
            faults.append(Fault(at, kind, (rng.choice(names),), rng.uniform(0.05, 6.0)))
        elif kind == "skew":
            faults.append(Fault(at, kind, (rng.choice(names),), rng.uniform(0.5, 6.0), rng.uniform(-5.0, 5.0)))
        elif kind in ("cut", "slow", "silent", "oneway"):
            a, b = rng.choice(links)
            if rng.random() < 0.5:
                a, b = b, a
            faults.append(Fault(at, kind, (a, b), rng.uniform(0.05, 6.0), rng.uniform(0.005, 0.08)))
        elif kind == "drop":
            faults.append(Fault(at, kind, (rng.choice(clients),)))
        else:  # crash: a subscriber's or a publisher's process
            faults.append(Fault(at, kind, (rng.choice(clients),), rng.uniform(0.05, 3.0)))
    members: list[tuple[str, list[str]]] = []
    if groups:
        for i in range(rng.choice((2, 3))):
            members.append((f"g{i}", prefs()))
        for _ in range(rng.randrange(0, 3)):
            victim = rng.choice(members)[0]
            kind = rng.choice(("drop", "crash"))
            faults.append(Fault(START + rng.uniform(0.0, span), kind, (victim,), rng.uniform(0.05, 1.5)))
    return Plan(seed, topology, publishers, subscribers, messages, interval, sorted(faults, key=lambda f: f.at),
                members, hard=True)


def plan(seed: int, choose: Callable[..., object] | None = None, groups: bool = False) -> Plan:
    """A schedule drawn from ``seed`` (``choose``: hypothesis's draw, for shrinking).
    ``groups``: two or three more subscribers, members of one consumer group, and a fault
    or two on them, drawn apart (the seed's schedule is otherwise the same)."""
    rng = random.Random(seed)
    topology = rng.choice(sorted(TOPOLOGIES))
    names = sorted({n for pair in TOPOLOGIES[topology] for n in pair})

    def prefs() -> list[str]:
        order = names[:]
        rng.shuffle(order)
        return order

    publishers = [(f"p{i}", prefs()) for i in range(rng.choice((1, 1, 2)))]
    subscribers = [(f"s{i}", prefs()) for i in range(rng.choice((1, 2, 2, 3)))]
    messages = rng.randrange(20, 80)
    interval = rng.uniform(0.002, 0.03)
    span = messages * interval
    faults = []
    for _ in range(rng.randrange(1, 5)):
        kind = rng.choice(KINDS)
        at = START + rng.uniform(0.0, span)
        if kind == "kill":
            faults.append(Fault(at, kind, (rng.choice(names),), rng.uniform(0.05, 2.5)))
        elif kind in ("cut", "slow"):
            a, b = rng.choice(TOPOLOGIES[topology])
            faults.append(Fault(at, kind, (a, b), rng.uniform(0.05, 2.0), rng.uniform(0.005, 0.08)))
        elif kind == "drop":
            faults.append(Fault(at, kind, (rng.choice(publishers + subscribers)[0],)))
        else:
            faults.append(Fault(at, kind, (rng.choice(subscribers)[0],), rng.uniform(0.05, 1.5)))
    members: list[tuple[str, list[str]]] = []
    if groups:
        own = random.Random(seed * 7919 + 1)
        order = names[:]
        for i in range(own.choice((2, 3))):
            own.shuffle(order)
            members.append((f"g{i}", order[:]))
        for _ in range(own.randrange(0, 3)):
            at = START + own.uniform(0.0, span)
            victim = own.choice(members)[0]
            if own.random() < 0.5:
                faults.append(Fault(at, "drop", (victim,)))
            else:
                faults.append(Fault(at, "crash", (victim,), own.uniform(0.05, 1.5)))
    return Plan(seed, topology, publishers, subscribers, messages, interval, sorted(faults, key=lambda f: f.at),
                members)


class ProcessorTimeCap(Exception):
    """A schedule ran past its processor-time cap: a hang, and a failure like any other."""


# Processor time one schedule may take (a schedule takes milliseconds, the slowest seen about a
# second). Past it the run is stopped and counts as a failure: hangs are failures. (Short
# enough that a sweep of a few thousand with one hang in it still finishes in seconds.) The
# simulator never waits on anything but itself, so a hang spends processor time; counting that
# rather than wall time keeps a loaded machine (a sweep beside a build) from reading slow
# schedules as hangs.
CPU_CAP = 10.0


def _over_cap(signum: int, frame: object) -> None:
    raise ProcessorTimeCap


def run(p: Plan, limit: float = 60.0, cpu_cap: float = CPU_CAP) -> tuple[SimNet, Verdict]:
    """Run one schedule and judge it. ``cpu_cap``: seconds of processor time it may take (0: no
    cap; the cap needs the main thread, where the sweep's workers run it)."""
    capped = cpu_cap > 0 and threading.current_thread() is threading.main_thread()
    if capped:
        previous = signal.signal(signal.SIGPROF, _over_cap)
        signal.setitimer(signal.ITIMER_PROF, cpu_cap)
    try:
        return _run(p, limit)
    except ProcessorTimeCap:
        net = SimNet(p.seed, topology_links(p.topology))
        return net, Verdict([f"hang: still running after {cpu_cap:.0f} s of processor time (the cap)"])
    finally:
        if capped:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)


def _run(p: Plan, limit: float) -> tuple[SimNet, Verdict]:
    base = HARD_SETTINGS if p.hard else SETTINGS
    if p.partition_grace:
        base = replace(base, partition_grace=p.partition_grace)
    net = SimNet(p.seed, topology_links(p.topology), base)
    net.releases = p.releases
    net.presettled = p.presettled
    net.start()
    for name, prefs in p.subscribers:
        net.add_subscriber(name, p.topics.get(name, "t"), prefs)
    net.group_topic = p.topics.get("g", "t")
    for name, prefs in p.members:
        net.add_subscriber(name, net.group_topic, prefs, group="g")
    pubs = [net.add_publisher(name, p.topics.get(name, "t"), prefs) for name, prefs in p.publishers]
    net.run_until(START)
    for pub in pubs:
        net.publish_at(pub, [START + i * p.interval for i in range(p.messages)])
    for f in p.faults:
        net.schedule(f)
    end = max([START + p.messages * p.interval] + [f.at + f.duration for f in p.faults])
    try:
        net.run_until(end)
        settled = net.run_to_end(end + limit)
    except Runaway as e:
        verdict = net.check()
        verdict.violations.append(f"runaway: {e}")
        return net, verdict
    if settled:  # what is kept for late copies (placeholders, moved-away keys, tombstones) expires too
        # (a tombstone a destination kept for its root starts its grace once that root settled it)
        until = net.loop.now + limit
        while net.awaiting_roots() and net.loop.now < until:
            net.run_until(net.loop.now + 0.25)
        net.run_until(net.loop.now + net.settings.publisher_grace + 1.0)
        # (a subscriber that attached again late, after a gap, left placeholders due later)
        due = max((r.core.placeholders.last_deadline() for r in net.routers.values() if r.alive), default=0.0)
        if due + 1.0 > net.loop.now:  # (housekeeping forgets them on its next tick past it)
            net.run_until(due + 1.0)
        net.tombstones_checked = True
    verdict = net.check()
    if not settled and verdict.ok:
        verdict.violations.append(f"stalled: not settled {limit:.0f} s after the last fault")
    return net, verdict


# ``--releases``: a member releases about one message in ten it is given (each at most once)
RELEASES = 0.1


def with_churn(p: Plan, releases: bool = False, leaves: bool = False, joins: bool = False) -> Plan:
    """A consumer group's members change during the run, each change drawn from its own
    stream (the rest of the seed's schedule stays the same). ``releases``: they release
    one message in ten they are given; ``leaves``: one of two or more closes its link for
    good; ``joins``: one more member joins, on routers in an order drawn too."""
    p.releases = RELEASES if releases else 0.0
    extra = []
    for wanted, kind in ((leaves and len(p.members) >= 2, "leave"), (joins and bool(p.members), "join")):
        if wanted:
            own = random.Random(f"{p.seed}/{kind}")
            at = START + own.uniform(0.0, max(p.messages * p.interval, 0.5))
            if kind == "leave":
                extra.append(Fault(at, kind, (own.choice(p.members)[0],)))
            else:
                order = sorted({n for pair in topology_links(p.topology) for n in pair})
                own.shuffle(order)
                extra.append(Fault(at, kind, ("g9", *order)))
    p.faults = sorted([*p.faults, *extra], key=lambda f: f.at)
    return p


# ``--presettled``: a publisher sends about one message in four pre-settled (at most once),
# mixed with unsettled ones on its one link
PRESETTLED = 0.25


def with_presettled(p: Plan) -> Plan:
    """Publishers send some messages pre-settled, mixed with unsettled ones on one link
    (which, drawn from each publisher's own stream: the rest of the schedule stays the
    same). They are owed to nobody (at most once), never handed twice, and keep their
    publisher's order among the others."""
    p.presettled = PRESETTLED
    return p


def with_long_cut(p: Plan) -> Plan:
    """One more fault (``--long-cuts``), drawn from its own stream (the rest of the seed's
    schedule stays the same): a link cut (or, in ``--hard``, silent) for longer than both
    graces, so routers on either side give up on what is behind it by their own clocks
    while its clients go on, attached, on the other side."""
    own = random.Random(f"{p.seed}/long-cut")
    settings = HARD_SETTINGS if p.hard else SETTINGS
    grace = max(settings.subscriber_grace, settings.publisher_grace)
    a, b = own.choice(topology_links(p.topology))
    if own.random() < 0.5:
        a, b = b, a
    kind = own.choice(("cut", "silent")) if p.hard else "cut"
    at = START + own.uniform(0.0, max(p.messages * p.interval, 0.5))
    p.faults = sorted([*p.faults, Fault(at, kind, (a, b), grace + own.uniform(1.0, 10.0))], key=lambda f: f.at)
    return p


# ``--patterns``: publishers on topics, subscribers on topics and patterns of them
# (``records/names.py``); the checker owes each subscriber what its name matches.
PATTERN_TOPICS = ("t/a", "t/b", "t/a/x")
PATTERN_NAMES = ("t/a", "t/+", "t/#", "+/b", "#", "t/a/+", "t/+/x")


def with_patterns(p: Plan) -> Plan:
    """Publishers on two or three topics, subscribers on topics and patterns, one of them a
    pattern at least, drawn from their own stream (the rest of the seed's schedule stays the
    same). Consumer group ``g`` is on one of the publishers' topics or on a pattern."""
    own = random.Random(f"{p.seed}/patterns")
    p.topics = {name: own.choice(PATTERN_TOPICS) for name, _ in p.publishers}
    p.topics["g"] = own.choice([*sorted(set(p.topics.values())), "t/+", "t/#"])
    p.topics.update({name: own.choice(PATTERN_NAMES) for name, _ in p.subscribers})
    if p.subscribers and not any(is_pattern(p.topics[name]) for name, _ in p.subscribers):
        p.topics[p.subscribers[0][0]] = own.choice([n for n in PATTERN_NAMES if is_pattern(n)])
    return p


# ``--gaps``: the long cut's routers give up what is behind it this long after its grace
# (``partition_grace``), so the cut outlasts both: subscriptions are given up as gaps
GAPS_PARTITION_GRACE = 2.0


def with_gaps(p: Plan) -> Plan:
    """``--gaps``: a long cut (``with_long_cut``) that outlasts the graces and
    ``partition_grace``: a subscriber that moved across it is given up where it was, and its
    live attach is told (its link ends with ``once:subscription-gap``)."""
    p.partition_grace = GAPS_PARTITION_GRACE
    with_long_cut(p)
    # publishing goes on through the cut, the give-up and the heal: what the gap's roots
    # accept without the key is what its subscriber is told it missed
    cut = max(p.faults, key=lambda f: f.duration)
    p.interval = max(p.interval, (cut.at + cut.duration + 3.0 - START) / p.messages)
    return p


def with_elastic(p: Plan) -> Plan:
    """The network changes while it runs (issue 51), each change drawn from its own stream
    (the rest of the seed's schedule stays the same): a router stops cleanly (it leaves)
    and starts again later; a link between two routers that had none is added (SIGHUP) and
    removed again; a router no file names joins, linked to two others, takes the clients
    that fail over to it (last in about half the clients' lists), and leaves."""
    own = random.Random(f"{p.seed}/elastic")
    links = {frozenset(pair) for pair in topology_links(p.topology)}
    names = sorted({n for pair in links for n in pair})
    span = max(p.messages * p.interval, 0.5)
    extra = [Fault(START + own.uniform(0.0, span), "stop", (own.choice(names),), own.uniform(0.5, 6.0))]
    unlinked = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if frozenset((a, b)) not in links]
    if unlinked:
        extra.append(Fault(START + own.uniform(0.0, span), "relink", own.choice(unlinked), own.uniform(0.5, 8.0)))
    extra.append(Fault(START + own.uniform(0.0, span), "newrouter", (JOINER, *own.sample(names, 2)),
                       own.uniform(0.5, 8.0)))
    for _, prefs in [*p.publishers, *p.subscribers, *p.members]:
        if own.random() < 0.5:
            prefs.append(JOINER)
    p.faults = sorted([*p.faults, *extra], key=lambda f: f.at)
    return p


JOINER = "X"  # (the router that joins: no topology names it; they name theirs from A to J)


def build(seed: int, groups: bool = False, hard: bool = False, releases: bool = False, leaves: bool = False,
          joins: bool = False, patterns: bool = False, long_cuts: bool = False, presettled: bool = False,
          gaps: bool = False, elastic: bool = False) -> Plan:
    """The schedule ``once sim`` runs for ``seed`` with these options."""
    p = hard_plan(seed, groups) if hard else plan(seed, groups=groups)
    with_churn(p, releases, leaves, joins)
    if elastic:
        with_elastic(p)
    if patterns:
        with_patterns(p)
    if gaps:
        with_gaps(p)
    elif long_cuts:
        with_long_cut(p)
    if presettled:
        with_presettled(p)
    return p


def _one(seed: int, /, **modes: bool) -> tuple[int, list[str], int]:
    _, v = run(build(seed, **modes))
    return seed, v.violations, v.events


def sweep(seeds: range, jobs: int = 1, **modes: bool) -> dict[int, list[str]]:
    failed: dict[int, list[str]] = {}
    one = functools.partial(_one, **modes)
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = pool.map(one, seeds, chunksize=50)
            for seed, violations, _ in results:
                if violations:
                    failed[seed] = violations
    else:
        for seed in seeds:
            _, violations, _ = one(seed)
            if violations:
                failed[seed] = violations
    return failed


def fingerprint(seeds: range, groups: bool = False, hard: bool = False) -> str:
    """One digest of these runs: what happened when, and what each found wrong.

    The simulator is deterministic (``PYTHONHASHSEED`` fixed): two builds that behave alike
    (pure Python, compiled) give the same digest for the same seeds.
    """
    h = hashlib.sha256()
    for seed in seeds:
        p = hard_plan(seed, groups) if hard else plan(seed, groups=groups)
        net, v = run(p)
        h.update(repr((seed, v.events, v.end, v.published, v.violations, net.log)).encode())
    return h.hexdigest()


MODES = ("groups", "hard", "releases", "leaves", "joins", "patterns", "long_cuts", "presettled", "gaps", "elastic")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="once sim")
    ap.add_argument("--seeds", default="0:1000", help="a range a:b of seeds")
    ap.add_argument("--seed", type=int, help="replay this one seed")
    ap.add_argument("--trace", action="store_true", help="with --seed: print the plan and the fault log")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", dest="json_path", help="write {seed: violations} of the failing schedules here")
    ap.add_argument("--groups", action="store_true", help="schedules with a consumer group of two or three members")
    ap.add_argument("--hard", action="store_true", help="harder schedules: networks of 6-10 routers with chords, "
                    "silent and one-way partitions, paused routers, clock steps, publisher crashes, heavy load")
    ap.add_argument("--fresh", type=int, metavar="N", help="N schedules from a new random range of seeds (printed "
                    "first, so a failure replays with --seed): seeds the suite never ran")
    ap.add_argument("--releases", action="store_true", help="with --groups: members release some of the "
                    "messages they are given (AMQP released), each at most once; each goes to another member, "
                    "or back to one once every member released it")
    ap.add_argument("--leaves", action="store_true", help="with --groups: one member closes its link for good; "
                    "what it had not accepted goes to another member")
    ap.add_argument("--joins", action="store_true", help="with --groups: one more member joins during the run")
    ap.add_argument("--patterns", action="store_true", help="publishers on several topics, subscribers on "
                    "topics and patterns of them ('+', '#'), each owed what its name matches")
    ap.add_argument("--long-cuts", action="store_true", help="one more fault: a link cut (in --hard, or "
                    "silent) for longer than both graces, its clients going on on either side")
    ap.add_argument("--presettled", action="store_true", help="publishers send about one message in four "
                    "pre-settled (at most once), mixed with unsettled ones on one link")
    ap.add_argument("--gaps", action="store_true", help="a long cut that outlasts partition_grace too: "
                    "subscriptions behind it are given up as gaps, and their live links told")
    ap.add_argument("--elastic", action="store_true", help="the network changes while it runs: a router stops "
                    "cleanly (it leaves) and starts again, a link is added by SIGHUP and removed, a router no "
                    "file names joins (some clients fail over to it) and leaves")
    ap.add_argument("--fingerprint", action="store_true", help="print one digest of the runs of --seeds (the "
                    "same in every build that behaves alike: pure Python and compiled)")
    args = ap.parse_args(argv)
    if args.fingerprint:
        a, _, b = args.seeds.partition(":")
        print(fingerprint(range(int(a), int(b)), groups=args.groups, hard=args.hard))
        return 0
    modes = {name: getattr(args, name) for name in MODES}
    if args.seed is not None:
        p = build(args.seed, **modes)
        net, v = run(p)
        if args.trace:
            print(p.describe())
            print("\n".join(net.log))
        print(f"seed {args.seed}: {'PASS' if v.ok else 'FAIL'} ({v.events} events, {v.end:.2f} s virtual)")
        for line in v.violations:
            print(f"  {line}")
        return 0 if v.ok else 1
    if args.fresh is not None:
        start = random.SystemRandom().randrange(10**6, 10**12)
        seeds = range(start, start + args.fresh)
        print(f"fresh seeds {start}:{start + args.fresh}"
              + "".join(f" --{name.replace('_', '-')}" for name, on in modes.items() if on), flush=True)
    else:
        a, _, b = args.seeds.partition(":")
        seeds = range(int(a), int(b))
    t0 = time.monotonic()
    failed = sweep(seeds, args.jobs, **modes)
    for seed, violations in sorted(failed.items()):
        print(f"seed {seed}: " + "; ".join(violations))
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({str(k): v for k, v in sorted(failed.items())}, f, indent=1)
    print(f"{len(seeds)} schedules, {len(failed)} failed, {time.monotonic() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
