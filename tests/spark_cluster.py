"""A real Spark standalone cluster on 127.0.0.1, started from the scripts PySpark ships.

PySpark's install directory is a Spark home (``bin/spark-class``, ``sbin/spark-daemon.sh``,
``jars/``); ``sbin/start-master.sh`` / ``start-worker.sh`` are not shipped in the wheel, so the
daemons are started the way those scripts start them: ``sbin/spark-daemon.sh start
org.apache.spark.deploy.master.Master 1 --host … --port … --webui-port …`` and the same for
``org.apache.spark.deploy.worker.Worker``. Logs, pid files and the workers' scratch directories
all live under one temporary directory; :meth:`StandaloneCluster.stop` stops every daemon (and
``kill -9`` what does not stop) so nothing is left running. Nothing is downloaded.

Used by ``tests/engines/test_spark_cluster.py`` and ``benchmarks/bench_spark_cluster.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


class StandaloneCluster:
    """One master and ``workers`` workers (``cores`` cores, ``memory`` each) on 127.0.0.1."""

    def __init__(self, root: Path, workers: int = 1, cores: int = 1, memory: str = "1g"):
        self.root = Path(root)
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.port, self.web_port = free_port(), free_port()
        self.worker_ports = [free_port() for _ in range(workers)]
        self.ident = f"dpmatrix-test-{os.getpid()}-{self.port}"
        self.started: list[tuple[str, int]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_PID_DIR=str(self.root / "pids"),
            SPARK_WORKER_DIR=str(self.root / "work"),
            SPARK_LOCAL_DIRS=str(self.root / "local"),
            SPARK_IDENT_STRING=self.ident,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            PYSPARK_PYTHON=sys.executable,
        )
        return env

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        script = spark_home() / "sbin" / "spark-daemon.sh"
        subprocess.run(
            ["bash", str(script), action, cls, str(instance), *args],
            env=self.env(), check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def pid(self, cls: str, instance: int) -> int | None:
        f = self.root / "pids" / f"spark-{self.ident}-{cls}-{instance}.pid"
        try:
            return int(f.read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        self._daemon("start", MASTER_CLASS, 1, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.web_port))  # fmt: skip
        self.started.append((MASTER_CLASS, 1))
        for i in range(self.n_workers):
            self.start_worker(i + 1)
        self.wait_workers(self.n_workers, timeout)
        return self

    def start_worker(self, instance: int) -> None:
        self._daemon("start", WORKER_CLASS, instance, self.url, "--host", "127.0.0.1",
                     "--cores", str(self.cores), "--memory", self.memory,
                     "--webui-port", str(self.worker_ports[instance - 1]))  # fmt: skip
        if (WORKER_CLASS, instance) not in self.started:
            self.started.append((WORKER_CLASS, instance))

    def state(self) -> dict:
        """The master's JSON status (workers, applications)."""
        return get_json(self.web + "/json/")

    def wait_workers(self, n: int, timeout: float = 180.0) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                if int(self.state().get("aliveworkers", 0)) >= n:
                    return
            except OSError:
                pass
            if time.monotonic() > end:
                raise RuntimeError(f"the standalone cluster did not get {n} worker(s) in {timeout} s; logs in {self.root / 'logs'}")
            time.sleep(0.5)

    def kill_worker(self, instance: int) -> int:
        """``kill -9`` a worker daemon and the executors it launched; returns the worker's pid."""
        pid = self.pid(WORKER_CLASS, instance)
        assert pid is not None, "worker not running"
        children = _children(pid)
        os.kill(pid, signal.SIGKILL)
        for c in children:
            try:
                os.kill(int(c), signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pid

    def stop(self) -> None:
        """Stop every daemon started (``kill -9`` any survivor); leaves no process."""
        pids = [self.pid(cls, i) for cls, i in self.started]
        for cls, i in reversed(self.started):
            try:
                self._daemon("stop", cls, i)
            except (subprocess.SubprocessError, OSError):
                pass
        for pid in pids:
            if pid is None:
                continue
            end = time.monotonic() + 20
            while _alive(pid) and time.monotonic() < end:
                time.sleep(0.2)
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.started.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc, no procps needed)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def driver_conf(cluster: StandaloneCluster, event_dir: Path | None = None) -> dict[str, str]:
    """Spark settings of a driver on this machine talking to ``cluster`` (the usual Spark
    settings, as a user would pass them with ``--spark-conf``)."""
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.port": "0",
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.default.parallelism": "2",
        "spark.sql.shuffle.partitions": "2",
        "spark.pyspark.python": sys.executable,
        "spark.local.dir": str(cluster.root / "driver-local"),
    }
    if event_dir is not None:
        event_dir.mkdir(parents=True, exist_ok=True)
        conf["spark.eventLog.enabled"] = "true"
        conf["spark.eventLog.dir"] = event_dir.as_uri()
        conf["spark.eventLog.compress"] = "false"  # plain JSON lines, one file per application
        conf["spark.eventLog.rolling.enabled"] = "false"
    return conf


def event_log(event_dir: Path) -> list[dict]:
    """Every event of the applications logged in ``event_dir`` (Spark's JSON-lines event log)."""
    events = []
    for f in sorted(p for p in event_dir.rglob("*") if p.is_file() and not p.name.startswith(".")):
        if f.name.startswith("appstatus"):  # the rolling log's status marker
            continue
        for line in f.read_text().splitlines():
            if line.strip():
                events.append(json.loads(line))
    return events


def task_executors(events: list[dict]) -> list[str]:
    """The executor id of every finished task (``"driver"`` in local mode)."""
    return [e["Task Info"]["Executor ID"] for e in events if e.get("Event") == "SparkListenerTaskEnd"]
