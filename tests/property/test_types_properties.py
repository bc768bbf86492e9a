"""Properties of value coercion: idempotent, round-trips, only typed errors, and PostgreSQL agrees.

The agreement test sends each candidate string, as text, to PostgreSQL's own input function
(``SELECT ($1::text)::<type>``) in a session whose ``TimeZone`` is UTC. Wherever our coercion
accepts a string, the server must accept it too and read the same value. The reverse is not
required: we refuse on purpose some strings the server takes (prefixes such as ``'tr'`` for
true, locale date formats, ``24:00``, lower-case ``z``, ``'42.0'``-style fractions rounded by
the server...). Deliberate differences, handled below where they arise:

* a uuid padded with whitespace: we strip it, PostgreSQL refuses it; the stripped string is sent;
* an offset on a ``timestamp`` (without time zone): we convert to UTC, PostgreSQL ignores the
  offset; the server is asked for ``($1::text)::timestamptz AT TIME ZONE 'UTC'`` instead, which
  states our rule, after checking that ``::timestamp`` accepts the string too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from persistence import Filter, InvalidQueryError, Op
from persistence.values.types import ColumnKind, coerce_filter, coerce_value, column_type
from tests.conftest import PostgresDatabase

TYPE_NAMES = ("uuid", "int2", "int4", "int8", "numeric", "float8", "float4", "bool", "date",
              "timestamp", "timestamptz", "time", "text", "jsonb", "interval")  # fmt: skip


def coerce(type_name: str, value: Any) -> Any:
    return coerce_value(value, column_type(type_name), table="t", column="c")


def coerced_or_none(type_name: str, value: Any) -> Any:
    try:
        return coerce(type_name, value)
    except InvalidQueryError:
        return None


# --- strategies -----------------------------------------------------------------------------------

# Offsets PostgreSQL accepts in input (±15:59:59), whole minutes: isoformat writes no seconds then.
offsets = st.integers(min_value=-(15 * 60 + 59), max_value=15 * 60 + 59).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)
# Years 2..9998: a zone shift never leaves Python's date range.
datetimes = st.datetimes(min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 12, 31))
aware_datetimes = st.builds(lambda d, tz: d.replace(tzinfo=tz), datetimes, offsets)
dates = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.decimals()
    | st.text()
    | st.binary(max_size=8)
    | dates
    | datetimes
    | aware_datetimes
    | st.times()
    | st.uuids()
    | st.timedeltas()
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=2)
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=6,
)
# Strings that look like values: digits, signs, separators, hex, words, spaces and look-alikes.
NEAR_ALPHABET = "0123456789+-.:eETtZz _{}abcdefABCDEFxynofl٣\t\n"
near_miss = st.text(alphabet=NEAR_ALPHABET, max_size=40)


def _spaced(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pad = st.sampled_from(["", " ", "\t", "  \n"])
    return st.builds(lambda a, s, b: a + s + b, pad, strategy, pad)


def _timestamp_text(moment: dt.datetime, sep: str, spec: str, zulu: bool) -> str:
    text = moment.isoformat(sep=sep, timespec=spec)
    return text.replace("+00:00", "Z") if zulu else text


timestamp_texts = st.builds(
    _timestamp_text,
    datetimes | aware_datetimes,
    st.sampled_from(["T", " ", "t"]),
    st.sampled_from(["minutes", "seconds", "milliseconds", "microseconds", "auto"]),
    st.booleans(),
)
INT_RANGES = {"int2": 2**15, "int4": 2**31, "int8": 2**63}
CANDIDATES: dict[str, st.SearchStrategy[str]] = {
    "uuid": st.uuids().flatmap(
        lambda u: st.sampled_from(
            [str(u), str(u).upper(), u.hex, "{" + str(u) + "}", f" {u} ", str(u)[:-1] + "g"]
        )
    )
    | st.text(alphabet="0123456789abcdefABCDEF-{} ", min_size=30, max_size=40),
    **{
        name: _spaced(
            st.integers(min_value=-limit - 2, max_value=limit + 2).map(str)
            | st.integers(min_value=0, max_value=999).map(lambda i: f"+{i:05d}")
        )
        | near_miss
        for name, limit in INT_RANGES.items()
    },
    "numeric": _spaced(
        decimals.map(str) | decimals.map(lambda d: format(d, "f")) | st.integers().map(str)
    )
    | st.text(alphabet="0123456789+-.eE ", max_size=20),
    "float8": _spaced(
        st.floats(allow_nan=False, allow_infinity=False).map(repr)
        | st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.3e}")
    )
    | st.text(alphabet="0123456789+-.eE ", max_size=20),
    "bool": _spaced(
        st.sampled_from(
            ["true", "false", "t", "f", "yes", "no", "y", "n", "on", "off", "1", "0"]
        ).flatmap(lambda w: st.sampled_from([w, w.upper(), w.capitalize()]))
    )
    | near_miss,
    "date": _spaced(dates.map(dt.date.isoformat) | timestamp_texts) | near_miss,
    "timestamp": _spaced(timestamp_texts | dates.map(dt.date.isoformat)) | near_miss,
    "timestamptz": _spaced(timestamp_texts | dates.map(dt.date.isoformat)) | near_miss,
    "time": _spaced(
        st.builds(
            lambda t, spec: t.isoformat(timespec=spec),
            st.times(),
            st.sampled_from(["minutes", "seconds", "milliseconds", "microseconds", "auto"]),
        )
    )
    | near_miss,
}


# --- properties -----------------------------------------------------------------------------------


class TestNeverRaisesAnythingElse:
    @given(type_name=st.sampled_from(TYPE_NAMES), value=junk | near_miss)
    def test_coerce_value(self, type_name: str, value: Any) -> None:
        """Any input either coerces or raises InvalidQueryError with field 'value'."""
        try:
            coerce(type_name, value)
        except InvalidQueryError as error:
            assert error.field == "value"
            assert str(error).startswith("t.c ")

    @given(
        type_name=st.sampled_from(TYPE_NAMES),
        op=st.sampled_from([op for op in Op if op is not Op.IS_NULL]),
        value=scalars | st.lists(scalars, min_size=1, max_size=4) | near_miss,
    )
    def test_coerce_filter(self, type_name: str, op: Op, value: Any) -> None:
        """Any Filter either coerces to a Filter of the same column and op, or is refused."""
        try:
            flt = Filter("c", op, value)
        except InvalidQueryError:
            return
        try:
            result = coerce_filter(flt, column_type(type_name), table="t")
        except InvalidQueryError as error:
            assert error.field in ("value", "op")
            return
        assert (result.column, result.op) == ("c", op)


class TestIdempotent:
    @given(
        type_name=st.sampled_from(TYPE_NAMES),
        value=scalars
        | near_miss
        | st.sampled_from([c for c in CANDIDATES]).flatmap(CANDIDATES.__getitem__),
    )
    def test_coercing_twice_changes_nothing(self, type_name: str, value: Any) -> None:
        """A coerced value coerces to an equal value of the same type."""
        once = coerced_or_none(type_name, value)
        if once is None:
            return
        twice = coerce(type_name, once)
        if column_type(type_name).kind in (ColumnKind.JSON, ColumnKind.OTHER):
            assert twice is once is value  # passed through untouched (NaN included)
            return
        assert twice == once
        assert type(twice) is type(once)
        if isinstance(once, dt.datetime):
            assert twice.utcoffset() == once.utcoffset()

    @given(value=st.sampled_from(list(CANDIDATES)).flatmap(CANDIDATES.__getitem__))
    def test_filters_are_stable(self, value: str) -> None:
        """A filter coerced once is returned as the very same object the second time."""
        for type_name in CANDIDATES:
            try:
                flt = coerce_filter(Filter("c", Op.IN, [value]), column_type(type_name), table="t")
            except InvalidQueryError:
                continue
            assert coerce_filter(flt, column_type(type_name), table="t") is flt


class TestRoundTrips:
    @given(st.uuids())
    def test_uuid(self, value: uuid.UUID) -> None:
        """str(uuid), its hex and its upper case all read back as the uuid."""
        for text in (str(value), value.hex, str(value).upper()):
            assert coerce("uuid", text) == value

    @given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
    def test_bigint(self, value: int) -> None:
        """str(int) reads back as the int."""
        assert coerce("int8", str(value)) == value

    @given(decimals)
    def test_numeric(self, value: decimal.Decimal) -> None:
        """str(Decimal) reads back as an equal Decimal (within numeric's limits)."""
        result = coerced_or_none("numeric", str(value))
        assert result is None or result == value

    @given(st.floats(allow_nan=False, allow_infinity=False))
    def test_float(self, value: float) -> None:
        """repr(float) reads back as the float."""
        assert coerce("float8", repr(value)) == value

    @given(dates)
    def test_date(self, value: dt.date) -> None:
        """date.isoformat() reads back as the date."""
        assert coerce("date", value.isoformat()) == value

    @given(aware_datetimes, st.sampled_from(["T", " "]))
    def test_timestamptz(self, value: dt.datetime, sep: str) -> None:
        """An aware isoformat reads back as the same instant, in UTC."""
        result = coerce("timestamptz", value.isoformat(sep=sep))
        assert result == value
        assert result.utcoffset() == dt.timedelta(0)

    @given(datetimes)
    def test_naive_timestamptz_is_utc(self, value: dt.datetime) -> None:
        """A naive isoformat on a timestamptz column is that wall time in UTC."""
        assert coerce("timestamptz", value.isoformat()) == value.replace(tzinfo=dt.UTC)

    @given(datetimes)
    def test_timestamp(self, value: dt.datetime) -> None:
        """A naive isoformat reads back as the same naive datetime on a timestamp column."""
        assert coerce("timestamp", value.isoformat()) == value

    @given(aware_datetimes)
    def test_aware_timestamp_is_utc_wall_time(self, value: dt.datetime) -> None:
        """An aware value on a timestamp column is its UTC wall time, without zone."""
        expected = value.astimezone(dt.UTC).replace(tzinfo=None)
        assert coerce("timestamp", value.isoformat()) == expected
        assert coerce("timestamp", value) == expected

    @given(st.times())
    def test_time(self, value: dt.time) -> None:
        """time.isoformat() reads back as the time."""
        assert coerce("time", value.isoformat()) == value


# --- agreement with PostgreSQL --------------------------------------------------------------------

# The SQL type each candidate set is cast to (constants of this module, never values).
SQL_TYPES = {"uuid": "uuid", "int2": "smallint", "int4": "integer", "int8": "bigint",
             "numeric": "numeric", "float8": "double precision", "bool": "boolean",
             "date": "date", "timestamp": "timestamp", "timestamptz": "timestamptz",
             "time": "time"}  # fmt: skip


@pytest.fixture(scope="module")
def server(postgres_db: PostgresDatabase) -> Iterator[Any]:
    """One admin connection to the test database, in a UTC session, for the whole module."""
    import psycopg

    with psycopg.connect(postgres_db.admin_dsn, autocommit=True) as conn:
        conn.execute(b"SET TIME ZONE 'UTC'")
        yield conn


def server_reads(conn: Any, text: str, sql_type: str) -> tuple[bool, Any]:
    """(accepted, value) of PostgreSQL's input function for ``sql_type`` on ``text``."""
    import psycopg

    try:
        row = conn.execute(f"SELECT (%s::text)::{sql_type}".encode(), (text,)).fetchone()
    except psycopg.DataError as error:
        return False, str(error).splitlines()[0]
    return True, row[0]


@pytest.mark.postgres
class TestAgreesWithPostgres:
    @pytest.mark.parametrize("type_name", list(SQL_TYPES))
    @given(data=st.data())
    def test_accepted_strings_read_the_same_on_the_server(
        self, server: Any, type_name: str, data: st.DataObject
    ) -> None:
        """Where our coercion accepts a string, PostgreSQL accepts it and reads the same value."""
        text = data.draw(CANDIDATES[type_name], label="text")
        ours = coerced_or_none(type_name, text)
        event("accepted" if ours is not None else "refused")
        if ours is None:
            return
        sql_type = SQL_TYPES[type_name]
        kind = column_type(type_name).kind
        sent = text.strip(" \t\n\r\f\v") if kind is ColumnKind.UUID else text
        accepted, theirs = server_reads(server, sent, sql_type)
        note(f"ours={ours!r} server={theirs!r}")
        assert accepted, f"server refused {sent!r} as {sql_type}: {theirs}"
        if kind is ColumnKind.TIMESTAMP:
            # Our rule for an offset on a timestamp column: the UTC wall time (see module doc).
            row = server.execute(
                b"SELECT (%s::text)::timestamptz AT TIME ZONE 'UTC'", (text,)
            ).fetchone()
            theirs = row[0]
        assert theirs == ours
        assert type(theirs) is type(ours)

    def test_sample_of_refusals_the_server_also_refuses(self, server: Any) -> None:
        """Strings we refuse for being malformed, the server refuses too (not only the reverse)."""
        for text, type_name in [
            ("abc", "uuid"), ("1_000", "int4"), ("0x", "int4"), ("1e3", "int8"),
            ("32768", "int2"), ("NaN1", "numeric"), ("1e-400", "float8"), ("maybe", "bool"),
            ("2025-02-30", "date"), ("2025-03-01T25:00", "timestamp"),
            ("2025-03-01T10:00+16:00", "timestamptz"), ("10:61", "time"),
        ]:  # fmt: skip
            assert coerced_or_none(type_name, text) is None
            accepted, _ = server_reads(server, text, SQL_TYPES[type_name])
            assert not accepted, (text, type_name)

    @pytest.mark.parametrize(
        ("text", "type_name", "server_value"),
        [("tr", "bool", True), ("42.0", "int4", None), ("2025-03-01 13:45", "date", None),
         ("10:00:00.1234567", "time", dt.time(10, 0, 0, 123457)),
         ("24:00", "time", None), ("2025-03-01T10:00z", "timestamptz", None)],
    )  # fmt: skip
    def test_documented_stricter_cases(
        self, server: Any, text: str, type_name: str, server_value: Any
    ) -> None:
        """Strings PostgreSQL may take or round, which we refuse rather than guess."""
        assert coerced_or_none(type_name, text) is None
        accepted, value = server_reads(server, text, SQL_TYPES[type_name])
        if server_value is not None:
            assert accepted and value == server_value
