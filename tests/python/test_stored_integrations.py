"""Stored integrations across formats (issue 9): a record in an older format is
upgraded and served; one the server cannot read is reported by `integrations
list` and to the agent as `integration_unavailable`, never silently dropped.
The records are edited in the real store (the SQLite file with sqlite3, or
the Postgres database with psql) before the server first loads the org's
catalog."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import lz4.block
import pytest

from conftest import EXECUTOR_BIN, ExecutorServer, connect, tool_text

pytestmark = pytest.mark.anyio

PETSTORE = Path(__file__).resolve().parent.parent / "e2e" / "fixtures" / "petstore.yaml"


def run_cli(srv: ExecutorServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECUTOR_BIN, *args, "--data-dir", str(srv.data_dir)],
        capture_output=True, text=True, timeout=60, env={**os.environ, **srv.env},
    )


def cli(srv: ExecutorServer, *args: str) -> str:
    proc = run_cli(srv, *args)
    assert proc.returncode == 0, f"{args}: {proc.stderr}"
    return proc.stdout


class Records:
    """The integrations table of the server's store, whichever it is."""

    def __init__(self, srv: ExecutorServer) -> None:
        self.pg = srv.pg
        self.db = None if self.pg else sqlite3.connect(srv.data_dir / "executor.db")

    def indexed(self) -> int:
        sql = "SELECT count(*) FROM integrations WHERE length(search_index) > 0"
        return int(self.pg.sql(sql)) if self.pg else self.db.execute(sql).fetchone()[0]

    def raw(self, namespace: str) -> bytes | str:
        sql = f"SELECT document FROM integrations WHERE namespace = '{namespace}'"
        if self.pg:
            return bytes.fromhex(self.pg.sql(sql).strip().removeprefix("\\x"))
        return self.db.execute(sql).fetchone()[0]

    def document(self, namespace: str) -> str:
        """A record's document as the store keeps it: LZ4-compressed (a plain
        text value, as SQLite records are written by hand below, is read as
        it is)."""
        raw = self.raw(namespace)
        return lz4.block.decompress(raw).decode() if isinstance(raw, bytes) else raw

    def write(self, namespace: str, kind: str, document: str) -> None:
        """Writes a record by hand: plain text in SQLite, packed in Postgres
        (whose documents are only ever bytes)."""
        if self.pg:
            packed = lz4.block.compress(document.encode()).hex()
            self.pg.sql(
                f"UPDATE integrations SET kind = '{kind}', document = '\\x{packed}'::bytea "
                f"WHERE namespace = '{namespace}'"
            )
        else:
            with self.db:
                self.db.execute(
                    "UPDATE integrations SET kind = ?, document = ? WHERE namespace = ?", (kind, document, namespace)
                )

    def close(self) -> None:
        if self.db:
            self.db.close()


def as_format_1(document: str) -> str:
    """The record as release 1 stored it: no `format`, no shared
    `definitions`; every tool schema carries the definitions under `$defs`."""
    stored = json.loads(document)
    assert stored.pop("format") == 2
    definitions = stored.pop("definitions")
    assert definitions, "petstore has shared definitions"
    for tool in stored["tools"]:
        for key in ("input_schema", "output_schema"):
            if isinstance(tool.get(key), dict):
                tool[key]["$defs"] = definitions
    return json.dumps(stored)


