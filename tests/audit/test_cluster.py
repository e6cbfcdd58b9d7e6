"""``once audit --master spark://...`` on a real Spark standalone cluster (a master and one
worker from the pyspark package, as OS processes). (``once harness --audit``, and several
runs in one session, are the same session and job in local mode: ``test_audit.py``.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from once.tools.audit.synthetic import Inject, generate
from support.routers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


# The test cluster's Spark defaults, as an operator's ``spark-defaults.conf`` sets them
# (``spark-submit``, which starts the audit's driver, reads it): a few thousand rows on a
# small machine, so the JVMs compile little and the queries run interpreted, unplanned.
# The cold audit took 30 s with Spark's own defaults, 15 s with these.
DEFAULTS = """\
spark.driver.extraJavaOptions -XX:+UseSerialGC -XX:TieredStopAtLevel=1
spark.executor.extraJavaOptions -XX:+UseSerialGC -XX:TieredStopAtLevel=1
spark.sql.adaptive.enabled false
spark.sql.codegen.wholeStage false
spark.sql.codegen.factoryMode NO_CODEGEN
"""


def _env(tmp: Path) -> dict[str, str]:
    conf = tmp / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "spark-defaults.conf").write_text(DEFAULTS)
    return dict(os.environ, SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp),
                SPARK_WORKER_DIR=str(tmp / "work"), PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=str(conf))


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = _env(tmp)
        spark_class = str(_spark_home() / "bin" / "spark-class")
        self.master_log = tmp / "master.log"
        self.worker_log = tmp / "worker.log"
        self.procs: list[subprocess.Popen[bytes]] = []
        self._start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                     "--webui-port", "0"], self.master_log)
        found = wait_for(lambda: re.search(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", self._read(self.master_log)),
                         timeout=60, interval=0.2, what="the Spark master")
        self.url = found.group(1)
        self._start([spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--port", "0",
                     "--webui-port", "0", "--cores", "2", "--memory", "1g", "--work-dir", str(tmp / "work")],
                    self.worker_log)
        wait_for(lambda: "Successfully registered with master" in self._read(self.worker_log),
                 timeout=60, interval=0.2, what="the Spark worker to register")

    def _start(self, argv: list[str], log: Path) -> None:
        with log.open("wb") as out:  # the child keeps its own copy
            self.procs.append(subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT))

    @staticmethod
    def _read(path: Path) -> str:
        return path.read_text(errors="replace") if path.exists() else ""

    def apps(self) -> list[str]:
        return re.findall(r"Registering app (\S+)", self._read(self.master_log))

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c
    finally:
        c.stop()


def _once(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_audit_runs_on_a_standalone_cluster_and_counts_what_was_injected(cluster, tmp_path):
    generate(tmp_path, 3000, Inject(lost=3, phantom=2))
    before = len(cluster.apps())
    done = _once(["audit", str(tmp_path), "--master", cluster.url], cluster.env)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "FAIL: lost 3, phantom 2" in done.stdout
    assert json.loads((tmp_path / "audit" / "summary.json").read_text())["violations"]["lost"] == 3
    assert cluster.apps()[before:] == ["once-audit"]  # one application, on the cluster (not in local mode)
