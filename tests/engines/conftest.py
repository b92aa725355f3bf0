"""One local Spark session for every Spark test (starting Spark takes seconds).

Spark tests are never skipped: without Java or PySpark this fixture fails with the engine's
one-line error saying what to install. Under pytest-xdist (``--dist loadfile``) the one file
using this fixture runs on one worker, so one JVM starts per run.
"""

import pytest

#: JVM options for a short-lived test JVM: the client compiler only (C2's optimizing compiler
#: threads burned about half of the JVM's CPU time in these tests — measured 86 s vs 45 s of JVM
#: CPU for the everyday Spark tests — and never paid back in a run this short) and the serial
#: collector (no parallel GC threads on a 2-core machine). Spark's SQL and results are unchanged.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from dpmatrix.engines._spark_engine import spark_session

    session, owned = spark_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
            # not ./spark-warehouse in the working directory
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
        },
    )
    yield session
    if owned:
        session.stop()
