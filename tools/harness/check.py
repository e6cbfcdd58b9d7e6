"""The harness's verdict, from the clients' own records (DESIGN.md "Invariants").

For every message a publisher saw accepted (an outbox application: every row it committed),
every subscriber got it: exactly once (our
client, and MQTT clients at QoS 2), or at least once with every repeat marked as a redelivery (standard clients);
first arrivals in publish order per publisher; nothing arrives that was never sent.
A consumer group counts as one subscriber: its members together got every message, once
(a repeat at any member is a duplicate for our client, allowed marked for a standard
one), and each member's first arrivals that are not marked are in publish order.
``check`` is pure: records in, report out.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from once.records.names import matches

# Clients that promise exactly once: ours, MQTT at QoS 2 with a persistent session, and
# the outbox (its relays publish through ours)
EXACTLY_ONCE = frozenset({"once", "mqtt", "outbox"})


@dataclass(frozen=True, slots=True)
class Arrival:
    id: str
    redelivered: bool
    t: float


@dataclass
class SubscriberReport:
    name: str
    client: str
    received: int = 0  # arrivals, repeats included
    distinct: int = 0
    lost: int = 0
    duplicated: int = 0  # repeats that break the client's promise (any for ours, unmarked for standard)
    marked_repeats: int = 0  # repeats a standard client is allowed (marked as redeliveries)
    publisher_retries: int = 0  # repeats of a standard publisher's own resends (new deliveries, at-least-once)
    reordered: int = 0
    phantom: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Report:
    scenario: str
    sent: int = 0
    accepted: int = 0
    rejected: int = 0
    subscribers: list[SubscriberReport] = field(default_factory=list)
    resume: list[dict[str, Any]] = field(default_factory=list)  # per fault: what, when, seconds to resume
    errors: list[str] = field(default_factory=list)
    # the network's changes as its routers logged them ("A: router B left the network"):
    # a scenario that stops, joins or links routers shows they happened
    network: list[str] = field(default_factory=list)
    boot_s: float = 0.0  # from starting the routers to every one ready
    rss_kib: dict[str, int] = field(default_factory=dict)  # each router's resident memory as the run ended

    @property
    def violations(self) -> dict[str, int]:
        total: dict[str, int] = defaultdict(int)
        for s in self.subscribers:
            for kind in ("lost", "duplicated", "reordered", "phantom"):
                total[kind] += getattr(s, kind)
        total["rejected"] = self.rejected
        return dict(total)

    @property
    def ok(self) -> bool:
        return not self.errors and not any(self.violations.values())

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "ok": self.ok, "sent": self.sent, "accepted": self.accepted,
                "rejected": self.rejected, "violations": self.violations,
                "subscribers": [vars(s) for s in self.subscribers], "resume": self.resume, "errors": self.errors,
                "network": self.network, "boot_s": round(self.boot_s, 3), "rss_kib": self.rss_kib}

    def text(self) -> str:
        lines = [f"scenario {self.scenario}: sent {self.sent}, accepted {self.accepted}, rejected {self.rejected}"]
        for s in self.subscribers:
            lines.append(f"  {s.name} ({s.client}): received {s.received} ({s.distinct} distinct), lost {s.lost}, "
                         f"duplicated {s.duplicated}, marked repeats {s.marked_repeats}, reordered {s.reordered}, "
                         f"phantom {s.phantom}"
                         + (f", publisher retries {s.publisher_retries}" if s.publisher_retries else ""))
            for kind, ids in s.examples.items():
                lines.append(f"    first {kind}: {', '.join(ids)}")
        for r in self.resume:
            took = "no traffic after it" if r["seconds"] is None else f"{r['seconds']:.3f}s"
            lines.append(f"  fault at {r['at']:.2f}s, {r['fault']}: resumed after {took} ({r['by']})")
        for e in self.errors:
            lines.append(f"  error: {e}")
        lines.append("PASS" if self.ok else f"FAIL: {', '.join(f'{k} {v}' for k, v in self.violations.items() if v)}"
                     + ("; errors" if self.errors else ""))
        return "\n".join(lines)


def _seq(mid: str) -> tuple[str, int]:
    pub, _, seq = mid.rpartition(":")
    return pub, int(seq) if seq.isdigit() else -1


def check(scenario: str, publishers: dict[str, list[dict[str, Any]]], subscribers: dict[str, tuple[str, list[Arrival]]],
          faults: list[dict[str, Any]] | None = None, homes: dict[str, str] | None = None,
          retrying: set[str] | frozenset[str] = frozenset(), groups: dict[str, list[str]] | None = None,
          topics: dict[str, str] | None = None) -> Report:
    """``publishers``: name -> its events; ``subscribers``: name -> (client kind, arrivals in
    order); ``faults``: {"at" (wall clock), "t" (seconds into the run), "fault", "router"?};
    ``retrying``: standard publishers, whose resends after a failover are new deliveries
    of the same message id (a repeat of theirs is a publisher retry, not a duplicate);
    ``topics``: client -> its topic (a subscriber's may be a pattern): a subscriber is owed
    the messages of the publishers its topic matches (without it: of every publisher)."""
    report = Report(scenario)
    sent: set[str] = set()
    resent: set[str] = set()  # a standard publisher's message ids it sent more than once
    accepted: set[str] = set()
    progress: dict[str, list[float]] = {}
    for name, events in publishers.items():
        times = []
        for e in events:
            if e["e"] == "sent":
                if e["id"] in sent and name in retrying:
                    resent.add(e["id"])
                sent.add(e["id"])
            elif e["e"] == "accepted":
                accepted.add(e["id"])
                times.append(e["t"])
            elif e["e"] == "committed":  # (an outbox row: owed from its commit, and sent by it)
                sent.add(e["id"])
                accepted.add(e["id"])
                times.append(e["t"])
            elif e["e"] == "rejected":
                report.rejected += 1
        progress[name] = sorted(times)
    report.sent, report.accepted = len(sent), len(accepted)
    members = {m for ms in (groups or {}).values() for m in ms}

    def owed(name: str, ids: set[str]) -> set[str]:
        if not topics or name not in topics:
            return ids
        return {m for m in ids if matches(topics[name], topics.get(_seq(m)[0], topics[name]))}

    for group, names in (groups or {}).items():
        report.subscribers.append(_unit_report(f"group {group}", {n: subscribers[n] for n in names if n in subscribers},
                                               owed(names[0], sent), owed(names[0], accepted), retrying, resent,
                                               grouped=True))
        for n in names:
            if n in subscribers:
                progress[n] = sorted(a.t for a in subscribers[n][1])
    for name, (client, arrivals) in subscribers.items():
        if name in members:
            continue
        report.subscribers.append(_unit_report(name, {name: (client, arrivals)}, owed(name, sent), owed(name, accepted),
                                               retrying, resent))
        progress[name] = sorted(a.t for a in arrivals)
    homes = homes or {}
    faults = faults or []
    for n, f in enumerate(faults):
        # A pause that begins after the next fault is that fault's doing, not this one's.
        # (Traffic in flight stops a little before the kill is logged: a pause that begins
        # within MARGIN of the next fault is charged to that one.)
        # (On the journal's clock, whole microseconds, as the audit: a fault that stops nothing
        # leaves many pauses alike, and a microsecond's rounding must not pick another one.)
        at = int(f["at"] * 1e6)
        until = int(faults[n + 1]["at"] * 1e6) - int(MARGIN * 1e6) if n + 1 < len(faults) else None
        affected = [c for c, home in homes.items() if f.get("router") is not None and home == f["router"]]
        if f.get("client"):
            affected = [f["client"]]
            group = next((ms for ms in (groups or {}).values() if f["client"] in ms), None)
            if group is not None and "kill" in f["fault"]:
                # a group member's death: the group resumes when the others take its share
                # over (an exclusive group: the standby that becomes active)
                affected = [m for m in group if m != f["client"]]
        if f.get("streams"):
            affected = list(f["streams"])
        worst: float | None = None
        by = "no client traffic after it"
        for c in affected or list(progress):
            end = _pause_end([int(t * 1e6) for t in progress.get(c, [])], at, window=10_000_000, until=until)
            if end is not None and (worst is None or (end - at) / 1e6 > worst):
                worst = (end - at) / 1e6
                by = f"{c}'s longest pause ended"
        report.resume.append({"at": f["t"], "fault": f["fault"], "seconds": worst, "by": by})
    return report


MARGIN = 0.25


def _unit_report(label: str, members: dict[str, tuple[str, list[Arrival]]], sent: set[str], accepted: set[str],
                 retrying: set[str] | frozenset[str], resent: set[str] | frozenset[str] = frozenset(),
                 grouped: bool = False) -> SubscriberReport:
    """One subscriber, or a consumer group's members together (``grouped``): each message
    once across them (a repeat after one of our clients had it is a duplicate; after a
    standard client it must be marked); first arrivals in publish order at each member,
    in a group leaving out the marked ones (passed on from another member, they come late)."""
    kinds = {client for client, _ in members.values()}
    s = SubscriberReport(label, "/".join(sorted(kinds)))
    merged = [(a, name, client) for name, (client, arrivals) in members.items() for a in arrivals]
    if len(members) > 1:
        merged.sort(key=lambda x: x[0].t)
    s.received = len(merged)
    seen: set[str] = set()
    by_once: set[str] = set()  # processed by one of our clients: never again, by anyone
    examples: dict[str, list[str]] = defaultdict(list)
    at = (lambda a, m: f"{a.id}@{m}") if grouped else (lambda a, m: a.id)
    for a, member, client in merged:
        if a.id not in sent:
            s.phantom += 1
            examples["phantom"].append(a.id)
        if a.id in seen:
            if a.id in resent:  # (only a message its publisher sent again: else the network's repeat)
                s.publisher_retries += 1
            elif a.id in by_once or not a.redelivered:
                s.duplicated += 1
                examples["duplicated"].append(at(a, member))
            else:
                # a standard client had it and may have died before accepting: at-least-once
                s.marked_repeats += 1
        seen.add(a.id)
        if client in EXACTLY_ONCE:
            by_once.add(a.id)
    for name, (_, arrivals) in members.items():
        last: dict[str, int] = {}
        firsts: set[str] = set()
        for a in arrivals:
            # (a standard publisher's resend is a new message to the network, published
            # after newer ones: it may come after them, alone if the first copy never got
            # through, and in a group at another member than the first copy; counted as a
            # publisher retry, not judged for order)
            if a.id in firsts or (grouped and a.redelivered) or a.id in resent:
                continue
            firsts.add(a.id)
            pub, seq = _seq(a.id)
            if seq < last.get(pub, -1):
                s.reordered += 1
                examples["reordered"].append(at(a, name))
            last[pub] = max(seq, last.get(pub, -1))
    s.distinct = len(seen)
    missing = sorted(accepted - seen, key=_seq)
    s.lost = len(missing)
    examples["lost"] = missing
    s.examples = {k: v[:5] for k, v in examples.items() if v}
    return s


def _pause_end(times: list[float], at: float, window: float = 10.0, until: float | None = None) -> float | None:
    """When a client's traffic resumed after a fault: the end of the longest pause in its
    events from the last one before ``at`` to ``window`` after (in the times' unit), among the pauses
    that began before ``until`` (the next fault). (The first event after the fault is no
    measure: outcomes already on the wire still arrive.)"""
    i = bisect.bisect_right(times, at)
    if i >= len(times) or times[i] > at + window:
        return None
    best_gap, best_end = -1.0, None
    for j in range(i, len(times)):
        prev = times[j - 1] if j else at  # (nothing before the fault: the pause from it counts)
        if times[j] > at + window or (until is not None and prev >= until):
            break
        gap = times[j] - max(prev, at)
        if gap > best_gap:
            best_gap, best_end = gap, times[j]
    if best_end is None:
        best_end = times[i]
    return best_end


def read_records(out: Path, subscribers: dict[str, str]) -> tuple[dict[str, list[dict[str, Any]]],
                                                                    dict[str, tuple[str, list[Arrival]]]]:
    """What the client processes wrote under ``out`` (``subscribers``: name -> client kind)."""
    pubs: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out.glob("pub-*.jsonl")):
        name = path.stem.removeprefix("pub-")
        pubs[name] = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    subs: dict[str, tuple[str, list[Arrival]]] = {}
    for name, client in subscribers.items():
        arrivals: list[Arrival] = []
        if client == "once":
            db_path = out / f"sub-{name}.db"
            if db_path.exists():
                db = sqlite3.connect(db_path)
                try:
                    rows = db.execute("SELECT id, redelivered, t FROM received ORDER BY n").fetchall()
                except sqlite3.OperationalError:
                    rows = []
                db.close()
                arrivals = [Arrival(r[0], bool(r[1]), r[2]) for r in rows]
        else:
            path = out / f"sub-{name}.jsonl"
            if path.exists():
                for line in path.read_text().splitlines():
                    if line.endswith("}"):
                        d = json.loads(line)
                        if "id" not in d:
                            continue  # (an MQTT subscriber's PUBREL line)
                        # Marked: delivery-count raised, the router's mark of a possible
                        # repeat. (Not first-acquirer false alone: that is AMQP's default for
                        # a message published without a header, as MQTT's and most clients'
                        # are, and judged so every arrival was a marked repeat: a duplicate
                        # could never show.)
                        arrivals.append(Arrival(d["id"], d["count"] > 0, d["t"]))
        subs[name] = (client, arrivals)
    return pubs, subs
