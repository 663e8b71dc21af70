"""The built-in authorization server (SPEC §4, issue 38) from the official
Python `mcp` client's OAuth flow: it discovers the server from the 401,
registers, sends the person's browser to /authorize (a real chromium,
driven by tests/e2e/browser-approve.mjs, that signs in with a one-time link
and allows the consent page; the browser is then sent to the client's
loopback listener with the code), exchanges the code with PKCE, lists
tools, runs `execute`, refreshes once the access token has expired, and
loses access at once when the grant is revoked from the CLI; on SQLite and
(pg-python) Postgres.

The browser step needs node on PATH, tests/e2e's packages (playwright-core)
and chromium: tests/python/run installs them when missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from conftest import EXECUTOR_BIN, HERE, STORE, ExecutorServer, _first_failure, _server, tool_text

ACCESS_TTL_S = 2
EMAIL = "pytest@example.com"
CLIENT_NAME = "python e2e"
APPROVE = HERE.parent / "e2e" / "browser-approve.mjs"
# Launching chromium, signing in and consenting takes a few seconds; a
# browser step that hangs fails the test instead of stalling it.
BROWSER_STEP_S = 120


@pytest.fixture
def oauth_server():
    with _server(None, ["--oauth-access-token-ttl", str(ACCESS_TTL_S)]) as srv:
        yield srv


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.saved_tokens: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.saved_tokens.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def cli(srv: ExecutorServer, *args: str) -> str:
    return subprocess.run(
        [EXECUTOR_BIN, *args, "--data-dir", str(srv.data_dir)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **srv.env},
    ).stdout


class CallbackListener:
    """The client's loopback listener for the authorization response (RFC
    8252 §7.3): keeps the URL of every request to /callback and answers the
    browser with a page."""

    def __init__(self) -> None:
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if urlparse(self.path).path == "/callback":
                    received.append(f"http://127.0.0.1:{self.server.server_address[1]}{self.path}")
                body = b"Signed in; you can close this tab."
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/callback"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def listener():
    lst = CallbackListener()
    try:
        yield lst
    finally:
        lst.close()


class Browser:
    """A person at a browser: for each authorization URL the client sends
    them to, chromium signs in with a fresh one-time link, checks the
    consent page and allows it; the browser then lands on the client's
    listener, where the code is read."""

    def __init__(self, srv: ExecutorServer, listener: CallbackListener) -> None:
        self.srv = srv
        self.listener = listener
        self.visits: list[str] = []
        self.landed: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def open(self, url: str) -> None:
        self.visits.append(url)
        node = shutil.which("node")
        assert node, "node is not on PATH (the browser step runs tests/e2e/browser-approve.mjs)"
        assert (APPROVE.parent / "node_modules" / "playwright-core").is_dir(), (
            "tests/e2e's packages are not installed (tests/python/run installs them)"
        )
        link = cli(self.srv, "console", "login-link", "--email", EMAIL, "--public-url", self.srv.base).strip()
        with anyio.fail_after(BROWSER_STEP_S):
            proc = await anyio.run_process(
                [node, str(APPROVE), "--login-link", link, "--authorize", url, "--client-name", CLIENT_NAME],
                check=False,
            )
        # pytest.fail, not assert: assertion rewriting would print the
        # process's arguments, the login link among them.
        if proc.returncode != 0:
            pytest.fail(f"browser step failed ({proc.returncode}):\n{proc.stderr.decode(errors='replace')}", pytrace=False)
        self.landed.append(proc.stdout.decode().strip())

    async def callback(self) -> AuthorizationCodeResult:
        # The browser step ends once the listener answered, so what the
        # browser was sent to has arrived there.
        assert self.listener.received == self.landed, (self.listener.received, self.landed)
        query = parse_qs(urlparse(self.listener.received[-1]).query)
        assert "error" not in query, query
        self.result = AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )
        return self.result


async def call_execute(srv: ExecutorServer, auth: httpx2.Auth, code: str) -> str:
    try:
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=60.0)) as http:
            transport = streamable_http_client(srv.url, http_client=http)
            async with Client(transport, mode="legacy", read_timeout_seconds=30) as client:
                tools = await client.list_tools()
                assert any(t.name == "execute" for t in tools.tools)
                result = await client.call_tool("execute", {"code": code})
                return tool_text(result)
    except BaseExceptionGroup as group:
        leaf = _first_failure(group)
        if leaf is None:
            raise
        raise leaf from None


async def status_after_revocation(srv: ExecutorServer, access_token: str) -> int:
    """`mcp_status` once a revocation made by the CLI has reached the server:
    on SQLite the very next request sees it; on Postgres it arrives with the
    store's change notice, milliseconds after the commit, so a request that
    races the notice is retried for up to a second."""
    status = await mcp_status(srv, access_token)
    with anyio.move_on_after(1.0):
        while STORE == "postgres" and status != 401:
            await anyio.sleep(0.01)
            status = await mcp_status(srv, access_token)
    return status


async def mcp_status(srv: ExecutorServer, access_token: str) -> int:
    """The status of an initialize at /mcp with `access_token`."""
    async with httpx2.AsyncClient(timeout=10) as http:
        res = await http.post(
            srv.url,
            headers={
                "authorization": f"Bearer {access_token}",
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            },
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            },
        )
    return res.status_code


@pytest.mark.anyio
async def test_the_python_sdk_logs_in_with_a_browser_refreshes_and_loses_access_on_revoke(oauth_server, listener):
    srv = oauth_server
    browser = Browser(srv, listener)
    storage = Memory()
    auth = OAuthClientProvider(
        server_url=srv.url,
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[listener.redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    assert "42" in await call_execute(srv, auth, "return 6 * 7;")
    assert len(browser.visits) == 1
    assert len(listener.received) == 1
    asked = parse_qs(urlparse(browser.visits[0]).query)
    assert asked["code_challenge_method"] == ["S256"]
    assert asked["resource"] == [srv.url]
    assert asked["redirect_uri"] == [listener.redirect_uri]
    assert browser.result is not None and browser.result.iss == srv.base
    assert browser.result.state == asked["state"][0]
    assert storage.client is not None and storage.client.client_id.startswith("cl_")

    # Past the access token's life, the client refreshes and goes on, with
    # no second browser step.
    first = storage.tokens.access_token
    await anyio.sleep(ACCESS_TTL_S + 0.5)
    assert "8" in await call_execute(srv, auth, "return 8;")
    assert storage.tokens.access_token != first
    assert len(browser.visits) == 1

    # Revoked from the CLI: the access token stops working at once, and
    # the refresh token is dead too (the access token alone could also
    # have just expired).
    listed = cli(srv, "oauth", "grants", "list", "--email", EMAIL)
    grant = next(line.split("\t")[0] for line in listed.splitlines() if CLIENT_NAME in line and "active" in line)
    tokens = storage.tokens
    assert await mcp_status(srv, tokens.access_token) == 200, "working before the revoke"
    cli(srv, "oauth", "grants", "revoke", grant)
    assert await status_after_revocation(srv, tokens.access_token) == 401
    async with httpx2.AsyncClient(timeout=10) as http:
        refreshed = await http.post(
            f"{srv.base}/token",
            data={"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "client_id": storage.client.client_id},
        )
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant", refreshed.text
