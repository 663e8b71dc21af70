"""Fixtures: a real `executor serve` process on a free loopback port, a token
minted through the CLI, and MCP clients built on the official `mcp` 2.x SDK.

EXECUTOR_BIN selects the binary (default: <repo>/target/release/executor).
EXECUTOR_TEST_STORE=postgres runs every server on PostgreSQL
(EXECUTOR_TEST_POSTGRES, default the machine's trust-auth server): a
database of its own per server, created and dropped here with psql, and a
random EXECUTOR_SECRET_KEY shared by the server and the CLI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent


def _default_bin() -> str:
    try:
        top = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--show-toplevel"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        top = str(HERE.parent.parent)
    return str(Path(top) / "target" / "release" / "executor")


EXECUTOR_BIN = os.environ.get("EXECUTOR_BIN") or _default_bin()
IDLE_TIMEOUT_MS = 1000
STORE = "postgres" if os.environ.get("EXECUTOR_TEST_STORE") == "postgres" else "sqlite"
PG_ADMIN = os.environ.get("EXECUTOR_TEST_POSTGRES") or "postgres://postgres@127.0.0.1:5432/postgres"


def psql(url: str, sql: str) -> str:
    proc = subprocess.run(
        ["psql", url, "-v", "ON_ERROR_STOP=1", "-qtAc", sql], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"psql {sql!r}: {proc.stderr}"
    return proc.stdout


@dataclass
class PgDatabase:
    """A database of one server's own."""

    name: str

    @classmethod
    def create(cls) -> PgDatabase:
        db = cls(f"executor_py_{os.getpid()}_{os.urandom(4).hex()}")
        psql(PG_ADMIN, f"CREATE DATABASE {db.name}")
        return db

    @property
    def url(self) -> str:
        head, _, _ = PG_ADMIN.partition("?")
        return head.rsplit("/", 1)[0] + "/" + self.name

    def sql(self, statement: str) -> str:
        return psql(self.url, statement)

    def drop(self) -> None:
        with contextlib.suppress(AssertionError, OSError, subprocess.SubprocessError):
            psql(PG_ADMIN, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mint_token(data_dir: Path, email: str, org: str | None = None, env: dict[str, str] | None = None) -> str:
    cmd = [EXECUTOR_BIN, "token", "create", "--email", email, "--data-dir", str(data_dir)]
    if org:
        cmd += ["--org", org]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"token create failed ({proc.returncode}): {proc.stderr}"
    lines = proc.stdout.splitlines()
    # SPEC §1: "prints the token alone on stdout"
    assert len(lines) == 1 and lines[0].strip(), f"token create stdout is not a lone token: {proc.stdout!r}"
    return lines[0].strip()


@dataclass
class ExecutorServer:
    """One `executor serve` process; restartable on the same port and data dir."""

    data_dir: Path
    port: int
    idle_timeout_ms: int | None = IDLE_TIMEOUT_MS
    token: str = ""
    proc: subprocess.Popen | None = None
    log_path: Path = field(init=False)
    starts: int = 0
    # What selects the store (EXECUTOR_DATABASE_URL, EXECUTOR_SECRET_KEY) for
    # the server and every CLI command run against it.
    env: dict[str, str] = field(default_factory=dict)
    pg: PgDatabase | None = None
    # Extra `serve` arguments.
    args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.log_path = self.data_dir.parent / "server.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [EXECUTOR_BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir)]
        if self.idle_timeout_ms is not None:
            cmd += ["--session-idle-timeout", str(self.idle_timeout_ms)]
        cmd += self.args
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **self.env}
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not healthy on {self.base} within 30 s:\n{self.log_tail()}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"


def _check_bin() -> None:
    if not (os.path.isfile(EXECUTOR_BIN) and os.access(EXECUTOR_BIN, os.X_OK)):
        pytest.fail(f"executor binary not found or not executable: {EXECUTOR_BIN}", pytrace=False)


@contextlib.contextmanager
def _server(idle_timeout_ms: int | None, args: list[str] | None = None) -> Iterator[ExecutorServer]:
    _check_bin()
    tmp = Path(tempfile.mkdtemp(prefix="executor-pytest-"))
    data = tmp / "data"
    data.mkdir()
    srv = ExecutorServer(data_dir=data, port=free_port(), idle_timeout_ms=idle_timeout_ms, args=list(args or []))
    if STORE == "postgres":
        srv.pg = PgDatabase.create()
        srv.env = {"EXECUTOR_DATABASE_URL": srv.pg.url, "EXECUTOR_SECRET_KEY": os.urandom(32).hex()}
    try:
        srv.token = mint_token(data, "pytest@example.com", env=srv.env)
        srv.start()
        yield srv
        assert srv.alive(), f"server died during the test:\n{srv.log_tail()}"
    finally:
        srv.stop()
        if srv.pg is not None:
            srv.pg.drop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[ExecutorServer]:
    """Shared server, started with --session-idle-timeout 1000."""
    with _server(IDLE_TIMEOUT_MS) as srv:
        yield srv


@pytest.fixture
def own_server() -> Iterator[ExecutorServer]:
    """A server of the test's own, for tests that kill and restart it."""
    with _server(IDLE_TIMEOUT_MS) as srv:
        yield srv


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Exchange:
    method: str
    status: int
    request_session_id: str | None
    response_session_id: str | None
    body_method: str | None


@dataclass
class Recorder:
    """Every HTTP exchange the SDK client made (via httpx2 event hooks)."""

    exchanges: list[Exchange] = field(default_factory=list)

    async def on_response(self, response: httpx2.Response) -> None:
        req = response.request
        body_method = None
        if req.method == "POST":
            try:
                import json

                body = json.loads(req.content or b"null")
                if isinstance(body, dict):
                    body_method = body.get("method")
            except ValueError:
                pass
        self.exchanges.append(
            Exchange(
                method=req.method,
                status=response.status_code,
                request_session_id=req.headers.get("mcp-session-id"),
                response_session_id=response.headers.get("mcp-session-id"),
                body_method=body_method,
            )
        )

    @property
    def session_id(self) -> str | None:
        for ex in self.exchanges:
            if ex.body_method == "initialize" and ex.response_session_id:
                return ex.response_session_id
        return None

    def initializes(self) -> int:
        return sum(1 for ex in self.exchanges if ex.body_method == "initialize")


@contextlib.asynccontextmanager
async def connect(
    srv: ExecutorServer, *, mode: str = "legacy", token: str | None = None, terminate_on_close: bool = True
) -> AsyncIterator[tuple[Client, Recorder]]:
    """An official-SDK client over Streamable HTTP with the bearer header set.

    mode="legacy" forces the initialize handshake (a session-based protocol
    version); the SDK's default "auto" probes server/discover first.
    """
    rec = Recorder()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token or srv.token}"},
        timeout=httpx2.Timeout(30.0, read=60.0),
        event_hooks={"response": [rec.on_response]},
    )
    try:
        async with http:
            transport = streamable_http_client(srv.url, http_client=http, terminate_on_close=terminate_on_close)
            async with Client(transport, mode=mode, read_timeout_seconds=30) as client:
                yield client, rec
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap a failing assertion in nested exception
        # groups; surface the test's own failure instead.
        leaf = _first_failure(group)
        if leaf is None:
            raise
        raise leaf from None


def _first_failure(exc: BaseException) -> BaseException | None:
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _first_failure(sub)
            if found is not None:
                return found
        return None
    if isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return exc
    return None


def tool_text(result) -> str:
    assert result.content, f"no content in {result!r}"
    first = result.content[0]
    assert first.type == "text", f"first content block is not text: {first!r}"
    return first.text
