// Three `executor serve` nodes on one Postgres database behind nginx (round
// robin, no stickiness), as SPEC §10 promises to run: the starter the
// cluster suite shares. Reuses the e2e harness for the nodes and clients.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, pgStore, freePort, sleep, request } from "../e2e/harness.mjs";

export const NODE_ARGS = ["--node-lease-ms", "2000", "--allow-local-network"];

const nginxConf = (dir, port, upstreams) => `
user root;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  log_format status '$status $request_method $upstream_addr $upstream_status $request_time';
  access_log ${dir}/access.log status;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream executor {
${upstreams.map((p) => `    server 127.0.0.1:${p} max_fails=0;`).join("\n")}
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 8m;
    location / {
      proxy_pass http://executor;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_connect_timeout 1s;
      proxy_next_upstream error timeout;
    }
  }
}
`;

/** nginx in front of `ports`; returns { base, mcpUrl, port, accessLog(), stop() }. */
export const startNginx = async (ports) => {
  const dir = mkdtempSync(join(tmpdir(), "executor-nginx-"));
  const port = await freePort();
  writeFileSync(join(dir, "nginx.conf"), nginxConf(dir, port, ports));
  const child = spawn("nginx", ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", "daemon off;"], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => (log += d));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await request(`${base}/healthz`, { method: "GET", timeoutMs: 1000 }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (up) break;
    if (i > 100 || child.exitCode !== null) throw new Error(`nginx did not start: ${log}`);
    await sleep(50);
  }
  return {
    base,
    origin: base,
    mcpUrl: `${base}/mcp`,
    port,
    /** The status of every request nginx answered so far. */
    statuses: () => (existsSync(join(dir, "access.log")) ? readFileSync(join(dir, "access.log"), "utf8") : "").split("\n").filter(Boolean).map((l) => Number(l.split(" ")[0])),
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(3000)]);
    },
  };
};

/** Three nodes on one new database, and nginx in front of them. */
export const startCluster = async ({ idleMs } = {}) => {
  const db = pgStore();
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await startServer({ store: "sqlite", env: db.env, args: NODE_ARGS, idleMs }));
  }
  const front = await startNginx(nodes.map((n) => n.port));
  /** The node whose id holds `column` of row `id` in `table` (a session or a paused run). */
  const holderOf = (table, id) => {
    const out = execFileSync("psql", ["-At", "-c", `SELECT n.url FROM ${table} t JOIN nodes n ON n.id = t.holder WHERE t.id = '${id}'`, db.url], { encoding: "utf8" }).trim();
    return nodes.find((n) => out === `http://127.0.0.1:${n.port}`);
  };
  return {
    db,
    nodes,
    front,
    holderOf,
    mint: (email) => nodes[0].mint(email),
    cleanup: async () => {
      await front.stop();
      for (const n of nodes) await n.stop();
      for (const n of nodes) await n.cleanup();
      db.drop();
    },
  };
};
