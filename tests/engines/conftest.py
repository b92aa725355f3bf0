"""One local Spark session for every Spark test (starting Spark takes seconds).

Spark tests are never skipped: without Java or PySpark this fixture fails with the engine's
one-line error saying what to install.
"""

import pytest


@pytest.fixture(scope="session")
def spark():
    from dpmatrix.engines.spark_engine import spark_session

    session, owned = spark_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
        },
    )
    yield session
    if owned:
        session.stop()
