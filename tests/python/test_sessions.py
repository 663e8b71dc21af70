"""Durable sessions (SPEC §3): idle disposal and restore, kill -9 and restart,
DELETE. The servers here run with --session-idle-timeout 1000."""

from __future__ import annotations

import anyio
import httpx2
import pytest

import rawhttp
from conftest import IDLE_TIMEOUT_MS, ExecutorServer, Recorder, connect, tool_text

pytestmark = pytest.mark.anyio

PAST_IDLE = IDLE_TIMEOUT_MS / 1000 * 2.5  # seconds: well past the idle timeout


def assert_clean_exchanges(rec: Recorder, sid: str) -> None:
    """One initialize; every later request carried that session id and none
    was answered with a 4xx/5xx (a client never needs to re-initialize)."""
    assert rec.initializes() == 1, "the client had to initialize again"
    for ex in rec.exchanges:
        if ex.body_method == "initialize":
            continue
        assert ex.request_session_id == sid, f"{ex.method} {ex.body_method} went out with session {ex.request_session_id!r}"
        # DELETE on close is not part of the checked window; callers check before closing.
        assert ex.status < 400, f"{ex.method} {ex.body_method or ''} answered HTTP {ex.status}"


async def test_sdk_session_survives_idle_timeout(server: ExecutorServer) -> None:
    async with connect(server) as (client, rec):
        sid = rec.session_id
        r = await client.call_tool("execute", {"code": "return 1;"})
        assert tool_text(r) == "1"

        await anyio.sleep(PAST_IDLE)

        r = await client.call_tool("execute", {"code": "return 6 * 7;"})
        assert not r.is_error, tool_text(r)
        assert tool_text(r) == "42"
        listing = await client.list_tools(cache_mode="bypass")
        assert {t.name for t in listing.tools} == {"execute", "skills", "resume"}
        await client.send_ping()

        await anyio.sleep(PAST_IDLE)
        r = await client.call_tool("execute", {"code": "return 2;"})
        assert tool_text(r) == "2"
        assert_clean_exchanges(rec, sid)


async def _open_get(http: httpx2.AsyncClient, srv: ExecutorServer, sid: str) -> tuple[int, str, rawhttp.SseEvent | None]:
    """Open the standalone GET stream, read its first event (the priming event), close it."""
    hdrs = rawhttp.headers(srv.token, sid)
    hdrs["Accept"] = "text/event-stream"
    del hdrs["Content-Type"]
    async with http.stream("GET", srv.url, headers=hdrs) as resp:
        ctype = resp.headers.get("content-type", "")
        first = None
        if resp.status_code == 200:
            with anyio.move_on_after(5):
                async for ev in rawhttp.iter_sse(resp):
                    first = ev
                    break
        return resp.status_code, ctype, first


async def _followups(http: httpx2.AsyncClient, srv: ExecutorServer, sid: str) -> None:
    for _ in range(3):
        reply = await rawhttp.rpc(http, srv.url, srv.token, "tools/list", {}, session_id=sid)
        assert reply.status == 200, f"follow-up tools/list: {rawhttp.describe(reply)}"
        assert reply.message and "result" in reply.message, f"follow-up tools/list: {rawhttp.describe(reply)}"
        assert {t["name"] for t in reply.message["result"]["tools"]} == {"execute", "skills", "resume"}
    reply = await rawhttp.rpc(
        http, srv.url, srv.token, "tools/call", {"name": "execute", "arguments": {"code": "return 6 * 7;"}}, session_id=sid
    )
    assert reply.status == 200, f"follow-up execute: {rawhttp.describe(reply)}"
    assert reply.message and "result" in reply.message, f"follow-up execute: {rawhttp.describe(reply)}"
    assert reply.message["result"]["content"][0]["text"] == "42", rawhttp.describe(reply)
    reply = await rawhttp.rpc(http, srv.url, srv.token, "ping", session_id=sid)
    assert reply.status == 200 and reply.message and reply.message.get("result") == {}, rawhttp.describe(reply)