async def test_old_records_are_upgraded_and_unreadable_ones_reported(own_server: ExecutorServer) -> None:
    srv = own_server
    for namespace in ("pets", "old", "future"):
        cli(srv, "integrations", "add", "openapi", "--spec", str(PETSTORE), "--namespace", namespace,
            "--base-url", "http://127.0.0.1:9")
    db = Records(srv)
    # `add` stores each record with the search index of its tools.
    assert db.indexed() == 3
    pets = db.raw("pets")
    assert isinstance(pets, bytes) and len(pets) < len(db.document("pets")), "stored compressed"
    db.write("old", "openapi", as_format_1(db.document("old")))
    db.write("future", "openapi", '{"format":99,"tools":[]}')

    listed = cli(srv, "integrations", "list")
    lines = {line.split("\t")[0]: line for line in listed.splitlines()}
    assert lines["pets"].endswith("\tok"), listed
    assert "upgraded when the server loads it" in lines["old"], listed
    assert "unavailable" in lines["future"] and "newer release" in lines["future"], listed

    async with connect(srv) as (client, _):
        r = await client.call_tool("execute", {"code": """
            const listed = await tools.executor.integrations.list({});
            const future = await tools.future.pets.listPets({});
            const old = await tools.describe.tool({ path: "old.pets.showPetById" });
            const found = await tools.search({ query: "list pets" });
            return { listed: listed.items, future, old, found: found.items.map((i) => i.path) };
        """})
        assert not r.is_error, tool_text(r)
        out = json.loads(tool_text(r))

    by_namespace = {i["namespace"]: i for i in out["listed"]}
    assert by_namespace["pets"]["toolCount"] == 3 and "unavailable" not in by_namespace["pets"]
    assert "newer release" in by_namespace["future"]["unavailable"], by_namespace
    assert out["future"]["ok"] is False
    assert out["future"]["error"]["code"] == "integration_unavailable", out["future"]
    assert "integrations refresh" in out["future"]["error"]["message"]
    # The upgraded record serves its tools with their types intact.
    assert out["old"]["path"] == "old.pets.showPetById", out["old"]
    assert "name: string" in json.dumps(out["old"]["typeScriptDefinitions"]), out["old"]
    assert "old.pets.listPets" in out["found"] and "pets.pets.listPets" in out["found"]

    # ...and was stored back in the current format.
    old = db.document("old")
    assert old.startswith('{"format":2,'), old[:40]
    db.close()
    listed = cli(srv, "integrations", "list")
    assert any(line.startswith("old\t") and line.endswith("\tok") for line in listed.splitlines()), listed

    # The way out the message names: refresh re-imports from the source,
    # even though the stored record cannot be read.
    cli(srv, "integrations", "refresh", "future")
    listed = cli(srv, "integrations", "list")
    assert any(line.startswith("future\t") and line.endswith("\tok") for line in listed.splitlines()), listed
    async with connect(srv) as (client, _):
        r = await client.call_tool("execute", {"code": """
            const found = await tools.search({ query: "list pets", namespace: "future" });
            return found.items.map((i) => i.path);
        """})
        assert not r.is_error, tool_text(r)
        assert "future.pets.listPets" in json.loads(tool_text(r))


async def test_a_record_of_a_kind_this_release_does_not_serve_is_reported(own_server: ExecutorServer) -> None:
    """A record written by a newer release with a kind this one does not
    know is listed as such, refused by `refresh` with a clear error, and
    answers `integration_unavailable` to the agent."""
    srv = own_server
    cli(srv, "integrations", "add", "openapi", "--spec", str(PETSTORE), "--namespace", "later",
        "--base-url", "http://127.0.0.1:9")
    db = Records(srv)
    db.write("later", "soap", '{"format":1}')
    db.close()

    listed = cli(srv, "integrations", "list")
    line = next(line for line in listed.splitlines() if line.startswith("later\t"))
    assert "`soap` is not known to this release" in line, listed
    refresh = run_cli(srv, "integrations", "refresh", "later")
    assert refresh.returncode != 0, refresh.stdout
    assert "cannot be refreshed by this release" in refresh.stderr, refresh.stderr

    async with connect(srv) as (client, _):
        r = await client.call_tool("execute", {"code": "return await tools.later.pets.listPets({});"})
        assert not r.is_error, tool_text(r)
        out = json.loads(tool_text(r))
    assert out["ok"] is False and out["error"]["code"] == "integration_unavailable", out
    assert "soap" in out["error"]["message"], out
