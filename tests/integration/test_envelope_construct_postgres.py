"""The envelope's models built without validating the run's values again are the validated
models on PostgreSQL too (its uuids, timestamps and numerics; see
``tests/unit/test_envelope_construct.py``): every envelope of the labelled questions built both
ways, compared field by field and byte by byte."""

from __future__ import annotations

import pytest

from tests.conftest import POSTGRES_ADMIN_DSN, _postgres_admin_connect, require_service
from tests.data.schema_accuracy import evaluate
from tests.unit.test_envelope_construct import Checked, checked

__all__ = ["checked"]  # the fixture, shared with the memory twin

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(900)]


def test_labelled_questions_on_postgres(checked: Checked) -> None:
    admin = _postgres_admin_connect(POSTGRES_ADMIN_DSN)
    require_service(admin is not None, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    assert admin is not None
    admin.close()
    report = evaluate("postgres")
    assert checked.compared >= len(report.results)
    assert checked.plain >= len(report.results) // 2
