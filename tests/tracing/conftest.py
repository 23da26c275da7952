"""Fixtures shared by the tracing tests."""

import pytest


@pytest.fixture
def fake_langsmith():
    """A LangSmith ingest endpoint on loopback (:class:`tests.tracing.test_tracing.FakeLangSmith`)."""
    from .test_tracing import FakeLangSmith

    srv = FakeLangSmith()
    yield srv
    srv.close()
