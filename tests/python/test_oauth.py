"""The built-in authorization server (SPEC §4, issue 38) from the official
Python `mcp` client's OAuth flow: it discovers the server from the 401,
registers, sends the person's browser to /authorize (here a cookie-keeping
HTTP client that signs in with a one-time link and allows the consent
page), exchanges the code with PKCE, lists tools, runs `execute`, refreshes
once the access token has expired, and loses access at once when the
grant is revoked from the CLI; on SQLite and (pg-python) Postgres."""

from __future__ import annotations

import html
import re
import subprocess
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from conftest import EXECUTOR_BIN, ExecutorServer, _first_failure, _server, tool_text

ACCESS_TTL_S = 2
EMAIL = "pytest@example.com"
REDIRECT = "http://127.0.0.1:33419/callback"


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
        env={**__import__("os").environ, **srv.env},
    ).stdout


def hidden_fields(page: str) -> dict[str, str]:
    return {
        html.unescape(m.group(1)): html.unescape(m.group(2))
        for m in re.finditer(r'<input type=hidden name="([^"]*)" value="([^"]*)">', page)
    }


class Browser:
    """Signs in with a login link, then allows whatever /authorize asks."""

    def __init__(self, srv: ExecutorServer) -> None:
        self.srv = srv
        self.http = httpx2.AsyncClient(base_url=srv.base, follow_redirects=False, timeout=30)
        self.visits: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def sign_in(self) -> None:
        link = cli(self.srv, "console", "login-link", "--email", EMAIL, "--public-url", self.srv.base).strip()
        page = await self.http.get(link)
        assert page.status_code == 200, page.text
        res = await self.http.post(
            "/console/login", data=hidden_fields(page.text), headers={"origin": self.srv.base}
        )
        assert res.status_code == 303, res.text

    async def open(self, url: str) -> None:
        self.visits.append(url)
        page = await self.http.get(url)
        assert page.status_code == 200, page.text
        res = await self.http.post(
            "/authorize",
            data={**hidden_fields(page.text), "decision": "allow"},
            headers={"origin": self.srv.base},
        )
        assert res.status_code == 303, res.text
        query = parse_qs(urlparse(res.headers["location"]).query)
        self.result = AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
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


@pytest.mark.anyio
async def test_the_python_sdk_logs_in_with_a_browser_refreshes_and_loses_access_on_revoke(oauth_server):
    srv = oauth_server
    browser = Browser(srv)
    await browser.sign_in()
    storage = Memory()
    auth = OAuthClientProvider(
        server_url=srv.url,
        client_metadata=OAuthClientMetadata(
            client_name="python e2e",
            redirect_uris=[REDIRECT],
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
    asked = parse_qs(urlparse(browser.visits[0]).query)
    assert asked["code_challenge_method"] == ["S256"]
    assert asked["resource"] == [srv.url]
    assert browser.result is not None and browser.result.iss == srv.base
    assert storage.client is not None and storage.client.client_id.startswith("cl_")

    # Past the access token's life, the client refreshes and goes on, with
    # no second browser step.
    first = storage.tokens.access_token
    await anyio.sleep(ACCESS_TTL_S + 0.5)
    assert "8" in await call_execute(srv, auth, "return 8;")
    assert storage.tokens.access_token != first
    assert len(browser.visits) == 1

    # Revoked from the CLI: the access token stops working at once.
    listed = cli(srv, "oauth", "grants", "list", "--email", EMAIL)
    grant = next(line.split("\t")[0] for line in listed.splitlines() if "python e2e" in line and "active" in line)
    cli(srv, "oauth", "grants", "revoke", grant)
    async with httpx2.AsyncClient(timeout=10) as http:
        res = await http.post(
            srv.url,
            headers={
                "authorization": f"Bearer {storage.tokens.access_token}",
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
    assert res.status_code == 401
    await browser.http.aclose()
