// promoter dashboard: swaps in what the server rendered, filters rows, ticks countdowns, and
// sends the actions a person confirmed. It decides nothing about a rollout: every state, text and
// "what will change" comes from the server (promoter's status, explain and the commands).
"use strict";

(function () {
  const meta = (name) => {
    const m = document.querySelector(`meta[name="${name}"]`);
    return m ? m.getAttribute("content") : "";
  };
  const token = meta("promoter-token");
  // What updates cost here (the benchmark reads it): each applied event's time, the last tick's.
  const stats = (window.promoterStats = { updates: [], tick: 0, filter: 0, clock: 0 });
  const timed = (event, f) => (e) => {
    const t0 = performance.now();
    f(e);
    stats.updates.push({ event, ms: performance.now() - t0, bytes: e.data.length });
    if (stats.updates.length > 200) stats.updates.shift();
  };

  // The clock: the server's (virtual, in a simulation) time and rate, anchored on arrival. It runs
  // here as it runs there, never past where the server's waits for its next pass (`hold`), and
  // never backwards: the page never shows a time the simulation has not reached.
  let clock = { now: Date.now(), rate: 1, running: true, hold: null, anchor: performance.now() };
  let shown = 0;
  function setClock(text) {
    try {
      const c = JSON.parse(text);
      clock = { now: c.now, rate: c.rate, running: c.running, hold: c.hold, anchor: performance.now() };
      simControls(c);
    } catch (_) {
      /* keep the last one */
    }
    restartTicker();
  }
  function vnow() {
    let t = clock.now + (clock.running ? (performance.now() - clock.anchor) * clock.rate : 0);
    if (clock.hold !== null && clock.hold !== undefined) t = Math.min(t, Math.max(clock.hold, clock.now));
    shown = Math.max(shown, t);
    stats.clock = shown;
    return shown;
  }
  // The simulation's controls show the clock's state: the toggle, the words, the speed asked.
  function simControls(c) {
    const toggle = document.getElementById("sim-toggle");
    if (!toggle) return;
    toggle.dataset.sim = c.running ? "pause" : "play";
    toggle.textContent = c.running ? "‖ Pause" : "▶ Play";
    toggle.className = c.running ? "toggle playing" : "toggle paused";
    toggle.disabled = !!c.ended;
    const state = document.getElementById("sim-state");
    if (state && state.textContent !== c.state) state.textContent = c.state;
    const speed = document.getElementById("sim-speed");
    if (speed && Number(speed.value) !== c.rate) {
      let option = [...speed.options].find((o) => Number(o.value) === c.rate);
      if (!option) {
        option = document.createElement("option");
        option.value = String(c.rate);
        option.textContent = `${c.rate}×`;
        speed.append(option);
      }
      speed.value = option.value;
    }
  }

  // As `promoter status` writes them (ops::inspect::age and relative).
  function age(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d === 0 && h === 0 && m === 0) return `${sec}s`;
    if (d === 0 && h === 0) return `${m}m`;
    if (d === 0) return `${h}h${String(m).padStart(2, "0")}m`;
    return `${d}d${h}h`;
  }
  function relative(until, now) {
    return until <= now ? "due" : `in ${age((until - now) / 1000)}`;
  }
  const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

  function tick() {
    const t0 = performance.now();
    const now = vnow();
    for (const t of document.querySelectorAll("time[data-until]")) {
      const text = relative(Date.parse(t.dataset.until), now);
      if (t.textContent !== text) t.textContent = text;
    }
    for (const t of document.querySelectorAll("time[data-since]")) {
      const text = `${age((now - Date.parse(t.dataset.since)) / 1000)} ago`;
      if (t.textContent !== text) t.textContent = text;
    }
    const c = document.getElementById("clock");
    if (c) {
      c.textContent = iso(now);
      c.setAttribute("datetime", iso(now));
    }
    stats.tick = performance.now() - t0;
  }
  let ticker = null;
  function restartTicker() {
    if (ticker) clearInterval(ticker);
    ticker = setInterval(tick, clock.running && clock.rate > 1 ? 250 : 1000);
    tick();
  }

  // Parsing what the server rendered (escaped there).
  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }

  // A swap keeps what the person was doing: the open chips and the focused control.
  function focusKey(el) {
    if (!el || el === document.body) return null;
    if (el.id) return { id: el.id };
    if (el.dataset && el.dataset.action)
      return {
        action: el.dataset.action,
        promotion: el.dataset.promotion || "",
        stage: el.dataset.stage || "",
        name: el.dataset.name || "",
      };
    return null;
  }
  function refocus(key) {
    if (!key) return;
    let el = null;
    if (key.id) el = document.getElementById(key.id);
    else
      el = [...document.querySelectorAll("[data-action]")].find(
        (b) =>
          b.dataset.action === key.action &&
          (b.dataset.promotion || "") === key.promotion &&
          (b.dataset.stage || "") === key.stage &&
          (b.dataset.name || "") === key.name,
      );
    if (el && document.activeElement !== el) el.focus({ preventScroll: true });
  }
  function swap(container, html) {
    if (!container) return;
    const open = [...container.querySelectorAll("details[open][id]")].map((d) => d.id);
    const key = container.contains(document.activeElement) ? focusKey(document.activeElement) : null;
    container.replaceChildren(fragment(html));
    for (const id of open) {
      const d = document.getElementById(id);
      if (d) d.open = true;
    }
    refocus(key);
    tick();
  }

  // Filters of the overview: name, phase, labels (`k=v`, `k!=v`, `k`, `!k`, comma-separated).
  function labelTerms(text) {
    return text
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean)
      .map((t) => {
        let m;
        if ((m = t.match(/^([^!=]+)!=(.*)$/))) return (l) => l.get(m[1].trim()) !== m[2].trim();
        if ((m = t.match(/^([^!=]+)==?(.*)$/))) return (l) => l.get(m[1].trim()) === m[2].trim();
        if (t.startsWith("!")) return (l) => !l.has(t.slice(1).trim());
        return (l) => l.has(t);
      });
  }
  function criteria() {
    const q = (document.getElementById("q")?.value || "").trim().toLowerCase();
    const phase = document.getElementById("phase")?.value || "";
    const terms = labelTerms(document.getElementById("labels")?.value || "");
    return (tr) => {
      const labels = new Map(
        (tr.dataset.labels || "")
          .split("\n")
          .filter(Boolean)
          .map((kv) => {
            const i = kv.indexOf("=");
            return [kv.slice(0, i), kv.slice(i + 1)];
          }),
      );
      return (
        (!q || (tr.dataset.name || "").toLowerCase().includes(q)) &&
        (!phase || (tr.dataset.phases || tr.dataset.phase || "").split(" ").includes(phase)) &&
        terms.every((f) => f(labels))
      );
    };
  }
  function count(rows) {
    const all = rows.children.length;
    const shown = rows.querySelectorAll(":scope > tr:not([hidden])").length;
    const c = document.getElementById("count");
    const promotions = all === 1 ? "promotion" : "promotions";
    if (c) c.textContent = shown === all ? `${all} ${promotions}` : `${shown} of ${all} ${promotions}`;
    const empty = document.getElementById("empty");
    if (empty) empty.hidden = all > 0;
  }
  // Every row (a filter changed, the list changed), or only `one` (a row was swapped in).
  function applyFilters(one) {
    const rows = document.getElementById("rows");
    if (!rows) return;
    const t0 = performance.now();
    const ok = criteria();
    for (const tr of one ? [one] : rows.children) tr.hidden = !ok(tr);
    count(rows);
    stats.filter = performance.now() - t0;
  }

  // Whether the page is connected, when it is not (the banner the server sends cannot say it).
  function connection(text) {
    const c = document.getElementById("connection");
    if (!c) return;
    if (c.textContent !== text) c.textContent = text;
    c.hidden = !text;
  }

  // Live updates over server-sent events.
  function connect() {
    const url = meta("promoter-stream");
    if (!url) return;
    const live = document.getElementById("live");
    const es = new EventSource(url);
    es.onopen = () => {
      if (live) live.textContent = "● live";
      connection("");
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // The server answered, and not with the stream: this page's session is not its own.
        if (live) live.textContent = "disconnected";
        fetch(url, { method: "HEAD" })
          .then((r) =>
            connection(
              r.status === 401
                ? "This page's session ended: the dashboard was restarted. Open the URL it printed (it carries the new session's token)."
                : `The dashboard refused the live updates (HTTP ${r.status}). Reload the page.`,
            ),
          )
          .catch(() => connection("The dashboard does not answer. Reload the page once it runs again."));
        return;
      }
      // EventSource tries again by itself.
      if (live) live.textContent = "reconnecting…";
      connection(`The dashboard does not answer (stopped?): this page shows what it last sent, as of ${iso(vnow())}, and reconnects when it is back.`);
    };
    es.addEventListener("clock", (e) => setClock(e.data));
    es.addEventListener("banner", timed("banner", (e) => swap(document.getElementById("banner"), e.data)));
    es.addEventListener("rows", timed("rows", (e) => {
      swap(document.getElementById("rows"), e.data);
      applyFilters();
    }));
    es.addEventListener("row", timed("row", (e) => {
      const { id, html } = JSON.parse(e.data);
      const old = document.getElementById(id);
      if (!old) return;
      const key = old.contains(document.activeElement) ? focusKey(document.activeElement) : null;
      const tbody = document.createElement("tbody");
      tbody.innerHTML = html;
      const row = tbody.firstElementChild;
      if (!row) return;
      old.replaceWith(row);
      refocus(key);
      applyFilters(row);
      tick();
    }));
    es.addEventListener("detail", timed("detail", (e) => swap(document.getElementById("detail"), e.data)));
    es.addEventListener("freezes", timed("freezes", (e) => swap(document.getElementById("freezes-live"), e.data)));
    es.addEventListener("gone", () => {
      const b = document.getElementById("banner");
      if (b) b.replaceChildren(fragment('<p class="banner err" role="alert">This ClusterPromotion no longer exists.</p>'));
    });
    window.addEventListener("pagehide", () => es.close());
  }

  async function post(path, body) {
    const r = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Promoter-Token": token },
      body: JSON.stringify(body),
    });
    let data = {};
    try {
      data = await r.json();
    } catch (_) {
      data = { error: `HTTP ${r.status}` };
    }
    return { ok: r.ok, status: r.status, data };
  }

  function toast(text, bad) {
    const t = document.getElementById("toast");
    if (!t) return;
    t.textContent = text;
    t.className = bad ? "show bad" : "show";
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => (t.className = ""), 6000);
  }

  // The confirmation: the server says what would change; the person confirms; the server does it
  // only if that is still what would change.
  const dialog = document.getElementById("confirm");
  let pending = null; // { request, preview, opener }

  function fill(preview, error) {
    const title = document.getElementById("confirm-title");
    const summary = document.getElementById("confirm-summary");
    const changes = document.getElementById("confirm-changes");
    title.textContent = preview.title;
    summary.replaceChildren();
    for (const line of preview.summary) {
      const p = document.createElement("p");
      p.textContent = line;
      summary.append(p);
    }
    const who = document.createElement("p");
    who.className = "who";
    who.textContent = `Recorded as: ${preview.identity}`;
    summary.append(who);
    if (pending.request.action === "rollback" && preview.revisions && preview.revisions.length) {
      const label = document.createElement("label");
      label.textContent = "Revision to restore ";
      const select = document.createElement("select");
      select.id = "confirm-revision";
      for (const [id, completed] of preview.revisions) {
        const o = document.createElement("option");
        o.value = id;
        o.textContent = `${id} (completed ${completed})`;
        if (pending.request.toRevision === id) o.selected = true;
        select.append(o);
      }
      select.addEventListener("change", () => {
        pending.request.toRevision = select.value;
        ask(pending.request, pending.opener);
      });
      label.append(select);
      summary.append(label);
      const olabel = document.createElement("label");
      olabel.textContent = " order ";
      const order = document.createElement("select");
      order.id = "confirm-order";
      for (const [v, t] of [["", "the promotion's setting"], ["reverse", "reverse"], ["all-at-once", "all at once"]]) {
        const o = document.createElement("option");
        o.value = v;
        o.textContent = t;
        if ((pending.request.order || "") === v) o.selected = true;
        order.append(o);
      }
      order.addEventListener("change", () => {
        pending.request.order = order.value;
        ask(pending.request, pending.opener);
      });
      olabel.append(order);
      summary.append(olabel);
    }
    changes.replaceChildren();
    for (const line of preview.changes) {
      const li = document.createElement("li");
      li.textContent = line;
      changes.append(li);
    }
    changes.previousElementSibling.hidden = preview.changes.length === 0;
    const fields = document.getElementById("confirm-fields");
    const personal = !["freeze-create", "freeze-delete"].includes(pending.request.action);
    fields.hidden = !personal || preview.nothing;
    document.getElementById("confirm-reason").required = preview.reasonRequired;
    const ok = document.getElementById("confirm-ok");
    ok.disabled = preview.nothing;
    ok.textContent = preview.nothing ? "Nothing to do" : "Confirm";
    document.getElementById("confirm-error").textContent = error || "";
  }

  async function ask(request, opener) {
    const r = await post("/api/preview", request);
    if (!r.ok) {
      if (dialog.open) {
        document.getElementById("confirm-error").textContent = r.data.error || `HTTP ${r.status}`;
      } else {
        toast(r.data.error || `HTTP ${r.status}`, true);
      }
      return;
    }
    pending = { request, preview: r.data, opener };
    fill(r.data, "");
    if (!dialog.open) {
      dialog.showModal();
      const first = !document.getElementById("confirm-fields").hidden
        ? document.getElementById("confirm-reason")
        : document.getElementById("confirm-ok").disabled
          ? document.getElementById("confirm-cancel")
          : document.getElementById("confirm-ok");
      first.focus();
    }
  }

  function close() {
    dialog.close();
    const opener = pending && pending.opener;
    pending = null;
    document.getElementById("confirm-reason").value = "";
    document.getElementById("confirm-by").value = "";
    if (opener && opener.isConnected) opener.focus();
    else refocus(opener && focusKey(opener)) || document.getElementById("main")?.focus();
  }

  async function confirmed(e) {
    e.preventDefault();
    if (!pending) return;
    const reason = document.getElementById("confirm-reason");
    if (reason.required && !reason.value.trim()) {
      document.getElementById("confirm-error").textContent = "A reason is required.";
      reason.focus();
      return;
    }
    const ok = document.getElementById("confirm-ok");
    ok.disabled = true;
    const body = Object.assign({}, pending.request, {
      reason: reason.value || undefined,
      by: document.getElementById("confirm-by").value || undefined,
      fingerprint: pending.preview.fingerprint,
    });
    const r = await post("/api/act", body);
    ok.disabled = false;
    if (r.ok) {
      toast(r.data.message || "done");
      close();
    } else if (r.status === 409 && r.data.preview) {
      pending.preview = r.data.preview;
      fill(r.data.preview, r.data.error);
    } else {
      document.getElementById("confirm-error").textContent = r.data.error || `HTTP ${r.status}`;
    }
  }

  function requestOf(button) {
    const d = button.dataset;
    const r = { action: d.action };
    if (d.promotion) r.promotion = d.promotion;
    if (d.stage) r.stage = d.stage;
    if (d.name) r.name = d.name;
    if (d.action === "bypass") r.until = "4h";
    return r;
  }

  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-action]");
    if (button) {
      e.preventDefault();
      ask(requestOf(button), button);
      return;
    }
    const sim = e.target.closest("button[data-sim]");
    if (sim) {
      post("/api/sim", { op: sim.dataset.sim }).then((r) => toast(r.data.message || r.data.error, !r.ok));
    }
  });
  document.addEventListener("change", (e) => {
    if (e.target.matches("select[data-sim=speed]")) {
      post("/api/sim", { op: "speed", rate: Number(e.target.value) }).then((r) =>
        toast(r.data.message || r.data.error, !r.ok),
      );
    }
  });
  document.addEventListener("submit", (e) => {
    const form = e.target.closest("form[data-action]");
    if (!form) return;
    e.preventDefault();
    const request = { action: form.dataset.action };
    for (const [k, v] of new FormData(form)) if (String(v).trim()) request[k] = String(v).trim();
    ask(request, form.querySelector("button[type=submit]"));
  });
  if (dialog) {
    document.getElementById("confirm-form").addEventListener("submit", confirmed);
    document.getElementById("confirm-cancel").addEventListener("click", close);
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      close();
    });
  }

  for (const id of ["q", "phase", "labels"]) {
    const el = document.getElementById(id);
    if (el) el.addEventListener("input", () => applyFilters());
  }
  document.getElementById("filters")?.addEventListener("submit", (e) => e.preventDefault());
  document.addEventListener("keydown", (e) => {
    const typing = e.target.closest("input, select, textarea, dialog");
    if (e.key === "/" && !typing) {
      const q = document.getElementById("q");
      if (q) {
        e.preventDefault();
        q.focus();
      }
    }
  });

  setClock(meta("promoter-clock"));
  applyFilters();
  connect();
})();
