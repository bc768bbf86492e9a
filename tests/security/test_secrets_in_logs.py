"""Secrets never reach logs or CLI output, not even with ``RAG_DEBUG=1`` and rich installed."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import httpx
import pytest
import structlog

from persistence import (
    ConfigurationError,
    Filter,
    Op,
    RedactingFormatter,
    get_logger,
    redact_secrets,
    redact_text,
    register_secret,
)
from persistence.secrets import mask_url
from rag_agent.cli.logs import configure_logging
from rag_agent.factory import create_rag_agent
from rag_agent.runtime.ratelimit import create_limiter
from rag_agent.settings import RAGSettings
from tests.support.cli import run
from tests.support.postgrest import BASE_URL, fake_key

PASSWORD = "Sup3rS3cretPW"
# A closed port: the connection fails at once, after the DSN was handed to the driver.
DSN = f"postgresql://reader:{PASSWORD}@127.0.0.1:1/app"


@pytest.fixture
def restore_structlog() -> Iterator[None]:
    saved, was_configured = structlog.get_config(), structlog.is_configured()
    root = logging.getLogger()
    saved_root = (root.level, list(root.handlers))
    yield
    if was_configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(saved_root[0])
    for handler in saved_root[1]:
        root.addHandler(handler)


@pytest.mark.usefixtures("restore_structlog")
class TestConnectionFailuresUnderDebug:
    def test_postgres_password_not_in_debug_logs(self) -> None:
        """A failed PostgreSQL connection logs its traceback under debug without the password."""
        logs = io.StringIO()
        configure_logging(logs, debug=True)
        agent = create_rag_agent("postgres", settings=RAGSettings(debug=True), dsn=DSN)
        try:
            envelope = agent.read("leads", [Filter("email", Op.EQ, "a@b.c")], return_json=True)
        finally:
            agent.close()
        shown = logs.getvalue()
        assert envelope["metadata"]["error"]["type"] == "BackendUnavailableError"
        assert "rag.error" in shown and "Traceback" in shown
        assert PASSWORD not in shown
        assert PASSWORD not in str(envelope)

    def test_supabase_key_not_in_debug_logs(self) -> None:
        """A failed Supabase request logs under debug without the apikey/Authorization values."""
        key = fake_key("anon")

        def refuse(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)

        logs = io.StringIO()
        configure_logging(logs, debug=True)
        agent = create_rag_agent(
            "supabase",
            settings=RAGSettings(debug=True),
            url=BASE_URL,
            key=key,
            http_client=httpx.Client(transport=httpx.MockTransport(refuse)),
        )
        envelope = agent.read("leads", [Filter("email", Op.EQ, "a@b.c")], return_json=True)
        shown = logs.getvalue()
        assert envelope["metadata"]["error"] is not None
        assert "rag.error" in shown and "Traceback" in shown
        for part in (key, key.split(".")[1]):
            assert part not in shown
            assert part not in str(envelope)

    @pytest.mark.parametrize(
        "dsn",
        [
            DSN,
            f"postgresql//reader:{PASSWORD}@127.0.0.1/app",
            f"host=127.0.0.1 password={PASSWORD} x",
        ],
    )
    def test_cli_debug_output_hides_the_password(
        self, dsn: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The CLI under RAG_DEBUG=1 prints no DSN password, even when the driver echoes it."""
        monkeypatch.setenv("RAG_DEBUG", "1")
        code, out, err = run("tables", "--backend", "postgres", "--dsn", dsn)
        assert code != 0 and "rag-agent: error" in err
        assert PASSWORD not in out + err

    def test_rich_tracebacks_show_no_locals(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The library's own logger renders a traceback without frame locals, redacted."""
        structlog.reset_defaults()

        def connect(dsn: str) -> None:
            raise OSError(f"could not connect with {dsn}")

        try:
            connect(f"postgresql://u:{PASSWORD}-local@db/app")
        except OSError as exc:
            get_logger("test").error("postgres.connect", exc_info=exc)
        err = capsys.readouterr().err
        assert "postgres.connect" in err and "Traceback" in err
        assert PASSWORD not in err

    def test_stdlib_records_are_redacted(self) -> None:
        """The CLI's stdlib handler masks a driver's log record holding a DSN."""
        stream = io.StringIO()
        configure_logging(stream, debug=True)
        logging.getLogger("psycopg.pool").warning("error connecting to %s", DSN)
        assert (
            "error connecting to" in stream.getvalue()
            and ":***@127.0.0.1:1/app" in stream.getvalue()
        )
        assert PASSWORD not in stream.getvalue()


class TestRedactText:
    @pytest.mark.parametrize(
        ("text", "secret"),
        [
            ("headers={'apikey': 'opaque-key-value'}", "opaque-key-value"),
            ('{"Authorization": "Bearer tok3n-value"}', "tok3n-value"),
            ("Authorization: Bearer tok3n-value", "tok3n-value"),
            ("conninfo 'host=h password=pw-value dbname=d'", "pw-value"),
            (
                "key eyJhbGciOiJIUzI1NiJ9.eyJyb2xlIjoiYW5vbiJ9.c2ln in a message",
                "eyJyb2xlIjoiYW5vbiJ9",
            ),
            ("postgresql://u@h/db?password=pw-value&sslmode=require", "pw-value"),
            ("sb_secret_abcdefghijkl leaked", "sb_secret_abcdefghijkl"),
        ],
    )
    def test_structural_secrets_are_masked(self, text: str, secret: str) -> None:
        """Header values, conninfo passwords, JWTs and secret keys are masked in free text."""
        masked = redact_text(text)
        assert secret not in masked
        assert "***" in masked

    def test_registered_secret_masked_anywhere(self) -> None:
        """A secret the library unwrapped is masked verbatim and URL-encoded."""
        register_secret("pa ss/w@rd#1")
        assert redact_text("x pa ss/w@rd#1 y pa%20ss%2Fw%40rd%231") == "x *** y ***"

    def test_text_without_secrets_is_unchanged(self) -> None:
        """Ordinary text, e-mail addresses and URLs without user info pass as they are."""
        text = "lead a@b.io at https://acme.example/x?page=2 (status=new)"
        assert redact_text(text) == text

    def test_processor_masks_nested_values(self) -> None:
        """The structlog processor masks strings nested in dicts and lists of the event."""
        event = redact_secrets(
            None, "info", {"event": "x", "urls": [{"u": "redis://:pw-nested@h:1/0"}], "n": 3}
        )
        assert event == {"event": "x", "urls": [{"u": "redis://:***@h:1/0"}], "n": 3}


class TestUrlMasking:
    @pytest.mark.parametrize("password", ["p@ss", "pa/ss", "pa#ss", "p@s/s#w?d", "plain"])
    def test_redis_password_hidden_whatever_it_holds(self, password: str) -> None:
        """A limiter URL is masked by parsing: '@', '/', '#' in its password show nothing."""
        url = f"redis://:{password}@127.0.0.1:6379/0"
        assert mask_url(url) == "redis://:***@127.0.0.1:6379/0"
        shown = repr(RAGSettings(rate_limit_storage=url))
        assert "redis://:***@127.0.0.1:6379/0" in shown
        assert password not in shown.replace("rate_limit_storage", "")

    def test_unsupported_storage_error_masks_the_url(self) -> None:
        """A refused limiter URI is quoted in the error without its password."""
        with pytest.raises(ConfigurationError) as info:
            create_limiter("mongodb://admin:p@ss/w0rd@db/x", 3)
        assert "w0rd" not in str(info.value) and "mongodb://admin:***@db/x" in str(info.value)

    def test_formatter_masks_exception_text(self) -> None:
        """RedactingFormatter masks the formatted traceback as well as the message."""
        try:
            raise ValueError(f"bad {DSN}")
        except ValueError:
            record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), None)
            import sys

            record.exc_info = sys.exc_info()
        assert PASSWORD not in RedactingFormatter().format(record)
