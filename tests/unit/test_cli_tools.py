"""`rag-agent tools --openai`: the tool schemas for OpenAI function calling."""

from __future__ import annotations

import io
import json

from rag_agent.cli import EXIT_OK, main


class TestToolsCommand:
    """`tools --openai` prints the four tools as function-calling schemas."""

    def test_openai_schemas(self) -> None:
        """The output is a JSON list of functions named after the tools, with object parameters."""
        out, err = io.StringIO(), io.StringIO()
        assert main(["tools", "--openai"], stdout=out, stderr=err) == EXIT_OK, err.getvalue()
        schemas = json.loads(out.getvalue())
        names = [s["function"]["name"] for s in schemas]
        assert names == [
            "query_leads",
            "query_table",
            "rag_agent",
            "deliver_data",
            "count_rows",
            "aggregate_table",
            "list_tables",
            "describe_table",
            "search_table",
        ]
        for schema in schemas:
            assert schema["type"] == "function"
            assert schema["function"]["description"]
            assert schema["function"]["parameters"]["type"] == "object"
        assert err.getvalue() == ""
