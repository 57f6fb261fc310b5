"""An expected failure raised in a Spark task reaches the driver as the text of its Python
traceback, wrapped in Spark's and Py4J's; the app finds its one line and exit code by the
error's qualified name (``kafkaio.errors.KafkaOutage`` / ``DataLoss``), which must follow the
class wherever it is defined."""

from __future__ import annotations

import traceback

from app.main import explain_failure
from config.exitcodes import EXIT_DATA_LOSS, EXIT_OUTAGE
from kafkaio.errors import DataLoss, KafkaOutage


def task_failure(exc: Exception) -> str:
    """The text a failed query carries for ``exc`` raised in a Python task."""
    try:
        raise exc
    except Exception as raised:
        trace = "".join(traceback.format_exception(raised))
    return ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
            "3.0 failed 1 times\norg.apache.spark.api.python.PythonException: Traceback (most "
            f"recent call last):\n{trace}\tat org.apache.spark.api.python.BasePythonRunner")


def test_an_outage_in_a_task_is_its_line_and_exit_code_4():
    text = task_failure(KafkaOutage("Kafka at h:9092 did not answer for 300 s (reading)"))
    assert explain_failure(text, "/ckpt") == (
        EXIT_OUTAGE, "Kafka at h:9092 did not answer for 300 s (reading)")


def test_data_loss_in_a_task_is_exit_code_5_naming_what_is_gone():
    code, line = explain_failure(task_failure(DataLoss("p[1] no longer holds offset 10")),
                                 "/ckpt")
    assert code == EXIT_DATA_LOSS
    assert line.startswith("data loss: p[1] no longer holds offset 10. The checkpoint /ckpt")
