// Test-only loopback proxy for the conformance suite.
//
// The official conformance runner sends no credentials, while every Executor
// /mcp request needs `Authorization: Bearer <token>`. This proxy adds that one
// header and forwards everything else faithfully:
//   - method, path and query unchanged;
//   - every request header unchanged, including Host and Origin (so the
//     dns-rebinding-protection scenario still exercises the server's own
//     Host/Origin guard, not the proxy);
//   - the response status and headers unchanged, flushed at once, and the body
//     (SSE included) streamed through chunk by chunk without buffering;
//   - a client that goes away aborts the upstream request, and an upstream
//     stream that dies mid-body kills the downstream connection (so a dropped
//     SSE stream looks dropped to the client, as it would without the proxy).
//
// Usage: node auth-proxy.mjs --upstream 127.0.0.1:PORT --token-file FILE [--port N]
// Prints `listening <port>` on stdout once it accepts connections.
// Binds 127.0.0.1 only.

import http from 'node:http';
import fs from 'node:fs';

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  if (i === -1) {
    if (dflt === undefined) {
      console.error(`auth-proxy: missing --${name}`);
      process.exit(2);
    }
    return dflt;
  }
  return process.argv[i + 1];
}

const upstream = arg('upstream');
const [upHost, upPortStr] = upstream.split(':');
const upPort = Number(upPortStr);
const token = fs.readFileSync(arg('token-file'), 'utf8').trim();
const listenPort = Number(arg('port', '0'));
if (!token) {
  console.error('auth-proxy: empty token');
  process.exit(2);
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are per-connection and not forwarded;
// Node frames the body itself on each side (content-length / chunked).
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
]);

function forwardHeaders(raw, extra) {
  // raw is [name, value, name, value, ...] with the original casing and order.
  const out = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const lower = name.toLowerCase();
    if (HOP.has(lower)) continue;
    if (extra && lower === 'authorization') continue; // replaced below
    out.push([name, raw[i + 1]]);
  }
  if (extra) out.push(...extra);
  return out;
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

const server = http.createServer({ noDelay: true }, (req, res) => {
  const headers = forwardHeaders(req.rawHeaders, [['Authorization', `Bearer ${token}`]]);
  // A request with a body but no content-length arrives chunked; forward it chunked.
  const hasLength = headers.some(([n]) => n.toLowerCase() === 'content-length');
  const rawTe = req.headers['transfer-encoding'];
  if (!hasLength && rawTe) headers.push(['Transfer-Encoding', 'chunked']);

  const upReq = http.request({
    host: upHost,
    port: upPort,
    method: req.method,
    path: req.url,
    headers: headers.flat(), // raw [name, value, ...] list: Host/Origin go through untouched
    agent,
    setHost: false,
  });

  let responded = false;
  upReq.on('response', (upRes) => {
    responded = true;
    const outHeaders = forwardHeaders(upRes.rawHeaders, null);
    res.writeHead(upRes.statusCode, upRes.statusMessage, outHeaders.flat());
    res.flushHeaders(); // headers reach the client now, even before any body byte
    upRes.on('data', (chunk) => {
      res.write(chunk);
    });
    upRes.on('end', () => res.end());
    upRes.on('aborted', () => res.destroy());
    upRes.on('error', () => res.destroy());
    upRes.on('close', () => {
      if (!upRes.complete) res.destroy();
    });
  });
  upReq.on('error', (err) => {
    if (!responded && !res.headersSent) {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        error: { code: -32603, message: `auth-proxy: upstream unreachable: ${err.code || err.message}` },
        id: null,
      });
      res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } else {
      res.destroy();
    }
  });

  // Client went away (e.g. cancelled an SSE reader): tear the upstream down too.
  res.on('close', () => {
    if (!res.writableFinished) upReq.destroy();
  });
  req.on('aborted', () => upReq.destroy());

  req.pipe(upReq);
});

server.on('clientError', (err, socket) => {
  if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
});
// Long-lived SSE streams must not be cut by Node's default server timeouts.
server.requestTimeout = 0;
server.headersTimeout = 60_000;
server.keepAliveTimeout = 5_000;
server.timeout = 0;

server.listen(listenPort, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  });
}
