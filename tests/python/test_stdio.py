"""`executor mcp`: the same tools over stdio, spawned by the official SDK's
stdio client (SPEC §1)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import EXECUTOR_BIN, tool_text

pytestmark = pytest.mark.anyio


async def test_stdio_serves_the_same_tools_and_runs_code(tmp_path: Path) -> None:
    params = StdioServerParameters(command=EXECUTOR_BIN, args=["mcp", "--data-dir", str(tmp_path)])
    async with Client(stdio_client(params), mode="legacy", read_timeout_seconds=30) as client:
        listing = await client.list_tools(cache_mode="bypass")
        assert {t.name for t in listing.tools} == {"execute", "skills", "resume"}
        result = await client.call_tool("execute", {"code": "console.log('hi'); return 6 * 7;"})
        assert not result.is_error
        assert tool_text(result) == "42\n\nLogs:\n[log] hi"
        assert result.structured_content == {"status": "completed", "result": 42, "logs": ["[log] hi"]}
        failed = await client.call_tool("execute", {"code": "throw new Error('nope')"})
        assert failed.is_error and tool_text(failed) == "Error: nope"
    # Both runs were recorded in the same store, readable from the CLI.
    listing = subprocess.run(
        [EXECUTOR_BIN, "executions", "list", "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0, listing.stderr
    rows = [line.split("\t") for line in listing.stdout.splitlines()]
    assert [r[1] for r in rows] == ["error", "completed"], listing.stdout
    shown = subprocess.run(
        [EXECUTOR_BIN, "executions", "show", rows[1][0], "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    record = json.loads(shown.stdout)
    assert record["result"] == 42 and record["logs"] == ["[log] hi"] and record["code"].startswith("console.log")
