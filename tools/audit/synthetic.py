"""Synthetic journals: a run's worth of rows with chosen violations injected.

For the audit's tests (each kind caught with the right count) and its scale figure:
``python -m once.tools.audit.synthetic OUT --rows 10000000``. One publisher on router A, the
path A -> B, subscribers s1 and s2 on B; 12 rows per message.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from once.router.journal import HEADER

ROWS_PER_MESSAGE = 12


@dataclass(frozen=True)
class Inject:
    lost: int = 0  # s1 never receives these
    duplicated: int = 0  # s1 receives these twice, the repeat unmarked
    reordered: int = 0  # s1 receives these pairs swapped (one reordered arrival each)
    phantom: int = 0  # s1 receives deliveries nobody sent
    early_acceptance: int = 0  # s2 accepts after the publisher was told accepted
    rejected: int = 0  # the publisher is told rejected


def _gid(n: int) -> str:
    return hashlib.blake2b(n.to_bytes(8, "big"), digest_size=16).hexdigest()


def generate(out: Path, messages: int, inject: Inject = Inject(), t0_us: int = 1_800_000_000_000_000,
             rate: int = 20_000) -> int:
    """Write ``out/journal/``; return the number of rows."""
    j = out / "journal"
    j.mkdir(parents=True, exist_ok=True)
    # Disjoint ranges of message numbers for each kind, after the first 10 clean ones.
    spans: dict[str, range] = {}
    start = 10
    for kind in ("lost", "duplicated", "reordered", "early_acceptance", "rejected"):
        n = getattr(inject, kind) * (2 if kind == "reordered" else 1)
        spans[kind] = range(start, start + n)
        start += n + 5
    if start > messages:
        raise ValueError(f"{messages} messages are too few for these injections")
    swapped = {i: (i + 1 if (i - spans["reordered"].start) % 2 == 0 else i - 1) for i in spans["reordered"]}
    step = max(1, 1_000_000 // rate)
    files = {name: open(j / f"{name}.csv", "w") for name in ("publisher-p1", "router-A", "router-B", "subscriber-s1",
                                                              "subscriber-s2")}
    rows = 0
    try:
        for f in files.values():
            f.write(HEADER)
        buf: dict[str, list[str]] = {k: [] for k in files}
        for i in range(messages):
            g, mid, t = _gid(i), f"p1:{i}", t0_us + i * step
            pub, ra, rb, s1, s2 = (buf[k] for k in files)
            # Times inside a message are spread so that every file's clock strictly increases.
            pub.append(f"{t},publisher,p1,sent,{g},{mid},t,\n")
            ra.append(f"{t + 10},router,A,received,{g},,t,client\n{t + 11},router,A,forwarded,{g},,t,B\n")
            rb.append(f"{t + 20},router,B,received,{g},,t,A\n")
            rows += 4
            if i not in spans["lost"]:
                k = swapped.get(i, i)  # a swapped pair trades arrival slots
                tr = t0_us + k * step + 30 + (1 if k != i and k > i else 0)
                s1.append(f"{tr},subscriber,s1,received,{g},{mid},t,\n{tr + 2},subscriber,s1,accepted,{g},{mid},t,\n")
                rows += 2
            if i in spans["duplicated"]:
                s1.append(f"{t + 34},subscriber,s1,received,{g},{mid},t,\n")
                rows += 1
            late = i in spans["early_acceptance"]
            s2.append(f"{t + 31},subscriber,s2,received,{g},{mid},t,\n"
                      f"{t + (60 if late else 33)},subscriber,s2,accepted,{g},{mid},t,\n")
            outcome = "rejected" if i in spans["rejected"] else "accepted"
            to = t + (step if i in swapped else 0)  # a late arrival is answered late, not early
            rb.append(f"{to + 40},router,B,{outcome},{g},,t,\n")
            ra.append(f"{to + 45},router,A,{outcome},{g},,t,\n")
            pub.append(f"{to + 50},publisher,p1,{outcome},{g},{mid},t,\n")
            ra.append(f"{to + 55},router,A,settled,{g},,t,\n")
            rows += 6
            if len(pub) >= 20_000:
                _write(files, buf)
        for n in range(inject.phantom):
            t = t0_us + messages * step + 100 + n * 10
            buf["subscriber-s1"].append(f"{t},subscriber,s1,received,{_gid(10**12 + n)},ghost:{n},t,\n")
            rows += 1
        _write(files, buf)
    finally:
        for f in files.values():
            f.close()
    (j / "clients.json").write_text(json.dumps({
        "p1": {"role": "publisher", "topic": "t", "guarantee": "exactly-once", "router": "A"},
        "s1": {"role": "subscriber", "topic": "t", "guarantee": "exactly-once", "router": "B"},
        "s2": {"role": "subscriber", "topic": "t", "guarantee": "exactly-once", "router": "B"}}))
    (j / "faults.json").write_text("[]")
    return rows


def _write(files: dict, buf: dict[str, list[str]]) -> None:
    """Each file's buffered rows, in time order (a file's clock must increase)."""
    for k, f in files.items():
        f.write("".join(sorted(buf[k], key=lambda r: int(r.split(",", 1)[0]))))
        buf[k].clear()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--rows", type=int, default=1_000_000, help="about this many rows")
    a = p.parse_args()
    n = generate(Path(a.out), max(100, a.rows // ROWS_PER_MESSAGE))
    print(f"{n} rows under {a.out}/journal")


if __name__ == "__main__":
    main()
