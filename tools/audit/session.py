"""The Spark session of an audit: local mode on this machine unless told otherwise."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

JAVA_HINT = "install Java 17 (apt install openjdk-17-jre-headless) or set JAVA_HOME to one"


def java_problem() -> str | None:
    """Why Spark could not start its JVM here, in one line; None when Java is there.
    (Spark's own failure is a long traceback about a gateway that exited.)"""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            return f"JAVA_HOME={home} has no bin/java: {JAVA_HINT}"
        return None
    if shutil.which("java") is None:
        return f"Spark needs Java and there is none on PATH: {JAVA_HINT}"
    return None


def under_spark_submit() -> bool:
    """spark-submit passes the master itself; a master set here would override it."""
    return "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


def spark_session(master: str | None = None, app: str = "once-audit", *, for_tests: bool = False,
                  shuffle_partitions: int | None = None) -> Any:
    # Executors must run this Python (another one fails with "Python worker failed to
    # connect back"), and a laptop's Spark binds to its public name unless told not to.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    elif not under_spark_submit():
        builder = builder.master("local[*]")
    cores = os.cpu_count() or 2
    partitions = shuffle_partitions or (2 if for_tests else max(4, 2 * cores))
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(partitions))
               # Spark's own stage bars on a terminal (an audit takes a while); none in logs
               .config("spark.ui.showConsoleProgress", "true" if sys.stderr.isatty() and not for_tests else "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if master is None or master.startswith("local"):
        # A small machine: no web UI, a compact GC, the driver is the executor.
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.driver.memory", os.environ.get("ONCE_AUDIT_DRIVER_MEMORY", "2g"))
                   .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC" + (" -XX:TieredStopAtLevel=1" if for_tests else "")))
    if for_tests:
        # The tests' runs are a few thousand rows, audited again and again in one session:
        # there, compiling each query's code and re-planning each stage cost more than the
        # rows do (an audit of 2,000 rows: 7.4 s with both, 4.0 s interpreted, unplanned).
        # The results are Spark's to keep equal; large runs want both on (the default).
        builder = (builder.config("spark.sql.adaptive.enabled", "false")
                   .config("spark.sql.codegen.wholeStage", "false")
                   .config("spark.sql.codegen.factoryMode", "NO_CODEGEN"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
