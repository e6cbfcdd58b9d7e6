"""The audit itself: DataFrame transformations over a run's journals (schema: router/journal.py).

Invariants come from the clients' rows (written as events happen, and for a once
subscriber after its store committed); router rows give per-hop timing. What a
subscriber is owed: every message of a topic its name matches (its topic, or its pattern's
topics: ``records/names.py``) that its publisher saw accepted, or that an outbox
application committed (``committed``: its relays' outcomes are the ``accepted`` rows) (the
harness attaches every subscriber before publishing starts; ``clients.json`` names the
subscribers and their guarantee: a standard client is at-least-once and may repeat a
delivery only if it was marked as a possible repeat).

A consumer group's members (``clients.json``: ``group``) are checked as one subscriber,
the unit ``group NAME``: each message its topic's publisher saw accepted reached one of
them; a repeat at any member after one of our members had it is a duplicate, after a
standard member it must be marked; each member's first arrivals that are not marked are
in publish order. A plain subscriber is a unit of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from once.records.names import matches
from once.router.journal import COLUMNS
from once.tools.harness.check import MARGIN
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

SCHEMA = StructType([StructField(c, LongType() if c == "t_us" else StringType()) for c in COLUMNS])
PERCENTILES = (0.5, 0.99, 0.999)
CDF_POINTS = [i / 100 for i in range(100)] + [0.995, 0.999, 1.0]
RESUME_WINDOW_US = 10_000_000  # a fault's effect is looked for this long after it
MARGIN_US = int(MARGIN * 1_000_000)  # a pause that begins this close to the next fault is that fault's
EXAMPLES = 5
KINDS = ("lost", "duplicated", "reordered", "phantom", "early_acceptance", "rejected")


def read_journal(spark: SparkSession, run_dir: str) -> DataFrame:
    """Every journal file of a run, from any path Spark reads (local, hdfs://, s3a://)."""
    return spark.read.csv(f"{run_dir.rstrip('/')}/journal/*.csv", header=True, schema=SCHEMA, mode="DROPMALFORMED")


@dataclass
class Result:
    summary: dict[str, Any]
    cdf_ms: list[tuple[float, float]] = field(default_factory=list)  # (quantile, latency ms)
    throughput: list[dict[str, Any]] = field(default_factory=list)
    rates: list[dict[str, Any]] = field(default_factory=list)  # the plot's: per second, in buckets of ``bucket`` s
    bucket: float = 1.0

    @property
    def ok(self) -> bool:
        return not any(self.summary["violations"].values())


def _subscribers(spark: SparkSession, j: DataFrame, clients: dict[str, dict[str, Any]]) -> DataFrame:
    listed = [(n, c.get("topic"), c.get("guarantee", "exactly-once"), c.get("router"),
               f"group {c['group']}" if c.get("group") else n)
              for n, c in clients.items() if c.get("role") == "subscriber"]
    schema = "sub string, topic string, guarantee string, home string, unit string"
    if listed:
        return spark.createDataFrame(listed, schema)
    seen = j.filter(F.col("source") == "subscriber").select(F.col("node").alias("sub"), "topic").distinct()
    return (seen.withColumn("guarantee", F.lit("exactly-once")).withColumn("home", F.lit(None).cast("string"))
            .withColumn("unit", F.col("sub")))


def _quantiles(df: DataFrame, col: str, by: str | None) -> dict[str, dict[str, Any]]:
    aggs = [F.percentile_approx(col, list(PERCENTILES), 100_000).alias("q"), F.count(col).alias("n")]
    rows = (df.groupBy(by).agg(*aggs) if by else df.agg(*aggs).withColumn("k", F.lit("all"))).collect()
    out = {}
    for r in rows:
        key = r[by] if by else "all"
        if r["q"] is None:
            continue
        out[str(key)] = {"p50": r["q"][0] / 1000, "p99": r["q"][1] / 1000, "p99.9": r["q"][2] / 1000, "count": r["n"]}
    return out


def audit(spark: SparkSession, j: DataFrame, clients: dict[str, dict[str, Any]] | None = None,
          faults: list[dict[str, Any]] | None = None) -> Result:
    clients = clients or {}
    faults = sorted(faults or [], key=lambda f: f["at"])
    j = j.filter(F.col("gid").isNotNull() & F.col("t_us").isNotNull()).persist()
    rows = j.count()
    pub = j.filter(F.col("source") == "publisher")
    sent = (pub.filter(F.col("event") == "sent").groupBy("gid")
            .agg(F.min("t_us").alias("t_sent"), F.first("mid").alias("mid"), F.first("node").alias("pub"),
                 F.first("topic").alias("topic")))
    acc = pub.filter(F.col("event") == "accepted").groupBy("gid").agg(F.min("t_us").alias("t_acc"))
    rejected = pub.filter(F.col("event") == "rejected").select("gid", "mid", F.col("node").alias("pub")).persist()
    subs = _subscribers(spark, j, clients).persist()
    sub_rows = j.filter(F.col("source") == "subscriber")
    units = subs.select("sub", "guarantee", "unit")
    recv = (sub_rows.filter(F.col("event") == "received")
            .select(F.col("node").alias("member"), "gid", F.col("mid").alias("rmid"), F.col("t_us").alias("t_recv"),
                    # (an empty peer reads as null: not marked)
                    F.coalesce(F.col("peer") == "redelivery", F.lit(False)).alias("marked"))
            .join(F.broadcast(units.withColumnRenamed("sub", "member")), "member", "left")
            .withColumn("guarantee", F.coalesce("guarantee", F.lit("exactly-once")))
            .withColumn("sub", F.coalesce("unit", "member"))  # the unit: a plain subscriber, or a group
            .withColumn("in_group", F.col("sub") != F.col("member")))
    first_w = Window.partitionBy("sub", "gid").orderBy("t_recv")
    earlier = first_w.rowsBetween(Window.unboundedPreceding, -1)
    recv = (recv.withColumn("rn", F.row_number().over(first_w))
            .withColumn("after_ours", F.max((F.col("guarantee") == "exactly-once").cast("int")).over(earlier) == 1)
            .persist())
    firsts = recv.filter(F.col("rn") == 1).join(sent, "gid", "left").persist()
    sacc = (sub_rows.filter(F.col("event") == "accepted")
            .join(F.broadcast(units.withColumnRenamed("sub", "node")), "node", "left")
            .groupBy(F.coalesce("unit", "node").alias("sub"), "gid").agg(F.min("t_us").alias("t_sacc")))

    # A unit is owed the messages of every topic its name matches (a pattern: several; the
    # topics are few, so the pairs are made here and broadcast, not matched per row).
    topics = [r["topic"] for r in sent.select("topic").distinct().collect() if r["topic"] is not None]
    pairs = {(r["unit"], t) for r in subs.select("unit", "topic").distinct().collect() if r["topic"] is not None
             for t in topics if matches(r["topic"], t)}
    owed_topics = spark.createDataFrame(sorted(pairs), "sub string, topic string")
    # (owed: what its publisher saw accepted, and an outbox row from its commit, whatever
    # the relays heard)
    committed = pub.filter(F.col("event") == "committed").select("gid")
    owed = (sent.join(acc.select("gid").union(committed).distinct(), "gid").join(acc, "gid", "left")
            .join(F.broadcast(owed_topics), "topic"))
    lost = owed.join(firsts.select("sub", "gid"), ["sub", "gid"], "left_anti")
    repeats = recv.filter(F.col("rn") > 1)
    # A repeat breaks the promise after one of our clients had it (ours never process twice,
    # and a group's member of ours accepted it), or when it is not marked.
    ours_had_it = F.when(F.col("in_group"), F.coalesce("after_ours", F.lit(False))).otherwise(
        F.col("guarantee") == "exactly-once")
    dup = repeats.filter(ours_had_it | ~F.col("marked"))
    marked = repeats.filter(~ours_had_it & F.col("marked"))
    phantom = recv.join(sent.select("gid"), "gid", "left_anti")
    # Order: per subscriber and publisher; in a group, per member, among first arrivals not
    # marked (a message passed on from another member comes late, marked).
    order_w = Window.partitionBy("member", "pub").orderBy("t_recv").rowsBetween(Window.unboundedPreceding, -1)
    reordered = (firsts.filter(F.col("t_sent").isNotNull() & ~(F.col("in_group") & F.col("marked")))
                 .withColumn("before", F.max("t_sent").over(order_w))
                 .filter(F.col("t_sent") < F.col("before")))
    early = owed.join(sacc, ["sub", "gid"]).filter(F.col("t_sacc") > F.col("t_acc"))

    def examples(df: DataFrame, mid: str = "mid") -> list[str]:
        """The first few, in the order they happened."""
        order = "t_recv" if "t_recv" in df.columns else "t_sent"
        who = "member" if "member" in df.columns else "sub"
        return [f"{r[who]}: {r[mid] or r['gid']}"
                for r in df.select(who, mid, "gid", order).orderBy(order).limit(EXAMPLES).collect()]

    kinds = {"lost": (lost, "mid"), "duplicated": (dup, "rmid"), "reordered": (reordered, "mid"),
             "phantom": (phantom, "rmid"), "early_acceptance": (early, "mid")}
    # Every count per unit in one query: one job, where a query per kind was five jobs each
    # (most of an audit's time on a small run).
    tallied = {**{k: df for k, (df, _) in kinds.items()}, "marked_repeats": marked, "received": recv,
               "distinct": firsts}
    counts: dict[str, dict[str, int]] = {k: {} for k in tallied}
    union = functools.reduce(DataFrame.unionByName, [df.select(F.lit(k).alias("kind"), "sub")
                                                     for k, df in tallied.items()])
    for r in union.groupBy("kind", "sub").count().collect():
        counts[r["kind"]][r["sub"]] = r["count"]
    violations = {k: sum(counts[k].values()) for k in kinds}
    violations["rejected"] = rejected.count()
    ex = {k: examples(df, m) for k, (df, m) in kinds.items() if violations[k]}
    if violations["rejected"]:
        ex["rejected"] = [f"{r['pub']}: {r['mid'] or r['gid']}" for r in rejected.limit(EXAMPLES).collect()]

    subscribers = []
    by_unit: dict[str, dict[str, Any]] = {}
    for r in subs.collect():
        u = by_unit.get(r["unit"])
        if u is None:
            u = by_unit[r["unit"]] = {"name": r["unit"], "topic": r["topic"], "guarantee": r["guarantee"]}
            for k in ("received", "distinct", *kinds, "marked_repeats"):
                u[k] = counts[k].get(r["unit"], 0)
            subscribers.append(u)
        elif u["guarantee"] != r["guarantee"]:
            u["guarantee"] = "mixed"  # a group of our clients and standard ones

    # Latency: publisher's send to a subscriber's first arrival, per topic; per hop from router rows.
    lat = firsts.filter(F.col("t_sent").isNotNull()).select("topic", (F.col("t_recv") - F.col("t_sent")).alias("us"))
    end_to_end = _quantiles(lat, "us", "topic")
    cdf = lat.agg(F.percentile_approx("us", CDF_POINTS, 100_000).alias("q")).collect()[0]["q"] or []
    per_hop = _quantiles(_hops(j, sent), "us", "hop")

    # Throughput: per second since the first send.
    t0_row = pub.agg(F.min("t_us").alias("t0")).collect()[0]
    t0 = t0_row["t0"] or 0
    second = ((F.col("t_us") - F.lit(t0)) / 1_000_000).cast("long")
    tp = (j.filter(((F.col("source") == "publisher") & F.col("event").isin("sent", "accepted"))
                   | ((F.col("source") == "subscriber") & (F.col("event") == "received")))
          .withColumn("s", second)
          .groupBy("s").pivot("event", ["sent", "accepted", "received"]).count().na.fill(0).orderBy("s").collect())
    throughput = [{"t": r["s"], "sent": r["sent"], "accepted": r["accepted"], "received": r["received"]} for r in tp]
    busy = [t["accepted"] for t in throughput if t["accepted"]]
    # For the plot: a short run in tenths of a second (a few one-second buckets show nothing).
    bucket = 0.1 if len(throughput) <= 10 else 1.0
    rates = throughput
    if bucket < 1.0:
        tenth = ((F.col("t_us") - F.lit(t0)) / 100_000).cast("long")
        fine = (j.filter(((F.col("source") == "publisher") & F.col("event").isin("sent", "accepted"))
                         | ((F.col("source") == "subscriber") & (F.col("event") == "received")))
                .withColumn("s", tenth)
                .groupBy("s").pivot("event", ["sent", "accepted", "received"]).count().na.fill(0).orderBy("s").collect())
        tenths = {r["s"]: r for r in fine}
        # every bucket, the empty ones too (a pause is a drop to zero, not a straight line across it)
        rates = [{"t": n * bucket, **{k: (tenths[n][k] if n in tenths else 0) / bucket
                                       for k in ("sent", "accepted", "received")}}
                 for n in range(min(tenths, default=0), max(tenths, default=-1) + 1)]

    resume = _resume(spark, j, subs, clients, faults, t0)
    summary = {
        "rows": rows,
        "sent": sent.count(),
        "accepted": acc.count(),
        "rejected": violations["rejected"],
        "ok": not any(violations.values()),
        "violations": violations,
        "examples": ex,
        "subscribers": subscribers,
        "latency_ms": {"end_to_end": end_to_end, "per_hop": per_hop},
        "throughput": {"accepted_per_s_mean": sum(busy) / len(busy) if busy else 0.0,
                       "accepted_per_s_peak": max(busy, default=0), "seconds": len(throughput)},
        "faults": resume,
        "first_us": t0,  # the first publisher row: when the run began
    }
    for df in (j, rejected, subs, recv, firsts):
        df.unpersist()
    return Result(summary, [(q, v / 1000) for q, v in zip(CDF_POINTS, cdf)], throughput, rates, bucket)


def _hops(j: DataFrame, sent: DataFrame) -> DataFrame:
    """One row per (delivery, hop): the publish leg (publisher to its router), each link
    between routers (forwarded at one, received at the next) and the time inside a router."""
    r = j.filter(F.col("source") == "router")
    rx = r.filter(F.col("event") == "received").select(F.col("node").alias("at"), "gid", F.col("peer").alias("src"),
                                                       F.col("t_us").alias("t_rx"))
    fx = r.filter(F.col("event") == "forwarded").select(F.col("node").alias("at"), "gid", F.col("peer").alias("dst"),
                                                        F.col("t_us").alias("t_fx"))
    publish = (rx.filter(F.col("src") == "client").join(sent.select("gid", "t_sent"), "gid")
               .select(F.concat(F.lit("publisher→"), "at").alias("hop"), "gid", (F.col("t_rx") - F.col("t_sent")).alias("us")))
    link = (rx.filter(F.col("src") != "client").alias("b")
            .join(fx.alias("a"), (F.col("a.gid") == F.col("b.gid")) & (F.col("a.at") == F.col("b.src"))
                  & (F.col("a.dst") == F.col("b.at")) & (F.col("a.t_fx") <= F.col("b.t_rx")))
            .groupBy(F.concat(F.col("a.at"), F.lit("→"), F.col("b.at")).alias("hop"), F.col("b.gid").alias("gid"))
            .agg(F.min(F.col("b.t_rx") - F.col("a.t_fx")).alias("us")))
    inside = (fx.join(rx, ["at", "gid"]).filter(F.col("t_fx") >= F.col("t_rx"))
              .groupBy(F.concat(F.lit("in "), "at").alias("hop"), "gid", "dst")
              .agg(F.min(F.col("t_fx") - F.col("t_rx")).alias("us")).drop("dst"))
    return publish.unionByName(link).unionByName(inside)


def _resume(spark: SparkSession, j: DataFrame, subs: DataFrame, clients: dict[str, dict[str, Any]],
            faults: list[dict[str, Any]], t0: int) -> list[dict[str, Any]]:
    """For each fault: when traffic resumed, as the end of the longest pause in each
    affected client's events (subscribers' arrivals, publishers' outcomes) from the fault
    to RESUME_WINDOW after it, among pauses that began before the next fault."""
    if not faults:
        return []
    homes = {n: c.get("router") for n, c in clients.items() if c.get("role") != "relay"}
    rows = []
    for i, f in enumerate(faults):
        at = int(f["at"] * 1_000_000)
        until = int(faults[i + 1]["at"] * 1_000_000) - MARGIN_US if i + 1 < len(faults) else at + RESUME_WINDOW_US
        affected = [n for n, h in homes.items() if f.get("router") is not None and h == f["router"]]
        if f.get("client"):
            affected = [f["client"]]
            group = clients.get(f["client"], {}).get("group")
            if group and "kill" in f["fault"]:  # as the harness: the group's other members take over
                affected = [n for n, c in clients.items() if c.get("group") == group and n != f["client"]]
        if f.get("streams"):  # (as the harness: with an outbox, its subscribers)
            affected = list(f["streams"])
        rows.append((i, at, until, affected))
    fdf = spark.createDataFrame(rows, "i int, at long, until long, affected array<string>")
    streams = j.filter(((F.col("source") == "subscriber") & (F.col("event") == "received"))
                       | ((F.col("source") == "publisher") & (F.col("event") == "accepted"))).select(
        F.col("node").alias("stream"), F.col("t_us").alias("t"))
    w = Window.partitionBy("i", "stream").orderBy("t")
    ev = (streams.join(F.broadcast(fdf), (F.col("t") >= F.col("at") - RESUME_WINDOW_US)
                       & (F.col("t") <= F.col("at") + RESUME_WINDOW_US))
          .filter((F.size("affected") == 0) | F.array_contains("affected", F.col("stream")))
          .withColumn("prev", F.lag("t").over(w)))
    gaps = (ev.filter((F.col("t") > F.col("at")) & (F.coalesce("prev", "at") < F.col("until")))
            .withColumn("gap", F.col("t") - F.greatest(F.coalesce("prev", "at"), F.col("at"))))
    best_w = Window.partitionBy("i", "stream").orderBy(F.desc("gap"), "t")
    ends = {(r["i"], r["stream"]): (r["t"], r["at"])
            for r in ev.filter(F.col("t") > F.col("at")).groupBy("i", "stream").agg(
                F.min("t").alias("t"), F.first("at").alias("at")).collect()}  # no qualifying pause: the first event after
    ends.update({(r["i"], r["stream"]): (r["t"], r["at"])
                 for r in gaps.withColumn("k", F.row_number().over(best_w)).filter(F.col("k") == 1).collect()})
    worst: dict[int, tuple[float, str]] = {}
    for (i, stream), (t, at) in ends.items():
        seconds = (t - at) / 1e6
        if i not in worst or seconds > worst[i][0]:
            worst[i] = (seconds, f"{stream}'s longest pause ended")
    out = []
    for i, f in enumerate(faults):
        seconds, by = worst.get(i, (None, "no client traffic after it"))
        # When it happened: as the harness logged it (seconds since the publishers started), so
        # the two reports name a fault by the same time; else since the first publisher row.
        at = f["t"] if "t" in f else round((f["at"] * 1e6 - t0) / 1e6, 3)
        out.append({"at": at, "fault": f["fault"], "resume_seconds": seconds, "by": by})
    return out
