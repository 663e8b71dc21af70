"""Plain-HTTP helpers for what the SDK client cannot express: reusing a session
id from a fresh connection, firing a GET and a POST at the same instant, and
looking at statuses and headers directly."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

PROTOCOL_VERSION = "2025-11-25"
_ids = itertools.count(1000)


def headers(token: str, session_id: str | None = None, *, sse: bool = True) -> dict[str, str]:
    h = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream" if sse else "application/json",
    }
    if session_id:
        h["Mcp-Session-Id"] = session_id
        h["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    return h


@dataclass
class SseEvent:
    id: str | None = None
    event: str | None = None
    data_lines: list[str] = field(default_factory=list)

    @property
    def data(self) -> str:
        return "\n".join(self.data_lines)


async def iter_sse(response: httpx2.Response):
    """Yield SSE events (comments skipped) from a streaming response."""
    ev = SseEvent()
    seen = False
    async for line in response.aiter_lines():
        if line == "":
            if seen:
                yield ev
            ev, seen = SseEvent(), False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        seen = True
        if name == "id":
            ev.id = value
        elif name == "event":
            ev.event = value
        elif name == "data":
            ev.data_lines.append(value)


@dataclass
class RpcReply:
    status: int
    headers: httpx2.Headers
    content_type: str
    message: dict[str, Any] | None  # the JSON-RPC response for our id, if any
    raw: str = ""


async def rpc(
    client: httpx2.AsyncClient,
    url: str,
    token: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    timeout: float = 30,
) -> RpcReply:
    """POST one JSON-RPC request and return its response (JSON or SSE)."""
    req_id = next(_ids)
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
    if params is not None:
        body["params"] = params
    with anyio.fail_after(timeout):
        async with client.stream("POST", url, json=body, headers=headers(token, session_id)) as resp:
            ctype = resp.headers.get("content-type", "")
            if ctype.startswith("text/event-stream"):
                async for ev in iter_sse(resp):
                    if not ev.data:
                        continue
                    msg = json.loads(ev.data)
                    if isinstance(msg, dict) and msg.get("id") == req_id and ("result" in msg or "error" in msg):
                        return RpcReply(resp.status_code, resp.headers, ctype, msg)
                return RpcReply(resp.status_code, resp.headers, ctype, None, "(SSE stream ended without a response)")
            raw = (await resp.aread()).decode(errors="replace")
            msg = None
            try:
                parsed = json.loads(raw) if raw else None
                msg = parsed if isinstance(parsed, dict) else None
            except ValueError:
                pass
            return RpcReply(resp.status_code, resp.headers, ctype, msg, raw)


async def notify(client: httpx2.AsyncClient, url: str, token: str, method: str, session_id: str) -> int:
    body = {"jsonrpc": "2.0", "method": method}
    resp = await client.post(url, json=body, headers=headers(token, session_id))
    return resp.status_code


async def initialize(client: httpx2.AsyncClient, url: str, token: str) -> str:
    """Open a session (initialize + notifications/initialized); return its id."""
    reply = await rpc(
        client,
        url,
        token,
        "initialize",
        {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "executor-pytest-raw", "version": "0"},
        },
    )
    assert reply.status == 200, f"initialize: HTTP {reply.status} {reply.raw}"
    assert reply.message and "result" in reply.message, f"initialize: {reply.message or reply.raw}"
    sid = reply.headers.get("mcp-session-id")
    assert sid, "initialize response has no mcp-session-id header"
    status = await notify(client, url, token, "notifications/initialized", sid)
    assert status == 202, f"notifications/initialized: HTTP {status} (SPEC §2: 202)"
    return sid


def describe(reply: RpcReply) -> str:
    return f"HTTP {reply.status} {reply.content_type!r} {json.dumps(reply.message) if reply.message else reply.raw!r}"
