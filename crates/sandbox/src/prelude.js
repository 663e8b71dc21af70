// Runs once in every fresh context, before the agent's code. It captures the
// built-ins the host relies on (so a script that tampers with globals cannot
// break result rendering) and installs the sandbox's globals. The value of
// this script is the host's handle: compile, serialize, describe, timers,
// logs, emitted values.
(function (maxLogBytes, hostCall) {
  "use strict";
  const AsyncFunction = (async function () {}).constructor;
  const stringify = JSON.stringify;
  const StringCtor = String;
  const ErrorCtor = Error;
  const push = (arr, v) => { arr[arr.length] = v; };

  const logs = [];
  let logBytes = 0;
  let logsTruncated = false;

  const renderArg = (v) => {
    if (typeof v === "string") return v;
    try {
      const s = stringify(v);
      return s === undefined ? StringCtor(v) : s;
    } catch (_) {
      try { return StringCtor(v); } catch (_) { return "[unprintable]"; }
    }
  };
  const logger = (level) => (...args) => {
    if (logsTruncated) return;
    let line = "[" + level + "] ";
    for (let i = 0; i < args.length; i++) line += (i ? " " : "") + renderArg(args[i]);
    if (logBytes + line.length > maxLogBytes) {
      logsTruncated = true;
      push(logs, "[warn] logs truncated: more than " + maxLogBytes + " bytes were logged");
      return;
    }
    logBytes += line.length;
    push(logs, line);
  };
  const console = {
    log: logger("log"), info: logger("info"), debug: logger("debug"),
    warn: logger("warn"), error: logger("error"),
  };

  // Timers: a queue the host drives between job-queue drains.
  let timerSeq = 0;
  const timers = [];
  const setTimeout = (fn, ms, ...args) => {
    if (typeof fn !== "function") throw new TypeError("setTimeout expects a function");
    const id = ++timerSeq;
    const delay = Math.max(0, Number(ms) || 0);
    push(timers, { id, at: Date.now() + delay, fn, args });
    return id;
  };
  const clearTimeout = (id) => {
    for (let i = 0; i < timers.length; i++) if (timers[i].id === id) { timers.splice(i, 1); return; }
  };

  const fetch = () => {
    throw new ErrorCtor("fetch is disabled: call APIs through tools.*");
  };

  // emit(value): shown to the user as its own content block. Cloned as JSON
  // now, so later mutation of the value does not change what was emitted.
  const emitted = [];
  const emit = (value) => {
    let json;
    try { json = stringify(value === undefined ? null : value); } catch (e) {
      throw new TypeError("emit: the value is not JSON-serialisable: " + StringCtor(e && e.message));
    }
    push(emitted, json === undefined ? "null" : json);
  };

  // tools: a lazy, recursive proxy. tools.a.b(arg) calls path "a.b" with
  // the first argument only and returns a Promise. It is not thenable (so
  // `await tools` is harmless) and cannot be enumerated.
  const noEnumeration = () => {
    throw new TypeError("tools cannot be enumerated: use tools.search({ query }) to find tools");
  };
  const callTool = (path, arg) => {
    if (!path) return Promise.reject(new TypeError("tools is not a function: call tools.<path>(input)"));
    let json;
    try { json = stringify(arg === undefined ? {} : arg); } catch (e) {
      return Promise.reject(new TypeError("tools." + path + ": the input is not JSON-serialisable"));
    }
    return hostCall(path, json === undefined ? "{}" : json);
  };
  const toolsProxy = (path) => new Proxy(function () {}, {
    get(_, prop) {
      if (typeof prop === "symbol") {
        if (prop === Symbol.toPrimitive) return () => "[tools" + (path ? " " + path : "") + "]";
        return undefined;
      }
      if (prop === "then") return undefined;
      if (prop === "toJSON") return () => "[tools" + (path ? " " + path : "") + "]";
      return toolsProxy(path ? path + "." + prop : prop);
    },
    apply(_, __, args) { return callTool(path, args[0]); },
    construct() { throw new TypeError("tools." + path + " is not a constructor"); },
    ownKeys: noEnumeration,
    has() { return true; },
    getOwnPropertyDescriptor() { return undefined; },
    set() { throw new TypeError("tools is read-only"); },
    defineProperty() { throw new TypeError("tools is read-only"); },
    deleteProperty() { throw new TypeError("tools is read-only"); },
    getPrototypeOf() { return null; },
    setPrototypeOf() { return false; },
  });

  const define = (name, value) =>
    Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  define("console", console);
  define("setTimeout", setTimeout);
  define("clearTimeout", clearTimeout);
  define("fetch", fetch);
  define("emit", emit);
  Object.defineProperty(globalThis, "tools", { value: toolsProxy(""), writable: false, configurable: false, enumerable: false });

  const describe = (e) => {
    if (e instanceof ErrorCtor) {
      const name = e.name && e.name !== "Error" ? e.name + ": " : "";
      return name + StringCtor(e.message);
    }
    if (typeof e === "string") return e;
    return renderArg(e);
  };

  return {
    compile: (code) => new AsyncFunction('"use strict";\n' + code),
    // Returns [json] or [undefined] for "no value"; throws a clear message
    // when the value cannot be serialised.
    serialize: (v) => {
      if (v === undefined || v === null) return undefined;
      try {
        return stringify(v);
      } catch (e) {
        const m = StringCtor(e && e.message);
        if (/circular/i.test(m)) throw "result is not JSON-serialisable: circular structure";
        if (/bigint/i.test(m)) throw "result is not JSON-serialisable: BigInt value";
        throw "result is not JSON-serialisable: " + m;
      }
    },
    describe,
    isString: (v) => typeof v === "string",
    takeLogs: () => logs.splice(0, logs.length),
    takeEmitted: () => emitted.splice(0, emitted.length),
    makeError: (message) => new ErrorCtor(message),
    // Milliseconds until the next timer is due, or -1 when none is queued.
    nextTimer: () => {
      if (!timers.length) return -1;
      let min = Infinity;
      for (const t of timers) if (t.at < min) min = t.at;
      return Math.max(0, min - Date.now());
    },
    // Runs every timer that is due now.
    fireDue: () => {
      const now = Date.now();
      const due = [];
      for (let i = timers.length - 1; i >= 0; i--) if (timers[i].at <= now) push(due, timers.splice(i, 1)[0]);
      due.sort((a, b) => a.at - b.at || a.id - b.id);
      for (const t of due) {
        try { t.fn(...t.args); } catch (e) { console.error("Uncaught in setTimeout callback:", describe(e)); }
      }
    },
  };
})
