// The HTTP side of an OAuth browser step, for tests that check the
// authorization server's protocol details: PKCE pairs, a form's hidden
// fields, and a cookie-keeping "browser" that hands every redirect back
// instead of following it. (The real-browser step is browser.mjs.)
import { createHash, randomBytes } from "node:crypto";

export const b64url = (buf) => buf.toString("base64url");

/** A PKCE S256 verifier and its challenge. */
export const pkce = () => {
  const verifier = b64url(randomBytes(32));
  return { verifier, challenge: b64url(createHash("sha256").update(verifier).digest()) };
};

export const unescapeHtml = (s) =>
  s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** The hidden fields of the page's (first) form. */
export const hiddenFields = (html) => {
  const fields = {};
  for (const m of html.matchAll(/<input type=hidden name="([^"]*)" value="([^"]*)">/g)) {
    fields[unescapeHtml(m[1])] = unescapeHtml(m[2]);
  }
  return fields;
};

/** A browser: a cookie jar, and redirects handed back instead of followed. */
export class Browser {
  constructor(origin) {
    this.origin = origin;
    this.cookies = new Map();
  }
  async go(path, { method = "GET", form, origin } = {}) {
    const headers = {};
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    if (cookie) headers.cookie = cookie;
    let body;
    if (form) {
      body = new URLSearchParams(form).toString();
      headers["content-type"] = "application/x-www-form-urlencoded";
      headers.origin = origin ?? this.origin;
    }
    const res = await fetch(new URL(path, this.origin), { method, headers, body, redirect: "manual" });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const at = pair.indexOf("=");
      const [name, value] = [pair.slice(0, at), pair.slice(at + 1)];
      if (/Max-Age=0/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, location: res.headers.get("location") };
  }

  /** Signs in with a one-time login link (from `executor console login-link`). */
  async signIn(link) {
    const page = await this.go(link);
    if (page.status !== 200) throw new Error(`login link page: ${page.status} ${page.text}`);
    const res = await this.go("/console/login", { method: "POST", form: hiddenFields(page.text) });
    if (res.status !== 303 || !this.cookies.has("executor_session")) {
      throw new Error(`sign-in: ${res.status} ${res.text}`);
    }
    return this;
  }
}
