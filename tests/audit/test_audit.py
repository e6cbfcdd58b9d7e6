"""``once audit`` on Spark: injected violations are caught with the right counts, a clean
harness run audits clean, and the audit agrees with the harness's own checker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from once.tools.audit.main import main as audit_main
from once.tools.audit.main import run_audit
from once.tools.audit.synthetic import Inject, generate
from once.tools.harness.main import harness
from once.tools.harness.scenario import load
from support.scenarios import AUDITED, assert_scenario_held

ROOT = Path(__file__).resolve().parents[2]


def test_a_clean_synthetic_run_audits_clean_with_latency_and_throughput(spark, tmp_path):
    rows = generate(tmp_path, 2000)
    result = run_audit(spark, str(tmp_path))
    s = result.summary
    assert s["ok"] and s["rows"] == rows and (s["sent"], s["accepted"]) == (2000, 2000)
    assert all(n == 0 for n in s["violations"].values())
    e2e = s["latency_ms"]["end_to_end"]["t"]
    assert e2e["count"] == 4000 and e2e["p50"] == pytest.approx(0.030, abs=0.002)
    hops = s["latency_ms"]["per_hop"]
    assert hops["publisher→A"]["p50"] == pytest.approx(0.010) and hops["A→B"]["p50"] == pytest.approx(0.009)
    assert hops["in A"]["p50"] == pytest.approx(0.001)
    assert s["throughput"]["accepted_per_s_peak"] == 2000  # 2,000 messages at 20,000/s: all in the first second
    assert json.loads((tmp_path / "audit" / "summary.json").read_text())["ok"] is True
    page = (tmp_path / "audit" / "report.html").read_text()
    assert "no violations" in page and page.count("<svg") == 2


def test_each_injected_violation_is_counted(spark, tmp_path):
    inject = Inject(lost=7, duplicated=5, reordered=4, phantom=3, early_acceptance=6, rejected=2)
    generate(tmp_path, 3000, inject)
    s = run_audit(spark, str(tmp_path)).summary
    assert s["violations"] == {"lost": 7, "duplicated": 5, "reordered": 4, "phantom": 3, "early_acceptance": 6,
                               "rejected": 2}
    s1, s2 = sorted(s["subscribers"], key=lambda x: x["name"])
    assert (s1["lost"], s1["duplicated"], s1["reordered"], s1["phantom"]) == (7, 5, 4, 3)
    assert (s2["lost"], s2["early_acceptance"]) == (0, 6)
    assert s["examples"]["lost"][0] == "s1: p1:10" and s["examples"]["phantom"][0].startswith("s1: ghost:")
    assert "VIOLATIONS" in (tmp_path / "audit" / "report.html").read_text()


def test_the_cli_exits_non_zero_naming_examples(spark, tmp_path, capsys):
    good, bad = tmp_path / "good", tmp_path / "bad"
    generate(good, 200)
    generate(bad, 200, Inject(lost=1))
    assert audit_main([str(good), str(bad)], "local[2]") == 1  # (several runs, one session: one failed)
    out = capsys.readouterr().out
    assert "lost 1: first s1: p1:10" in out and "FAIL: lost 1" in out
    assert f"{good}: audit: " in out and f"{bad}: audit: " in out and out.count("\nPASS") == 1, out
    assert (good / "audit" / "report.html").exists() and (bad / "audit" / "report.html").exists()


def test_a_directory_without_journals_is_a_one_line_error(tmp_path, capsys):
    assert audit_main(str(tmp_path)) == 2
    assert "no journal/ directory" in capsys.readouterr().err


@pytest.mark.parametrize("name", AUDITED)
def test_a_harness_run_audits_clean_and_agrees_with_the_harness(spark, tmp_path, name):
    """Our clients, Proton's, and MQTT clients (their journals name the gid the router told
    them in a user property); an outbox application's rows, whose gids the application, its
    relays and the routers each work out alone (``client/outbox/identity.py``)."""
    run_dir = tmp_path / "run"
    args = argparse.Namespace(random=False, scenario=str(ROOT / "topologies" / "scenarios" / f"{name}.yaml"),
                              messages=None, out=str(run_dir), quiet=True, audit=True, master=None)
    assert harness(args) == 0  # (once harness --audit: the run, then its audit in this session)
    report = json.loads((run_dir / "report.json").read_text())
    assert_scenario_held(load(ROOT / "topologies" / "scenarios" / f"{name}.yaml"), report,
                         json.dumps(report, indent=1)[-3000:])
    s = json.loads((run_dir / "audit" / "summary.json").read_text())
    assert s["ok"], s["violations"]
    assert (s["sent"], s["accepted"]) == (report["sent"], report["accepted"])
    ours = {x["name"]: x for x in s["subscribers"]}
    for sub in report["subscribers"]:
        mine = ours[sub["name"]]
        assert (mine["received"], mine["distinct"], mine["lost"], mine["duplicated"], mine["reordered"],
                mine["phantom"], mine["marked_repeats"]) == tuple(sub[k] for k in (
                    "received", "distinct", "lost", "duplicated", "reordered", "phantom", "marked_repeats"))
    faults = [f["fault"] for f in s["faults"]]
    assert faults == [r["fault"] for r in report["resume"]]
    for mine, theirs in zip(s["faults"], report["resume"]):
        assert mine["at"] == theirs["at"]  # one fault, one time in both reports
        if theirs["seconds"] is not None:
            assert mine["resume_seconds"] == pytest.approx(theirs["seconds"], abs=0.01)
    assert s["latency_ms"]["per_hop"] and s["throughput"]["accepted_per_s_peak"] > 0
    page = (tmp_path / "run" / "audit" / "report.html").read_text()
    assert f"<h1>once audit: {name}</h1>" in page and "routers A, B, C" in page  # the run, named
    assert "in 0.1 s buckets" in page and "e+0" not in page  # a short run, finer; readable axes


def test_a_run_given_as_a_url_is_read_and_written_through_hadoop_file_systems(spark, tmp_path):
    """file:// takes the path hdfs:// and s3a:// take: Spark reads the journals and the
    side files, Hadoop's FileSystem API writes audit/ (only the connectors differ)."""
    generate(tmp_path, 500, Inject(lost=2))
    s = run_audit(spark, tmp_path.as_uri()).summary
    assert s["violations"]["lost"] == 2
    assert json.loads((tmp_path / "audit" / "summary.json").read_text())["violations"]["lost"] == 2
    assert "VIOLATIONS" in (tmp_path / "audit" / "report.html").read_text()


