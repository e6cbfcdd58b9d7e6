"""The audit's outputs: ``summary.json`` (for machines) and ``report.html`` (for people)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from . import plots
from .job import KINDS, Result


def summary_json(result: Result) -> str:
    return json.dumps(result.summary, indent=2, sort_keys=False) + "\n"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(_fmt(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "" if v is None else str(v)


def html(result: Result, run_dir: str, run: dict[str, Any] | None = None) -> str:
    """``run``: what names the run (scenario, routers, date), when the run directory says."""
    s = result.summary
    run = run or {}
    named = ", ".join(f"{k} {escape(str(v))}" for k, v in run.items() if v)
    verdict = "no violations" if s["ok"] else "VIOLATIONS: " + ", ".join(
        f"{k} {n}" for k, n in s["violations"].items() if n)
    subs = _table(["subscriber", "guarantee", "received", "distinct", *KINDS[:-1], "marked repeats"],
                  [[x["name"], x["guarantee"], x["received"], x["distinct"], *(x[k] for k in KINDS[:-1]),
                    x["marked_repeats"]] for x in s["subscribers"]])
    lat_rows = [[f"topic {t}", v["count"], v["p50"], v["p99"], v["p99.9"]] for t, v in s["latency_ms"]["end_to_end"].items()]
    lat_rows += [[f"hop {h}", v["count"], v["p50"], v["p99"], v["p99.9"]] for h, v in sorted(s["latency_ms"]["per_hop"].items())]
    lat = _table(["", "deliveries", "p50 ms", "p99 ms", "p99.9 ms"], lat_rows)
    faults = _table(["at (s)", "fault", "resumed after (s)", "measured by"],
                    [[f["at"], f["fault"], f["resume_seconds"], f["by"]] for f in s["faults"]])
    examples = "".join(f"<li><b>{escape(k)}</b>: {escape(', '.join(v))}</li>" for k, v in s["examples"].items())
    tp = s["throughput"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>once audit: {escape(run_dir)}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} .bad{{color:#b00}} .good{{color:#070}}</style></head>
<body>
<h1>once audit{': ' + escape(str(run.get('scenario'))) if run.get('scenario') else ''}</h1>
{f'<p>{named}</p>' if named else ''}
<p>Run <code>{escape(run_dir)}</code>: {s['rows']} journal rows, {s['sent']} messages sent, {s['accepted']} accepted,
{s['rejected']} rejected.</p>
<p class="{'good' if s['ok'] else 'bad'}"><b>{escape(verdict)}</b></p>
{f'<ul>{examples}</ul>' if examples else ''}
<h2>Subscribers</h2>{subs}
<h2>Latency</h2>{lat}
{plots.latency_cdf(result.cdf_ms)}
<h2>Throughput</h2>
<p>Accepted per second: mean {tp['accepted_per_s_mean']:.0f}, peak {tp['accepted_per_s_peak']} over {tp['seconds']} s.</p>
{plots.throughput(result.rates or result.throughput, s['faults'], result.bucket)}
<h2>Faults</h2>{faults if s['faults'] else '<p>No faults recorded.</p>'}
</body></html>
"""
