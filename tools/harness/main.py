"""``once harness``: one scenario file, or ``--random`` fault schedules, each checked."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from once.topologies import resolve_scenario, shipped_scenarios

from .run import run
from .scenario import ScenarioError, load, randomized


def harness(args: argparse.Namespace) -> int:
    if args.random:
        try:
            kinds = tuple(k.strip() for k in args.clients.split(",") if k.strip())
            scenarios = [randomized(args.seed + i, args.messages or 10000, args.topology, groups=args.groups,
                                     freezes=args.freeze, link_faults=args.link_faults, clients=kinds)
                         for i in range(args.runs)]
        except ScenarioError as e:
            print(str(e), file=sys.stderr)
            return 2
        bare = [s.name for s in scenarios if not s.faults]
        if bare:
            # A run too short for its first fault proves nothing about failover.
            print(f"once harness: --messages {args.messages} at {scenarios[0].rate:g}/s is too short for a fault "
                  f"({', '.join(bare[:3])}{' ...' if len(bare) > 3 else ''} would have none): give at least "
                  f"{int(scenarios[0].rate * 2)} messages", file=sys.stderr)
            return 2
    elif args.scenario:
        path = resolve_scenario(args.scenario)
        if not Path(path).exists():
            print(f"once harness: no scenario {args.scenario!r}: a file, or one of {', '.join(shipped_scenarios())}",
                  file=sys.stderr)
            return 2
        try:
            scenario = load(path)
        except ScenarioError as e:
            print(str(e), file=sys.stderr)
            return 2
        scenarios = [scenario.with_messages(args.messages) if args.messages else scenario]
    else:
        print("once harness: give a scenario file or --random", file=sys.stderr)
        return 2
    # Absolute: the routers it starts run in another directory (a relative --out named
    # a topology they could not read).
    base = (Path(args.out) if args.out else Path("runs") / f"{scenarios[0].name}-{time.strftime('%Y%m%d-%H%M%S')}"
            ).resolve()
    failed = 0
    summary = []
    outs = []
    for scenario in scenarios:
        out = base / scenario.name if len(scenarios) > 1 else base
        try:
            report = run(scenario, out, progress=not args.quiet)
        except ValueError as e:
            print(f"once harness: {e}", file=sys.stderr)
            return 2
        print(report.text(), flush=True)
        summary.append(report.to_json())
        failed += not report.ok
        outs.append(out)
    if len(scenarios) > 1:
        (base / "summary.json").write_text(json.dumps(summary, indent=2))
        resumes = [r["seconds"] for s in summary for r in s["resume"] if r["seconds"] is not None]
        lost = sum(s["violations"].get("lost", 0) for s in summary)
        dup = sum(s["violations"].get("duplicated", 0) for s in summary)
        print(f"{len(scenarios)} runs: {len(scenarios) - failed} passed, {failed} failed; lost {lost}, "
              f"duplicated {dup}; time to resume max {max(resumes, default=0):.3f}s over {len(resumes)} faults")
    if getattr(args, "audit", False):
        failed += _audit(outs, args.master)
    return 1 if failed else 0


def _audit(outs: list[Path], master: str | None) -> int:
    """Audit each run on Spark (one session for all); the number of runs that failed it."""
    from pyspark.sql import SparkSession

    from ..audit.main import run_audit, verdict
    from ..audit.session import spark_session

    ours = SparkSession.getActiveSession() is None  # (a caller's session, a test's, is left running)
    spark = spark_session(master)
    failed = 0
    try:
        for out in outs:
            result = run_audit(spark, str(out))
            print(f"{out}: " + verdict(result), flush=True)
            failed += not result.ok
    finally:
        if ours:
            spark.stop()
    return failed
