"""The Spark driver JVM's console: its start-up chatter is dropped, everything else is shown.

PySpark starts the driver JVM (``bin/spark-submit … pyspark-shell``) with the Python process's
standard error, and the JVM writes a few lines there on every start that tell a dpmatrix user
nothing they can act on:

* ``WARNING: Using incubator modules: jdk.incubator.vector`` — printed by the Java launcher
  itself (Spark's launcher always adds ``--add-modules=jdk.incubator.vector``); no logging
  setting reaches it;
* ``Setting default log level to "WARN".`` and ``To adjust logging level use
  sc.setLogLevel(newLevel)…`` — printed by Spark when the logger of the class that starts the
  driver (PySpark's ``PythonGatewayServer``) has no level of its own in the log4j2 settings;
  dpmatrix's log4j2 file gives it one, so Spark does not print them (:data:`LOG4J2`), and the
  filter below drops them too for a ``$SPARK_CONF_DIR`` or ``spark.driver.extraJavaOptions``
  that overrides that file;
* Hadoop's ``NativeCodeLoader`` warning that no native library is installed (Spark falls back
  to its Java code).

:func:`launch_gateway` starts the JVM (without a Python ``preexec_fn``, see :func:`start_jvm`)
with its standard error on a pipe read by a daemon thread that copies every line to this process's standard error (file descriptor 2, where the JVM wrote
before) except the lines :func:`is_startup_noise` recognizes. Errors of the JVM, of
``spark-submit`` (e.g. no Java) and log lines at the configured level pass unchanged; when the
JVM fails to start, its last words are shown before PySpark's exception.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

#: log4j2 settings of a session dpmatrix starts: only FATAL reaches the console (Spark's errors
#: reach the user as exceptions, turned into one line by :func:`.spark_engine.spark_error`).
#: The gateway's logger gets the root's level explicitly, so Spark sees a configured level
#: equal to the root's and does not announce a "default log level".
LOG4J2 = """\
rootLogger.level = fatal
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = fatal
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = fatal
"""

_NOISE = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Setting default log level to "
    r"|To adjust logging level use sc\.setLogLevel\(newLevel\)"
    r"|.*\bNativeCodeLoader: Unable to load native-hadoop library)"
)


def is_startup_noise(line: str) -> bool:
    """Whether a line of the driver JVM's standard error is start-up chatter (see the module).

    Examples
    --------
    >>> is_startup_noise("WARNING: Using incubator modules: jdk.incubator.vector")
    True
    >>> is_startup_noise('Setting default log level to "WARN".')
    True
    >>> is_startup_noise("Error: A JNI error has occurred, please check your installation")
    False
    """
    return bool(_NOISE.match(line))


def forward(read_fd: int, write_fd: int = 2) -> threading.Thread:
    """Start a daemon thread copying the lines read from ``read_fd`` to ``write_fd`` except
    start-up noise; it closes ``read_fd`` and ends when the writers close the pipe."""

    def run() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as src:
            for raw in iter(src.readline, b""):
                if not is_startup_noise(raw.decode("utf-8", "replace")):
                    try:
                        os.write(write_fd, raw)
                    except OSError:
                        pass

    thread = threading.Thread(target=run, name="dpmatrix-spark-stderr", daemon=True)
    thread.start()
    return thread


def launch_gateway(conf: Any) -> Any:
    """PySpark's driver JVM gateway, the JVM started here (see :func:`start_jvm`) and handed to
    ``pyspark.java_gateway.launch_gateway`` through PySpark's own protocol for a JVM started by
    someone else (``PYSPARK_GATEWAY_PORT`` / ``PYSPARK_GATEWAY_SECRET``, as ``spark-submit``
    does for a Python application); ``conf`` is the ``SparkConf`` passed to ``spark-submit``."""
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    if "PYSPARK_GATEWAY_PORT" in os.environ or os.name != "posix":  # a JVM is given, or Windows
        return pyspark_launch(conf)
    proc, port, secret = start_jvm(conf)
    os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"] = str(port), secret
    try:
        gateway = pyspark_launch(conf)
    except BaseException:
        proc.kill()
        _reap(proc)
        raise
    finally:
        del os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"]
    gateway.proc = proc  # as PySpark keeps it; the JVM exits when this process closes its stdin
    return gateway


def start_jvm(conf: Any, poll: float = 0.1) -> tuple[subprocess.Popen, int, str]:
    """Start ``spark-submit … pyspark-shell`` as PySpark does, and return the process and the
    gateway's port and secret (which the JVM writes to a file named by
    ``_PYSPARK_DRIVER_CONN_INFO_PATH``).

    Two differences from PySpark's own start: the JVM's standard error goes through
    :func:`forward`; and the JVM runs in a session of its own (``setsid`` in the C code of
    ``subprocess``) instead of resetting ``SIGINT`` in a Python ``preexec_fn``. Either keeps the
    terminal's Ctrl-C away from the JVM (dpmatrix cancels the running job itself), but a
    ``preexec_fn`` makes CPython fork and run Python code in the child, which is unsafe in a
    multithreaded process: JAX (used by dpmatrix's reconstruction) warns "os.fork() was
    called … this will likely lead to a deadlock" for every Spark session started after it.
    """
    from pyspark.errors import PySparkRuntimeError
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.serializers import UTF8Deserializer, read_int

    command = [os.path.join(_find_spark_home(), "bin", "spark-submit")]
    for k, v in conf.getAll():
        command += ["--conf", f"{k}={v}"]
    command += shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))
    folder = tempfile.mkdtemp(prefix="dpmatrix-spark-")
    try:
        info = os.path.join(folder, "conn-info")
        env = dict(os.environ, SPARK_CONNECT_MODE="0", _PYSPARK_DRIVER_CONN_INFO_PATH=info)
        read_fd, write_fd = os.pipe()
        thread = forward(read_fd)
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=write_fd, env=env,
                                    start_new_session=True)  # fmt: skip
        finally:
            os.close(write_fd)  # the JVM holds its own copy
        while proc.poll() is None and not os.path.isfile(info):
            time.sleep(poll)
        if not os.path.isfile(info):
            _reap(proc)
            thread.join(timeout=5.0)  # the failed JVM's own words before the exception
            raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
        with open(info, "rb") as f:
            port = read_int(f)
            secret = UTF8Deserializer().loads(f)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return proc, port, secret


def _reap(proc: subprocess.Popen) -> None:
    """Close our end of a finished (or killed) JVM's stdin and collect its exit status."""
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait()


def start_session(options: dict[str, str]) -> Any:
    """A new ``SparkSession`` with ``options`` (``spark.master``, ``spark.app.name`` and any
    Spark setting); the driver JVM is started by :func:`launch_gateway` unless this process
    already has one (PySpark keeps it after a session stops), which is then reused."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = SparkConf()
    for k, v in options.items():
        conf.set(k, v)
    gateway = None if SparkContext._gateway else launch_gateway(conf)
    sc = SparkContext(conf=conf, gateway=gateway)
    return SparkSession(sc)
