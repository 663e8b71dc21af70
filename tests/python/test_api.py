"""The management API (SPEC §13, issue 37) from Python, through HTTP alone:
add an OpenAPI integration from an uploaded document, set its credential,
add a policy, run code, see the paused call in `approvals`, decide it, and
read the execution and its tool calls; on SQLite and (pg-python) Postgres."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from conftest import ExecutorServer, _server

SECRET = "py-SECRET-token-0123456789abcdef"

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "notes", "version": "1"},
    "servers": [{"url": "/v1"}],
    "components": {"securitySchemes": {"main": {"type": "http", "scheme": "bearer"}}},
    "security": [{"main": []}],
    "paths": {
        "/notes": {
            "post": {
                "operationId": "addNote",
                "tags": ["notes"],
                "requestBody": {
                    "content": {"application/json": {"schema": {"type": "object", "properties": {"text": {"type": "string"}}}}}
                },
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}


class Upstream(BaseHTTPRequestHandler):
    """Answers every POST with what it received and whether the bearer came."""

    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length", "0") or 0))
        seen = {
            "path": self.path,
            "authorized": self.headers.get("authorization") == f"Bearer {SECRET}",
            "body": json.loads(body or b"null"),
        }
        Upstream.received.append(seen)
        out = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def api_server() -> Iterator[ExecutorServer]:
    with _server(None, ["--allow-local-network"]) as srv:
        yield srv


def test_a_full_setup_through_the_api_alone(api_server: ExecutorServer, upstream: str) -> None:
    api = httpx2.Client(
        base_url=f"{api_server.base}/api/v1",
        headers={"authorization": f"Bearer {api_server.token}"},
        timeout=30,
    )
    added = api.post(
        "/integrations",
        json={"kind": "openapi", "namespace": "notes", "spec": {"document": json.dumps(SPEC)}, "baseUrl": f"{upstream}/v1"},
    )
    assert added.status_code == 201, added.text
    assert added.headers["location"] == "/api/v1/integrations/notes"

    connection = api.put("/integrations/notes/connection", json={"type": "bearer", "value": SECRET})
    assert connection.status_code == 200, connection.text
    assert SECRET not in connection.text

    rule = api.post("/policies", json={"pattern": "notes.*", "action": "require_approval"})
    assert rule.status_code == 201, rule.text

    run = api.post("/executions", json={"code": "return await tools.notes.notes.addNote({ body: { text: 'hi' } })"})
    assert run.status_code == 200, run.text
    execution_id = run.json()["pausedExecutionId"]
    assert execution_id, run.text
    assert Upstream.received == [], "nothing is sent before the decision"

    pending = api.get("/approvals").json()
    assert [p["executionId"] for p in pending] == [execution_id]
    assert pending[0]["toolPath"] == "notes.notes.addNote"

    decided = api.post(f"/approvals/{execution_id}", json={"action": "accept"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["isError"] is False, decided.text
    assert Upstream.received == [{"path": "/v1/notes", "authorized": True, "body": {"text": "hi"}}]
    assert api.get("/approvals").json() == []

    record = api.get(f"/executions/{execution_id}").json()
    assert record["status"] == "completed"
    [call] = record["toolCalls"]
    assert (call["toolPath"], call["outcome"], call["approval"]) == ("notes.notes.addNote", "ok", "approved")
    assert call["policyRule"] == rule.json()["id"]

    trail = api.get("/tool-calls", params={"execution": execution_id})
    assert [c["id"] for c in trail.json()["items"]] == [call["id"]]
    assert "hi" not in trail.text, "an argument's value reached the audit trail"
    for response in (added, connection, rule, run, decided, trail):
        assert SECRET not in response.text
