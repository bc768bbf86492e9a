"""Settings of the Supabase backend: url/key resolution, options, the privileged-key rule."""

from __future__ import annotations

import base64
import importlib
import json
import sys
from collections.abc import Mapping

import httpx
import pytest
from structlog.testing import capture_logs

from persistence import (
    ConfigurationError,
    Op,
    PersistenceSettings,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.supabase import create_backend, key_role
from tests.support.http import ScriptedServer, rows_response
from tests.support.ids import stable_id
from tests.support.postgrest import BASE_URL, fake_key


def _jwt(claims: Mapping[str, object]) -> str:
    """An unsigned JWT-shaped key with exactly these claims."""

    def part(data: Mapping[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.sig"


@pytest.fixture
def http() -> httpx.Client:
    server = ScriptedServer([rows_response([], "*/0")])
    return httpx.Client(transport=httpx.MockTransport(server))


@pytest.fixture(autouse=True)
def _no_supabase_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPABASE_URL", raising=False)
    monkeypatch.delenv("SUPABASE_KEY", raising=False)


class TestSettings:
    @pytest.mark.parametrize(
        ("given", "variable", "argument"),
        [({"key": "k"}, "SUPABASE_URL", "url="), ({"url": BASE_URL}, "SUPABASE_KEY", "key=")],
    )
    def test_missing_setting_names_variable_and_argument(
        self, given: dict[str, str], variable: str, argument: str
    ) -> None:
        """A missing url or key raises ConfigurationError naming the variable and the argument."""
        with pytest.raises(ConfigurationError) as info:
            create_backend(**given)
        assert variable in str(info.value)
        assert argument in str(info.value)
        assert info.value.variable == variable

    def test_environment_supplies_url_and_key(
        self, monkeypatch: pytest.MonkeyPatch, http: httpx.Client
    ) -> None:
        """``SUPABASE_URL``/``SUPABASE_KEY`` are used when no argument is given."""
        monkeypatch.setenv("SUPABASE_URL", BASE_URL)
        monkeypatch.setenv("SUPABASE_KEY", fake_key())
        facade = create_read_only_facade(kind="supabase", http_client=http)
        assert facade.count("leads") == 0
        request = http._transport.handler.requests[0]  # type: ignore[attr-defined]
        assert request.url.host == "emulated.supabase.test"

    def test_settings_argument_supplies_url_and_key(self, http: httpx.Client) -> None:
        """``settings=`` fills url and key the caller left out, with no environment read."""
        settings = PersistenceSettings(supabase_url=BASE_URL, supabase_key=fake_key())
        facade = create_read_only_facade(kind="supabase", settings=settings, http_client=http)
        assert facade.count("leads") == 0
        request = http._transport.handler.requests[0]  # type: ignore[attr-defined]
        assert request.url.host == "emulated.supabase.test"
        assert request.headers["apikey"] == fake_key()

    def test_backend_hook_reads_no_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``create_backend`` takes explicit arguments only: the factories read the settings."""
        monkeypatch.setenv("SUPABASE_URL", BASE_URL)
        monkeypatch.setenv("SUPABASE_KEY", fake_key())
        with pytest.raises(ConfigurationError, match="pass url= or set SUPABASE_URL"):
            create_backend()

    def test_arguments_win_over_environment(
        self, monkeypatch: pytest.MonkeyPatch, http: httpx.Client
    ) -> None:
        """Explicit url=/key= are used even when the variables are set."""
        monkeypatch.setenv("SUPABASE_URL", "https://other.example")
        monkeypatch.setenv("SUPABASE_KEY", fake_key("other"))
        facade = create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key(), http_client=http
        )
        facade.count("leads")
        request = http._transport.handler.requests[0]  # type: ignore[attr-defined]
        assert request.url.host == "emulated.supabase.test"
        assert request.headers["apikey"] == fake_key()

    @pytest.mark.parametrize(
        "options",
        [
            {"count": "approximate"},
            {"page_size": 0},
            {"page_size": "10"},
            {"timeout": 0},
            {"timeout": True},
            {"retries": -1},
            {"retries": 11},
            {"http_client": object()},
            {"allow_privileged": "yes"},
            {"dsn": "postgresql://x"},
        ],
        ids=stable_id,
    )
    def test_bad_options_are_configuration_errors(self, options: dict[str, object]) -> None:
        """Every malformed or unknown option is refused before anything is sent."""
        with pytest.raises(ConfigurationError):
            create_backend(url=BASE_URL, key=fake_key(), **options)

    def test_bad_url_is_a_configuration_error(self) -> None:
        """A URL the client rejects becomes ConfigurationError naming SUPABASE_URL."""
        with pytest.raises(ConfigurationError) as info:
            create_backend(url="ftp://nowhere", key=fake_key())
        assert info.value.variable == "SUPABASE_URL"

    def test_capabilities_are_declared(self, http: httpx.Client) -> None:
        """Every operator is declared."""
        backend = create_backend(url=BASE_URL, key=fake_key(), http_client=http)
        assert backend.capabilities.operators == frozenset(Op)

    def test_missing_package_gives_install_hint(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the supabase package, importing the backend names the extra to install."""
        monkeypatch.setitem(sys.modules, "supabase", None)
        monkeypatch.delitem(sys.modules, "persistence.backends.supabase", raising=False)
        with pytest.raises(ConfigurationError, match=r"readonly-rag\[supabase\]"):
            importlib.import_module("persistence.backends.supabase")


class TestPrivilegedKeys:
    @pytest.mark.parametrize(
        ("key", "role"),
        [
            (fake_key("anon"), "anon"),
            (fake_key("service_role"), "service_role"),
            ("sb_secret_abc123", "service_role"),
            ("sb_publishable_abc123", None),
            ("not-a-jwt", None),
            ("a.!!!.c", None),
            ("a.bnVsbA.c", None),
        ],
    )
    def test_key_role_reads_the_claim(self, key: str, role: str | None) -> None:
        """The role claim is read from the JWT payload; secret keys count as service_role."""
        assert key_role(key) == role

    @pytest.mark.parametrize("parts", [4, 2, 5])
    def test_a_dotted_non_jwt_key_claiming_a_role_counts_as_it(
        self, http: httpx.Client, parts: int
    ) -> None:
        """A key of another dotted shape whose part claims service_role is refused, as a JWT
        claiming it is (a gateway may accept what is no JWT to the facade)."""
        jwt = fake_key("service_role").split(".")
        key = ".".join([*jwt[:2], *(["sig"] * (parts - 2))])
        assert key_role(key) == "service_role"
        with pytest.raises(ConfigurationError, match="row-level security"):
            create_read_only_facade(kind="supabase", url=BASE_URL, key=key, http_client=http)
        anon = ".".join([*fake_key("anon").split(".")[:2], "a", "b"])
        assert key_role(anon) == "anon"

    def test_service_role_refused_for_read_only(self, http: httpx.Client) -> None:
        """The read-only facade refuses a key that bypasses row-level security."""
        with pytest.raises(ConfigurationError, match="row-level security") as info:
            create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key("service_role"), http_client=http
            )
        assert info.value.variable == "SUPABASE_KEY"

    @pytest.mark.parametrize("role", ["supabase_admin", "postgres", "dashboard_user", ""])
    def test_any_role_but_anon_or_authenticated_refused(
        self, http: httpx.Client, role: str
    ) -> None:
        """A key whose role is not anon/authenticated is refused, not only service_role."""
        with pytest.raises(ConfigurationError, match="row-level security") as info:
            create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key(role), http_client=http
            )
        assert info.value.variable == "SUPABASE_KEY"

    @pytest.mark.parametrize(
        "claims",
        [{"iss": "supabase"}, {"role": None}, {"role": 7}, {"role": ["anon"]}, {}],
    )
    def test_jwt_without_role_claim_refused(
        self, http: httpx.Client, claims: dict[str, object]
    ) -> None:
        """A JWT naming no role reads as whatever role the server maps it to: refused."""
        key = _jwt(claims)
        with pytest.raises(ConfigurationError, match="without a 'role' claim") as info:
            create_read_only_facade(kind="supabase", url=BASE_URL, key=key, http_client=http)
        assert info.value.variable == "SUPABASE_KEY"
        assert key not in str(info.value)

    def test_jwt_without_role_claim_accepted_when_privileged(self, http: httpx.Client) -> None:
        """``allow_privileged=True`` accepts it, with the privileged-key warning."""
        with capture_logs() as logs:
            facade = create_read_only_facade(
                kind="supabase",
                url=BASE_URL,
                key=_jwt({"iss": "supabase"}),
                http_client=http,
                allow_privileged=True,
            )
        assert facade.count("leads") == 0
        assert [event["event"] for event in logs if event["log_level"] == "warning"] == [
            "supabase.privileged_key"
        ]

    def test_writer_accepts_jwt_without_role_claim(self, http: httpx.Client) -> None:
        """The rule is the read-only facade's; the writer takes the key as given."""
        agent = create_persistence_agent(
            kind="supabase", url=BASE_URL, key=_jwt({"iss": "supabase"}), http_client=http
        )
        assert agent.count("leads") == 0

    @pytest.mark.parametrize("role", ["anon", "authenticated"])
    def test_row_level_security_roles_accepted(self, http: httpx.Client, role: str) -> None:
        """The anon and authenticated roles are subject to row-level security: accepted."""
        facade = create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key(role), http_client=http
        )
        assert facade.count("leads") == 0

    def test_allowed_roles_widens_the_list(self, http: httpx.Client) -> None:
        """A configured allow-list accepts its roles and still refuses the others."""
        facade = create_read_only_facade(
            kind="supabase",
            url=BASE_URL,
            key=fake_key("reporting"),
            http_client=http,
            allowed_roles=("anon", "reporting"),
        )
        assert facade.count("leads") == 0
        with pytest.raises(ConfigurationError, match="'authenticated'"):
            create_read_only_facade(
                kind="supabase",
                url=BASE_URL,
                key=fake_key("authenticated"),
                http_client=http,
                allowed_roles=("anon", "reporting"),
            )
        with pytest.raises(ConfigurationError, match="collection of role names"):
            create_read_only_facade(
                kind="supabase",
                url=BASE_URL,
                key=fake_key("anon"),
                http_client=http,
                allowed_roles="anon",
            )

    def test_allow_privileged_accepts_with_warning(self, http: httpx.Client) -> None:
        """``allow_privileged=True`` accepts the key and logs a warning."""
        with capture_logs() as logs:
            facade = create_read_only_facade(
                kind="supabase",
                url=BASE_URL,
                key=fake_key("service_role"),
                http_client=http,
                allow_privileged=True,
            )
        assert facade.count("leads") == 0
        assert [
            event
            for event in logs
            if event["log_level"] == "warning" and event.get("role") == "service_role"
        ] == [
            {
                "event": "supabase.privileged_key",
                "log_level": "warning",
                "role": "service_role",
                "hint": "read-only facade with allow_privileged=True: row-level security is "
                "bypassed",
            }
        ]

    def test_writer_may_use_service_role(self, http: httpx.Client) -> None:
        """The read-write agent (seeding, trusted callers) accepts a service_role key."""
        agent = create_persistence_agent(
            kind="supabase", url=BASE_URL, key=fake_key("service_role"), http_client=http
        )
        assert agent.count("leads") == 0