def test_a_consumer_group_is_audited_as_one_subscriber(spark, tmp_path):
    """Members w1 (ours) and w2 (standard) of group g, a plain subscriber s; one publisher."""
    j = tmp_path / "journal"
    j.mkdir()
    rows = {"publisher-p1": [], "subscriber-w1": [], "subscriber-w2": [], "subscriber-s": []}
    t = 1_800_000_000_000_000

    def msg(i: int, arrivals: list[tuple[str, bool]]) -> None:
        g, mid, t0 = f"{i:032x}", f"p1:{i}", t + i * 1000
        rows["publisher-p1"].append(f"{t0},publisher,p1,sent,{g},{mid},t,")
        for k, (member, marked) in enumerate(arrivals):
            rows[f"subscriber-{member}"].append(
                f"{t0 + 10 + k},subscriber,{member},received,{g},{mid},t,{'redelivery' if marked else ''}")
            rows[f"subscriber-{member}"].append(f"{t0 + 20 + k},subscriber,{member},accepted,{g},{mid},t,")
        rows["subscriber-s"].append(f"{t0 + 5},subscriber,s,received,{g},{mid},t,")
        rows["publisher-p1"].append(f"{t0 + 50},publisher,p1,accepted,{g},{mid},t,")

    msg(0, [("w1", False)])
    msg(1, [("w2", False)])
    msg(2, [])  # lost for the group (the plain subscriber had it)
    msg(3, [("w1", False), ("w2", True)])  # ours had it: another member's copy is a duplicate
    msg(4, [("w2", False), ("w1", True)])  # the standard member may have died before accepting: marked, fine
    msg(5, [("w2", False), ("w1", False)])  # the same, not marked: a duplicate
    for name, lines in rows.items():
        (j / f"{name}.csv").write_text("t_us,source,node,event,gid,mid,topic,peer\n" + "\n".join(lines) + "\n")
    (j / "clients.json").write_text(json.dumps({
        "p1": {"role": "publisher", "topic": "t", "guarantee": "exactly-once", "router": "A"},
        "w1": {"role": "subscriber", "topic": "t", "guarantee": "exactly-once", "router": "A", "group": "g"},
        "w2": {"role": "subscriber", "topic": "t", "guarantee": "at-least-once", "router": "B", "group": "g"},
        "s": {"role": "subscriber", "topic": "t", "guarantee": "exactly-once", "router": "B"}}))
    (j / "faults.json").write_text("[]")
    s = run_audit(spark, str(tmp_path)).summary
    assert s["violations"]["lost"] == 1 and s["violations"]["duplicated"] == 2
    units = {u["name"]: u for u in s["subscribers"]}
    assert set(units) == {"group g", "s"}
    g = units["group g"]
    assert (g["distinct"], g["lost"], g["duplicated"], g["marked_repeats"]) == (5, 1, 2, 1)
    assert g["guarantee"] == "mixed" and units["s"]["lost"] == 0


