from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every audit test: starting one takes seconds."""
    from once.tools.audit.session import spark_session

    session = spark_session("local[2]", for_tests=True)
    yield session
    session.stop()
