"""A local SparkSession set up for this project: loopback only, free ports, UTC, the ``samsa`` format.

The settings follow what the offline measurements found (shared research note on PySpark): Python
workers must run this interpreter (so they find pyarrow and ``pipeline``), the driver must bind to
127.0.0.1 on ports chosen now rather than Spark's fixed defaults, and two shuffle partitions suit a
two-core machine.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from pipeline.source import SamsaDataSource

# The JVM's C1 compiler only and the serial collector: a second or two less to start, for tests.
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session(
    app_name: str = "samsa-pipeline",
    master: str = "local[2]",
    driver_memory: str = "1g",
    quick_start: bool = False,
    log_level: str = "WARN",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with the ``samsa`` data source registered; ``conf`` adds or overrides settings."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = "-Duser.timezone=UTC" + (f" {QUICK_START_JAVA_OPTIONS}" if quick_start else "")
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.port": str(_free_port()),
        "spark.blockManager.port": str(_free_port()),
        "spark.port.maxRetries": "16",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        **(conf or {}),
    }
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(SamsaDataSource)
    return spark


def stop(spark: SparkSession) -> None:
    """Stops the session and waits for its JVM to exit (it is this process's child; killed by PID if
    it lingers)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
    if process is not None:
        try:
            process.stdin.close()  # the gateway JVM exits when its stdin closes
            process.wait(timeout=10)
        except Exception:
            process.kill()
            process.wait()
