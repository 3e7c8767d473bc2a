// The murmur console's own script: keeps the parts of a page marked data-frag up to date. It listens to
// the console's server-sent events and, when a change concerns a part, asks the server for that part
// again (the same page, with the X-Console-Fragment header) and puts it in place. Nothing else.
"use strict";
(function () {
  const live = document.getElementById("live");
  const parts = Array.from(document.querySelectorAll("[data-frag]"));
  const state = new Map(); // element -> {busy, again}

  function say(text, cls) {
    if (!live) return;
    live.textContent = text;
    live.className = "live " + (cls || "");
  }

  function concerns(el, e) {
    const kinds = (el.dataset.on || "").split(" ");
    if (e.kind === "resync") return true;
    if (!kinds.includes(e.kind)) return false;
    if (el.dataset.member && e.member && e.member !== el.dataset.member) return false;
    if (el.dataset.task) {
      if (e.kind === "calls") return true;
      if (e.task === el.dataset.task) return true;
      // a task this one called, linked from it
      return !!e.task && !!el.querySelector('[data-task-id="' + CSS.escape(e.task) + '"]');
    }
    return true;
  }

  async function refresh(el) {
    const st = state.get(el) || {busy: false, again: false, last: null};
    state.set(el, st);
    if (st.busy) { st.again = true; return; }
    st.busy = true;
    try {
      do {
        st.again = false;
        const res = await fetch(location.href, {headers: {"X-Console-Fragment": el.dataset.frag}, credentials: "same-origin"});
        if (res.status === 401) { say("logged out: reload to log in", "bad"); return; }
        if (!res.ok) continue;
        const html = await res.text();
        if (html === st.last) continue;
        st.last = html;
        const focused = document.activeElement && el.contains(document.activeElement) ? document.activeElement.id : "";
        el.innerHTML = html;
        if (focused) { const f = document.getElementById(focused); if (f) f.focus(); }
        el.dispatchEvent(new CustomEvent("console:updated", {bubbles: true}));
      } while (st.again);
    } catch (err) {
      say("cannot reach the console", "bad");
    } finally {
      st.busy = false;
    }
  }

  if (parts.length === 0 || !window.EventSource) { say(""); return; }
  const es = new EventSource("/events");
  es.addEventListener("open", () => {
    say("live", "ok");
    parts.forEach(refresh); // catch up on what changed while the stream was away
  });
  es.addEventListener("error", () => say("reconnecting…", "bad"));
  es.addEventListener("change", (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    parts.forEach((el) => { if (concerns(el, e)) refresh(el); });
  });
  window.addEventListener("pagehide", () => es.close());
})();
