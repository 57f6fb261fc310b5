"""When the app's idle clock may run: not while Spark is still starting the query."""

from app.main import starting


def status(message: str, data: bool = False, trigger: bool = False) -> dict:
    """A StreamingQuery.status as PySpark returns it (messages as Spark 4 writes them)."""
    return {"message": message, "isDataAvailable": data, "isTriggerActive": trigger}


def test_the_query_is_starting_while_spark_initialises_its_sources():
    assert starting(status("Initializing sources"))
    assert starting(status("Initializing StreamExecution"))


def test_the_query_has_started_once_a_trigger_ran():
    for message in ("Getting offsets from PythonMicroBatchStream@1", "Processing new data",
                    "Writing offsets to log", "Waiting for data to arrive",
                    "Waiting for next trigger"):
        assert not starting(status(message, trigger=True))