def test_router_journals_alone_are_not_called_a_pass(spark, tmp_path):
    from once.tools.audit.main import checked, verdict

    generate(tmp_path, 200)
    for client in ("publisher-p1", "subscriber-s1", "subscriber-s2"):
        (tmp_path / "journal" / f"{client}.csv").unlink()
    (tmp_path / "journal" / "clients.json").unlink()
    result = run_audit(spark, str(tmp_path))
    text = verdict(result)
    assert "PASS" not in text and text.splitlines()[-1].startswith("NOT CHECKED: the journals have no client rows")
    assert not checked(result)  # (once audit exits 2 for it, not 0: nothing checked is no pass; issue 50, item 13)


def test_the_commands_journals_beside_a_routers_are_audited(spark, tmp_path):
    """``once recv``/``once send --journal DIR`` beside a router's ``--journal DIR``: the
    audit checks them (only harness runs could be audited: issue 50, item 13)."""
    import subprocess
    import sys

    from support.routers import RouterProcess, write_topology

    journal = tmp_path / "run" / "journal"
    router = RouterProcess(write_topology(tmp_path), args=("--journal", str(journal)))
    try:
        recv = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "audited", "--url", router.url,
                                 "--count", "20", "--journal", str(journal)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert recv.stderr is not None and recv.stderr.readline().startswith("subscribed to audited")
        sent = subprocess.run([sys.executable, "-m", "once.tools.cli", "send", "audited", "--count", "20", "--url",
                               router.url, "--journal", str(journal)], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert sent.returncode == 0 and "accepted 20" in sent.stdout, sent.stderr
        recv.communicate(timeout=60)
        assert recv.returncode == 0
    finally:
        router.stop()
    s = run_audit(spark, str(tmp_path / "run")).summary
    assert (s["sent"], s["accepted"]) == (20, 20) and not any(s["violations"].values()), s["violations"]
    [sub] = s["subscribers"]
    assert sub["guarantee"] == "at-least-once" and (sub["received"], sub["distinct"]) == (20, 20)


def test_an_outbox_row_is_owed_from_its_commit_and_its_relay_heard_accepted_only_after_the_subscriber(spark, tmp_path):
    """The application's journal (one node per table) has ``sent`` and ``committed``; the
    relays' have ``accepted``. A committed row no relay delivered is lost; a relay that
    heard accepted before the subscriber accepted is an early acceptance; a row never
    committed (rolled back) that arrives is a phantom; order is per table."""
    j = tmp_path / "journal"
    j.mkdir()
    rows: dict[str, list[str]] = {"publisher-app-t0": [], "publisher-app-t1": [], "publisher-relay-r1": [],
                                  "subscriber-s": []}
    t = 1_800_000_000_000_000

    def row(i: int, table: str, *, commit: bool = True, relay_at: int | None = 60, got_at: int | None = 10) -> None:
        g, mid, t0 = f"{i:032x}", f"{table}:{i}", t + i * 1000
        if commit:
            rows[f"publisher-app-{table}"] += [f"{t0},publisher,app/{table},sent,{g},{mid},o,",
                                               f"{t0 + 1},publisher,app/{table},committed,{g},{mid},o,"]
        if got_at is not None:
            rows["subscriber-s"] += [f"{t0 + got_at},subscriber,s,received,{g},{mid},o,",
                                     f"{t0 + got_at + 5},subscriber,s,accepted,{g},{mid},o,"]
        if relay_at is not None:
            rows["publisher-relay-r1"].append(f"{t0 + relay_at},publisher,r1,accepted,{g},{mid},o,")

    row(0, "t0")
    row(1, "t0", relay_at=None, got_at=None)  # committed, never delivered: lost
    row(2, "t0", relay_at=12)  # the relay heard accepted before the subscriber accepted
    row(3, "t1", commit=False, relay_at=None)  # rolled back, and yet it arrived: a phantom
    row(4, "t1", got_at=2500, relay_at=3000)  # arrives after row 5 of the same table: reordered
    row(5, "t1", got_at=10)
    row(6, "t0", got_at=10)  # (before row 4's arrival, but another table's: no reorder)
    for name, lines in rows.items():
        lines.sort(key=lambda line: int(line.split(",")[0]))
        (j / f"{name}.csv").write_text("t_us,source,node,event,gid,mid,topic,peer\n" + "\n".join(lines) + "\n")
    (j / "clients.json").write_text(json.dumps({
        "app": {"role": "publisher", "topic": "o", "guarantee": "exactly-once", "router": "A"},
        "r1": {"role": "relay", "router": "A"},
        "s": {"role": "subscriber", "topic": "o", "guarantee": "exactly-once", "router": "B"}}))
    (j / "faults.json").write_text("[]")
    s = run_audit(spark, str(tmp_path)).summary
    v = s["violations"]
    assert (v["lost"], v["early_acceptance"], v["phantom"], v["reordered"], v["duplicated"]) == (1, 1, 1, 1, 0), v
    assert s["sent"] == 6
