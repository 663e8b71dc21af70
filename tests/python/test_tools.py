"""Handshake, tool listing and the three tools, through the official `mcp` SDK
(SPEC §2, §5)."""

from __future__ import annotations

import re

import httpx2
import pytest

import rawhttp
from conftest import ExecutorServer, connect, mint_token, tool_text

pytestmark = pytest.mark.anyio


async def test_initialize_negotiates_and_advertises_capabilities(server: ExecutorServer) -> None:
    async with connect(server) as (client, rec):
        # SPEC §2: echo the client's version when supported (the SDK offers 2025-11-25).
        assert client.protocol_version == "2025-11-25"
        caps = client.server_capabilities
        assert caps.tools is not None, "SPEC §2: capability `tools` advertised"
        assert caps.tools.list_changed is True, "SPEC §2: tools.listChanged: true"
        assert caps.logging is not None, "SPEC §2: capability `logging` advertised"
        assert client.server_info is not None and client.server_info.name

        # SPEC §3: session id of >= 128 bits, URL-safe.
        sid = rec.session_id
        assert sid, "initialize response carried no mcp-session-id"
        assert re.fullmatch(r"[A-Za-z0-9._~-]+", sid), f"session id is not URL-safe: {sid!r}"
        assert len(sid) >= 22, f"session id too short for 128 bits of randomness: {sid!r}"


async def test_list_tools_has_three_tools_with_input_schemas(server: ExecutorServer) -> None:
    async with connect(server) as (client, _):
        listing = await client.list_tools(cache_mode="bypass")
        tools = {t.name: t for t in listing.tools}
        assert set(tools) == {"execute", "skills", "resume"}, f"SPEC §5: three tools, got {sorted(tools)}"
        for name, tool in tools.items():
            assert tool.description and tool.description.strip(), f"{name}: no description"
            assert tool.input_schema.get("type") == "object", f"{name}: input schema {tool.input_schema}"

        ex = tools["execute"].input_schema
        assert ex["properties"]["code"]["type"] == "string"
        assert "code" in ex.get("required", [])
        desc = tools["execute"].description
        assert "skills" in desc, "SPEC §5: execute description points to the `skills` tool"
        assert "## Available integrations" in desc, "SPEC §5: execute description lists integrations"

        sk = tools["skills"].input_schema
        assert sk["properties"]["name"]["type"] == "string"
        assert "name" not in sk.get("required", []), "skills.name is optional"

        rs = tools["resume"].input_schema
        props = rs["properties"]
        assert props["executionId"]["type"] == "string"
        assert set(props["action"].get("enum", [])) == {"accept", "decline", "cancel"}, props["action"]
        assert props["content"]["type"] == "string"
        assert {"executionId", "action"} <= set(rs.get("required", []))
        assert "content" not in rs.get("required", []), "resume.content is optional"


async def test_execute_returns_value(server: ExecutorServer) -> None:
    async with connect(server) as (client, _):
        r = await client.call_tool("execute", {"code": "return 1;"})
        assert not r.is_error
        assert tool_text(r) == "1"
        assert r.structured_content == {"status": "completed", "result": 1, "logs": []}

        r = await client.call_tool("execute", {"code": "return 6 * 7;"})
        assert not r.is_error
        assert tool_text(r) == "42"
        assert r.structured_content["result"] == 42

        r = await client.call_tool("execute", {"code": 'return "plain text";'})
        assert tool_text(r) == "plain text", "SPEC §5: a string result is returned verbatim"


async def test_execute_thrown_error_envelope(server: ExecutorServer) -> None:
    async with connect(server) as (client, _):
        r = await client.call_tool("execute", {"code": 'throw new Error("x");'})
        assert r.is_error is True
        text = tool_text(r)
        assert text.startswith("Error: x"), text
        sc = r.structured_content
        assert isinstance(sc, dict), f"SPEC §5: structuredContent on error, got {sc!r}"
        assert sc.get("status") == "error", sc
        assert "x" in str(sc.get("error")), sc
        assert sc.get("logs") == [], sc


async def test_execute_empty_code_is_tool_error(server: ExecutorServer) -> None:
    async with connect(server) as (client, _):
        r = await client.call_tool("execute", {"code": "   "})
        assert r.is_error is True, "SPEC §5: empty code -> tool error"


async def test_skills(server: ExecutorServer) -> None:
    async with connect(server) as (client, _):
        index = await client.call_tool("skills", {})
        assert not index.is_error
        index_text = tool_text(index)
        assert "execute" in index_text, f"skills index does not list `execute`: {index_text[:500]!r}"

        howto = await client.call_tool("skills", {"name": "execute"})
        assert not howto.is_error
        text = "\n".join(b.text for b in howto.content if b.type == "text")
        for needle in ("tools.search", "tools.describe.tool", "emit", "Available integrations"):
            assert needle in text, f"SPEC §5: skills(execute) mentions {needle!r}"

        unknown = await client.call_tool("skills", {"name": "no-such-skill-xyz"})
        assert unknown.is_error is True, "SPEC §5: unknown skill -> index with isError"
        assert "execute" in tool_text(unknown), "SPEC §5: unknown skill returns the index"


async def test_ping(server: ExecutorServer) -> None:
    async with connect(server) as (client, rec):
        await client.send_ping()
        # The exact wire result must be {}.
        async with httpx2.AsyncClient(timeout=30) as http:
            reply = await rawhttp.rpc(http, server.url, server.token, "ping", session_id=rec.session_id)
        assert reply.status == 200, rawhttp.describe(reply)
        assert reply.message is not None and reply.message.get("result") == {}, rawhttp.describe(reply)


async def test_logging_set_level(server: ExecutorServer) -> None:
    async with connect(server) as (client, rec):
        for level in ("debug", "info", "warning", "error"):
            await client.set_logging_level(level)
        async with httpx2.AsyncClient(timeout=30) as http:
            ok = await rawhttp.rpc(
                http, server.url, server.token, "logging/setLevel", {"level": "notice"}, session_id=rec.session_id
            )
            assert ok.status == 200, rawhttp.describe(ok)
            assert ok.message is not None and ok.message.get("result") == {}, "SPEC §2: logging/setLevel -> {}"

            # MCP logging: an invalid level is a JSON-RPC error (-32602 Invalid params).
            bad = await rawhttp.rpc(
                http, server.url, server.token, "logging/setLevel", {"level": "loud"}, session_id=rec.session_id
            )
            assert bad.message is not None and "error" in bad.message, rawhttp.describe(bad)
            assert bad.message["error"]["code"] == -32602, rawhttp.describe(bad)
        # The session still works afterwards.
        r = await client.call_tool("execute", {"code": "return 1;"})
        assert tool_text(r) == "1"


async def test_sdk_default_auto_mode(server: ExecutorServer) -> None:
    """The SDK's default mode probes server/discover (protocol 2026-07-28,
    sessionless; SPEC §2 lists it as accepted) and must be able to call tools."""
    async with connect(server, mode="auto") as (client, _):
        assert client.protocol_version == "2026-07-28", client.protocol_version
        r = await client.call_tool("execute", {"code": "return 6 * 7;"})
        assert not r.is_error
        assert tool_text(r) == "42"


async def test_token_minted_while_server_runs(server: ExecutorServer) -> None:
    """SPEC §1: CLI store commands work while the server runs; it sees them at once."""
    token = mint_token(server.data_dir, "second-user@example.com", env=server.env)
    async with connect(server, token=token) as (client, _):
        r = await client.call_tool("execute", {"code": "return 1;"})
        assert tool_text(r) == "1"
