"""``once audit RUN_DIR [RUN_DIR ...] [--master URL]``: read each run's journals, check, write
``RUN_DIR/audit/``. Several runs share one Spark session (its start-up, tens of seconds on a
cluster, is paid once)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from .job import KINDS, Result, audit, read_journal
from .report import html, summary_json


def _is_local(path: str) -> bool:
    """A plain path. Any URL, ``file://`` included, goes through Spark and Hadoop's file
    systems: the same code reads and writes hdfs://, s3a:// and the rest."""
    return "://" not in path


def _read_text(spark: Any, path: str) -> str | None:
    """A small side file of the run (faults.json, clients.json), wherever the run lives."""
    if _is_local(path):
        p = Path(path)
        return p.read_text() if p.exists() else None
    try:
        return "\n".join(r.value for r in spark.read.text(path, wholetext=True).collect())
    except Exception:  # Spark raises AnalysisException for a missing path
        return None


def _write_text(spark: Any, path: str, text: str) -> None:
    if _is_local(path):
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return
    jvm = spark._jvm  # the cluster's Hadoop file systems (hdfs://, s3a://, ...)
    target = jvm.org.apache.hadoop.fs.Path(path)
    out = target.getFileSystem(spark._jsc.hadoopConfiguration()).create(target, True)
    out.write(bytearray(text.encode()))
    out.close()


def run_audit(spark: Any, run_dir: str) -> Result:
    run_dir = run_dir.rstrip("/")
    faults = json.loads(_read_text(spark, f"{run_dir}/journal/faults.json") or "[]")
    clients = json.loads(_read_text(spark, f"{run_dir}/journal/clients.json") or "{}")
    if _is_local(run_dir):  # (what ``once send``/``recv --journal`` say they are: one file each)
        for each in sorted(Path(run_dir, "journal").glob("client-*.json")):
            clients.update(json.loads(each.read_text()))
    result = audit(spark, read_journal(spark, run_dir), clients, faults)
    result.summary["run"] = run = _run_names(spark, run_dir, result)
    _write_text(spark, f"{run_dir}/audit/summary.json", summary_json(result))
    _write_text(spark, f"{run_dir}/audit/report.html", html(result, run_dir, run))
    return result


def _run_names(spark: Any, run_dir: str, result: Result) -> dict[str, Any]:
    """What names a run: the harness's scenario, the routers of its topology, when it ran."""
    out: dict[str, Any] = {}
    try:
        out["scenario"] = json.loads(_read_text(spark, f"{run_dir}/report.json") or "{}").get("scenario")
    except ValueError:
        pass
    try:
        routers = (yaml.safe_load(_read_text(spark, f"{run_dir}/topology.yaml") or "") or {}).get("routers")
        out["routers"] = ", ".join(sorted(routers)) if isinstance(routers, dict) else None
    except yaml.YAMLError:
        pass
    first = result.summary.get("first_us")
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(first / 1e6)) if first else None
    return out


def checked(result: Result) -> bool:
    """Whether the journals had what the invariants are checked on (clients' rows)."""
    s = result.summary
    return bool(s["sent"]) or any(s["violations"].values())


def verdict(result: Result) -> str:
    s = result.summary
    lines = [f"audit: {s['rows']} rows, sent {s['sent']}, accepted {s['accepted']}"]
    for name, v in s["latency_ms"]["end_to_end"].items():
        lines.append(f"  latency {name}: p50 {v['p50']:.2f} ms, p99 {v['p99']:.2f} ms, p99.9 {v['p99.9']:.2f} ms")
    for f in s["faults"]:
        took = "no traffic after it" if f["resume_seconds"] is None else f"resumed after {f['resume_seconds']:.3f}s"
        lines.append(f"  fault at {f['at']}s, {f['fault']}: {took}")
    bad = {k: n for k, n in s["violations"].items() if n}
    for k in KINDS:
        if k in bad:
            lines.append(f"  {k} {bad[k]}: first {', '.join(s['examples'].get(k, []))}")
    if not checked(result):
        # Router journals alone: what a message's publisher was told and what each subscriber
        # processed are in the clients' rows, so no invariant can be checked from them.
        lines.append(f"NOT CHECKED: the journals have no client rows (publishers' and subscribers'), only routers' "
                     f"({s['rows']} rows): delivery invariants need the clients' journals, as `once harness` writes "
                     "them and `once send`/`once recv --journal DIR` do; per-hop latency and throughput are in the "
                     "report")
    else:
        lines.append("PASS" if not bad else "FAIL: " + ", ".join(f"{k} {n}" for k, n in bad.items()))
    return "\n".join(lines)


def main(run_dirs: str | list[str], master: str | None = None) -> int:
    """0 if every run passed, 1 if one failed, 2 if one cannot be audited at all (no journal,
    or no client rows in it: nothing was checked, which must not read as a pass)."""
    runs = [run_dirs] if isinstance(run_dirs, str) else list(run_dirs)
    for run_dir in runs:
        if _is_local(run_dir) and not (Path(run_dir) / "journal").is_dir():
            print(f"{run_dir}: no journal/ directory (a run of `once harness`, or routers started with --journal)",
                  file=sys.stderr)
            return 2
    from pyspark.sql import SparkSession  # (``once audit`` checked it is there: ``cli.py``)

    from .session import java_problem, spark_session

    problem = java_problem() if master is None or master.startswith("local") else None
    if problem:
        print(f"once audit: {problem}", file=sys.stderr)
        return 2
    print(f"once audit: starting Spark (local mode takes 10-40 s) for {', '.join(runs)} ...", file=sys.stderr,
          flush=True)
    ours = SparkSession.getActiveSession() is None  # a caller's session (tests, a notebook) is left running
    spark = spark_session(master)
    failed = unchecked = 0
    try:
        for run_dir in runs:
            started = time.monotonic()
            result = run_audit(spark, run_dir)
            print((f"{run_dir}: " if len(runs) > 1 else "") + verdict(result))
            print(f"report: {run_dir.rstrip('/')}/audit/report.html ({time.monotonic() - started:.1f}s)", flush=True)
            failed += not result.ok
            unchecked += not checked(result)
    finally:
        if ours:
            spark.stop()
    return 1 if failed else 2 if unchecked else 0
