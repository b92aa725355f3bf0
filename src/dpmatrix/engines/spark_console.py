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

:func:`launch_gateway` starts the JVM with its standard error on a pipe read by a daemon thread
that copies every line to this process's standard error (file descriptor 2, where the JVM wrote
before) except the lines :func:`is_startup_noise` recognizes. Errors of the JVM, of
``spark-submit`` (e.g. no Java) and log lines at the configured level pass unchanged; when the
JVM fails to start, its last words are shown before PySpark's exception.
"""

from __future__ import annotations

import os
import re
import threading
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
    """PySpark's driver JVM (``pyspark.java_gateway.launch_gateway``) with its standard error
    filtered by :func:`forward`; ``conf`` is the ``SparkConf`` passed to ``spark-submit``."""
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    read_fd, write_fd = os.pipe()
    thread = forward(read_fd)
    try:
        return pyspark_launch(conf, popen_kwargs={"stderr": write_fd})
    except BaseException:
        os.close(write_fd)
        write_fd = -1
        thread.join(timeout=5.0)  # the failed JVM's own words first
        raise
    finally:
        if write_fd >= 0:
            os.close(write_fd)  # the JVM holds its own copy


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