async def test_idle_restore_with_concurrent_get_and_post(server: ExecutorServer) -> None:
    """SPEC §3 'the regression this design exists to prevent': open a session,
    call execute, close the client, wait past the idle timeout, then fire a GET
    (listen stream) and a POST tools/list at the same instant. Both answer 200,
    and so does every later request."""
    async with httpx2.AsyncClient(timeout=30) as first:
        sid = await rawhttp.initialize(first, server.url, server.token)
        reply = await rawhttp.rpc(
            first, server.url, server.token, "tools/call",
            {"name": "execute", "arguments": {"code": "return 1;"}}, session_id=sid,
        )
        assert reply.message and reply.message["result"]["content"][0]["text"] == "1", rawhttp.describe(reply)

    for round_no in range(2):
        await anyio.sleep(PAST_IDLE)
        async with httpx2.AsyncClient(timeout=30, limits=httpx2.Limits(max_connections=20)) as http:
            results: dict[str, object] = {}

            async def get_task() -> None:
                results["get"] = await _open_get(http, server, sid)

            async def post_task(i: int) -> None:
                results[f"post{i}"] = await rawhttp.rpc(http, server.url, server.token, "tools/list", {}, session_id=sid)

            # Round 0: exactly the pair from the SPEC. Round 1: a GET and five POSTs.
            n_posts = 1 if round_no == 0 else 5
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(get_task)
                    for i in range(n_posts):
                        tg.start_soon(post_task, i)

            status, ctype, first_event = results["get"]  # type: ignore[misc]
            assert status == 200, f"round {round_no}: concurrent GET answered {status}\n{server.log_tail()}"
            assert ctype.startswith("text/event-stream"), f"round {round_no}: GET content-type {ctype!r}"
            for i in range(n_posts):
                reply = results[f"post{i}"]
                assert isinstance(reply, rawhttp.RpcReply)
                assert reply.status == 200, f"round {round_no}: concurrent POST {i}: {rawhttp.describe(reply)}"
                assert reply.message and "result" in reply.message, f"round {round_no}: POST {i}: {rawhttp.describe(reply)}"
            # SPEC §2: the GET stream opens with a priming event (an id: line).
            assert first_event is not None and first_event.id, f"round {round_no}: no priming event on GET: {first_event!r}"

            # The follow-ups are what catch a sticky 'already connected' failure.
            await _followups(http, server, sid)


async def test_session_survives_kill9_restart(own_server: ExecutorServer) -> None:
    srv = own_server
    async with connect(srv) as (client, rec):
        sid = rec.session_id
        assert sid
        r = await client.call_tool("execute", {"code": "return 1;"})
        assert tool_text(r) == "1"

        srv.kill9()
        srv.start()  # same port, same data dir

        # The same SDK client session keeps working, without re-initializing.
        r = await client.call_tool("execute", {"code": "return 6 * 7;"})
        assert not r.is_error, tool_text(r)
        assert tool_text(r) == "42"
        listing = await client.list_tools(cache_mode="bypass")
        assert {t.name for t in listing.tools} == {"execute", "skills", "resume"}
        await client.send_ping()
        assert_clean_exchanges(rec, sid)

        # A fresh connection that only knows the session id resumes it too.
        async with httpx2.AsyncClient(timeout=30) as http:
            await _followups(http, srv, sid)

        # And once more across a second kill -9, now also past the idle timeout.
        srv.kill9()
        await anyio.sleep(PAST_IDLE)
        srv.start()
        async with httpx2.AsyncClient(timeout=30) as http:
            await _followups(http, srv, sid)
        r = await client.call_tool("execute", {"code": "return 3;"})
        assert tool_text(r) == "3"
        assert_clean_exchanges(rec, sid)


async def test_delete_terminates_session(server: ExecutorServer) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        sid = await rawhttp.initialize(http, server.url, server.token)
        reply = await rawhttp.rpc(http, server.url, server.token, "tools/list", {}, session_id=sid)
        assert reply.status == 200, rawhttp.describe(reply)

        resp = await http.delete(server.url, headers=rawhttp.headers(server.token, sid))
        assert resp.status_code == 200, f"SPEC §2: DELETE with a session -> 200, got {resp.status_code} {resp.text}"

        reply = await rawhttp.rpc(http, server.url, server.token, "tools/list", {}, session_id=sid)
        assert reply.status == 404, f"SPEC §2: terminated session -> 404, got {rawhttp.describe(reply)}"
        assert reply.message and reply.message.get("error", {}).get("code") == -32001, rawhttp.describe(reply)
        assert "terminated" in reply.message["error"]["message"].lower(), rawhttp.describe(reply)
