// The console's one script. Pages read and work without it; it adds the
// live parts: an element with data-live follows that URL's server-sent
// events, and each `pending` event's data (HTML rendered and escaped by
// the server) replaces the element's content. The browser's EventSource
// reconnects by itself when a stream ends. A field with data-check is
// checked as it is typed: that URL's answer for the value (HTML, escaped
// by the server) fills the element the field is described by.
"use strict";

function followLive(element) {
  const source = new EventSource(element.dataset.live);
  source.addEventListener("pending", (event) => {
    // Keep the keyboard where it was when the list is redrawn.
    const focused = document.activeElement;
    const keep = focused && element.contains(focused)
      ? { action: focused.form && focused.form.getAttribute("action"), value: focused.value }
      : null;
    element.innerHTML = event.data;
    if (keep) {
      for (const button of element.querySelectorAll("button")) {
        if (button.form && button.form.getAttribute("action") === keep.action && button.value === keep.value) {
          button.focus();
          break;
        }
      }
    }
    element.dispatchEvent(new CustomEvent("live-updated", { bubbles: true }));
  });
  source.addEventListener("error", () => {
    element.dataset.liveState = source.readyState === EventSource.CLOSED ? "closed" : "reconnecting";
  });
  source.addEventListener("open", () => {
    element.dataset.liveState = "open";
  });
}

function checkAsTyped(input) {
  const target = document.getElementById(input.getAttribute("aria-describedby"));
  if (!target) return;
  let timer;
  let latest = 0;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const ticket = ++latest;
      const url = new URL(input.dataset.check, window.location.href);
      url.searchParams.set("pattern", input.value);
      try {
        const response = await fetch(url, { credentials: "same-origin" });
        const html = await response.text();
        // Only the answer for the latest value is shown.
        if (ticket === latest && response.ok) target.innerHTML = html;
      } catch {
        // Offline: the form is still checked when it is sent.
      }
    }, 200);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  for (const element of document.querySelectorAll("[data-live]")) followLive(element);
  for (const input of document.querySelectorAll("input[data-check]")) checkAsTyped(input);
});
