"""SPEC §10 with the Python SDK: three `executor serve` nodes on one
Postgres behind nginx (round robin, no stickiness). Runs in the pg-python
suite; the node twin with more scenarios is tests/cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from conftest import (
    IDLE_TIMEOUT_MS,
    STORE,
    ExecutorServer,
    PgDatabase,
    connect,
    free_port,
    mint_token,
    tool_text,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(STORE != "postgres", reason="three nodes share a Postgres store (pg-python suite)"),
]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@dataclass
class Front:
    """nginx in front of the nodes, as a client sees one server."""

    port: int
    token: str
    access_log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def statuses(self) -> list[int]:
        if not self.access_log.exists():
            return []
        return [int(line.split()[0]) for line in self.access_log.read_text().splitlines() if line.strip()]


def nginx_conf(tmp: Path, port: int, upstreams: list[int]) -> str:
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=0;" for p in upstreams)
    return f"""
user root;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format status '$status $request_method $upstream_addr';
  access_log {tmp}/access.log status;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  upstream executor {{
{servers}
    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://executor;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_next_upstream error timeout;
    }}
  }}
}}
"""


@pytest.fixture
def cluster() -> Iterator[tuple[Front, list[ExecutorServer]]]:
    if not os.path.exists(NGINX):
        pytest.fail("nginx is not installed (tests/cluster/run installs nginx-light)", pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="executor-pycluster-"))
    db = PgDatabase.create()
    env = {"EXECUTOR_DATABASE_URL": db.url, "EXECUTOR_SECRET_KEY": os.urandom(32).hex()}
    nodes: list[ExecutorServer] = []
    nginx = None
    try:
        for i in range(3):
            data = tmp / f"node{i}" / "data"
            data.mkdir(parents=True)
            node = ExecutorServer(data_dir=data, port=free_port(), idle_timeout_ms=IDLE_TIMEOUT_MS, env=env, args=["--node-lease-ms", "2000"])
            node.start()
            nodes.append(node)
        token = mint_token(nodes[0].data_dir, "pycluster@example.com", env=env)
        port = free_port()
        (tmp / "nginx.conf").write_text(nginx_conf(tmp, port, [n.port for n in nodes]))
        nginx = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield Front(port=port, token=token, access_log=tmp / "access.log"), nodes
        for node in nodes:
            assert node.alive(), f"a node died during the test:\n{node.log_tail()}"
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(timeout=10)
        for node in nodes:
            node.stop()
        db.drop()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_sessions_work_through_nginx_across_nodes_and_idle_rounds(cluster) -> None:
    front, _nodes = cluster
    for session in range(3):
        async with connect(front) as (client, rec):
            for round in range(3):
                n = session * 10 + round
                r = await client.call_tool("execute", {"code": f"return {n};"})
                assert not r.is_error, tool_text(r)
                assert tool_text(r) == str(n)
                listing = await client.list_tools(cache_mode="bypass")
                assert "execute" in {t.name for t in listing.tools}
                await anyio.sleep(IDLE_TIMEOUT_MS / 1000 * 2.5)
            assert rec.initializes() == 1, "the client had to initialize again"
            for ex in rec.exchanges:
                assert ex.status < 400, f"{ex.method} {ex.body_method or ''} answered HTTP {ex.status}"
    assert not [s for s in front.statuses() if s >= 500], "nginx answered 5xx"


async def test_the_holder_killed_the_next_request_through_nginx_is_served(cluster) -> None:
    front, nodes = cluster
    async with connect(front) as (client, rec):
        r = await client.call_tool("execute", {"code": "return 'before';"})
        assert tool_text(r) == "before"
        sid = rec.session_id
        holder_url = subprocess.run(
            ["psql", "-At", "-c", f"SELECT n.url FROM sessions s JOIN nodes n ON n.id = s.holder WHERE s.id = '{sid}'", nodes[0].env["EXECUTOR_DATABASE_URL"]],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        holder = next(n for n in nodes if holder_url == n.base)
        holder.kill9()
        try:
            for i in range(3):
                r = await client.call_tool("execute", {"code": f"return {i};"})
                assert not r.is_error, tool_text(r)
                assert tool_text(r) == str(i)
            assert rec.initializes() == 1, "the client had to initialize again"
        finally:
            holder.start()
