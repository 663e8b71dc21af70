// The console's one script. Pages read and work without it; it adds the
// live parts: an element with data-live follows that URL's server-sent
// events, and each `pending` event's data (HTML rendered and escaped by
// the server) replaces the element's content. The browser's EventSource
// reconnects by itself when a stream ends.
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

document.addEventListener("DOMContentLoaded", () => {
  for (const element of document.querySelectorAll("[data-live]")) followLive(element);
});
