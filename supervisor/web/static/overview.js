// The overview: one card per unit, alarms on top, live from the page's one stream.
"use strict";

const cards = new Map();   // id -> card data (the id is host/unit: the fleet view mixes daemons)
const nodes = new Map();   // id -> element
let filterText = "";

function stat(k, v, cls, sub, title) {
  return A.el("div", {class: "stat", title: title || null}, A.el("div", {class: "k", text: k}),
    A.el("div", {class: "v " + (cls || ""), text: v}), sub ? A.el("div", {class: "s " + (cls || ""), text: sub}) : null);
}

// The last cycle: its ratio, and under it the new session's recall as `agentd history` reads it.
function lastCycle(last) {
  if (!last) return stat("last cycle", "–");
  const ratio = last.ratio !== null && last.ratio !== undefined ? A.pct(last.ratio, 1) : "–";
  const r = last.recall;
  return stat("last cycle", ratio, r && r.recall < 1 ? "warn" : "", r ? "recall " + r.recall : null,
    r ? "recall " + A.recall(r) : null);
}

// The filter: every word must be in the card's unit, module, host, kind or state (as shown), any case.
function matches(c, text) {
  if (!text) return true;
  const hay = [c.unit, c.module, c.host, c.kind, c.state, c.display.label, c.blocked].filter(Boolean).join(" ").toLowerCase();
  return text.toLowerCase().split(/\s+/).every((w) => hay.includes(w));
}

function footText(c) {
  if (c.alarms.length) return c.alarms[0].text;
  if (c.waiting_for) return "waiting for " + c.waiting_for;
  if (c.activity) return c.activity;
  if (c.next_restart_at) return "restart in " + A.duration(c.next_restart_at - A.now());
  if (c.reason && c.state !== "running") return c.reason;
  return c.description || "";
}

function renderCard(c) {
  const d = c.display;
  const last = c.last_cycle;
  const sched = c.schedule || {};
  const next = sched.start || sched.stop ? (sched.start ? "next start " + sched.start.slice(0, 16).replace("T", " ") : "")
      + (sched.stop ? (sched.start ? " · " : "") + "next stop " + sched.stop.slice(0, 16).replace("T", " ") : "") : "";
  const since = c.last_turn_end ? A.duration(A.now() - c.last_turn_end) : "–";
  const node = A.el("div", {class: "card" + (c.alarms.length ? " alarmed" : ""), "data-unit": c.unit, "data-state": d.key},
    A.el("div", {class: "head"},
      A.glyph(d, "state-glyph"),
      A.el("div", {},
        A.el("a", {class: "name", href: "/unit/" + encodeURIComponent(c.unit), text: c.unit}),
        A.el("span", {class: "host", text: c.host}),
        A.el("div", {class: "sub", text: [c.kind, c.module && "module " + c.module].filter(Boolean).join(" · ")})),
      A.el("div", {class: `state-label tone-${d.tone}`}, d.label,
        A.el("small", {text: c.pid ? `pid ${c.pid} · up ${A.duration(c.uptime)}` : (c.last_exit || "")}))),
    A.gauge(c.context),
    A.el("div", {class: "stats"},
      stat("last turn end", since === "–" ? "–" : since + " ago"),
      stat("crashes · cycles", `${c.crashes || 0} · ${c.cycles || 0}`, c.crashes > 3 ? "warn" : ""),
      lastCycle(last),
      stat("violations", String(c.violations), c.violations ? "bad" : "")),
    A.el("div", {class: "foot", title: footText(c)},
      next ? A.el("span", {class: "sched", text: "◷ " + next + (footText(c) ? " · " : "")}) : null,
      footText(c), c.queued_sends ? ` · ${c.queued_sends} queued` : ""));
  node.querySelector(".stats .stat .v").setAttribute("data-since", c.last_turn_end || "");
  return node;
}

function place(c) {
  const old = nodes.get(c.id);
  const fresh = renderCard(c);
  fresh.hidden = !matches(c, filterText);
  if (old) old.replaceWith(fresh); else document.getElementById("cards").append(fresh);
  nodes.set(c.id, fresh);
}

function filtered() {
  const shown = [...cards.values()].filter((c) => matches(c, filterText)).length;
  let none = document.getElementById("no-match");
  if (filterText && cards.size && !shown) {
    if (!none) { none = A.el("div", {class: "empty", id: "no-match"}); document.getElementById("cards").append(none); }
    none.textContent = `No unit matches “${filterText}”.`;
  } else if (none) none.remove();
  return shown;
}

function renderAlarms() {
  const box = document.getElementById("alarms");
  box.replaceChildren();
  for (const c of [...cards.values()].sort((a, b) => a.unit.localeCompare(b.unit))) {
    for (const al of c.alarms) {
      const amber = al.kind === "idle after compaction" || al.kind === "stalled";
      const tone = amber ? " amber" : al.kind === "blocked" ? " warn" : "";
      box.append(A.el("a", {class: "alarm" + tone, href: "/unit/" + encodeURIComponent(c.unit), "data-unit": c.unit, "data-kind": al.kind},
        A.el("span", {class: "kind", text: "⚠ " + al.kind}), A.el("span", {class: "who", text: c.unit}),
        A.el("span", {class: "what", text: al.text})));
    }
  }
}

function renderSummary() {
  const counts = {};
  const tones = {};
  for (const c of cards.values()) { counts[c.display.label] = (counts[c.display.label] || 0) + 1; tones[c.display.label] = c.display; }
  const box = document.getElementById("summary");
  const shown = filtered();
  box.replaceChildren(A.el("span", {class: "chip", id: "count"}, A.el("b", {text: filterText ? `${shown} of ${cards.size}` : String(cards.size)}), " units"),
    ...Object.entries(counts).sort().map(([label, n]) => A.el("span", {class: "chip"},
      A.el("span", {class: "tone-" + tones[label].tone, text: tones[label].glyph}), A.el("b", {text: String(n)}), label)));
}

// The filter box stays out of what is redrawn: typing keeps its focus while cards change.
document.getElementById("filter").addEventListener("input", (e) => {
  filterText = e.target.value.trim();
  for (const c of cards.values()) place(c);
  renderSummary();
});

function sortCards() {
  const grid = document.getElementById("cards");
  [...nodes.entries()].sort((a, b) => a[0].localeCompare(b[0])).forEach(([, n]) => grid.append(n));
}

function full(ov) {
  A.setNow(ov.now);
  A.header(ov.daemon, ov.host);
  cards.clear(); nodes.clear();
  document.getElementById("cards").replaceChildren();
  for (const c of ov.cards) { cards.set(c.id, c); place(c); }
  if (!ov.cards.length) document.getElementById("cards").append(A.el("div", {class: "empty", text: "No units. Add one to units/ and run agentd reload."}));
  sortCards(); renderAlarms(); renderSummary();
  document.getElementById("legend").replaceChildren(...ov.legend.map((l) =>
    A.el("span", {}, A.el("span", {class: "tone-" + l.tone, text: l.glyph}), l.label)),
    A.el("span", {}, A.el("span", {style: "color:var(--cycle)", text: "┃"}), "checkpoint_at"),
    A.el("span", {}, A.el("span", {style: "color:var(--bad)", text: "┃"}), "hard_limit"));
}

function changed(msg) {
  A.setNow(msg.now);
  let added = false;
  for (const c of msg.cards) { added = added || !cards.has(c.id); cards.set(c.id, c); place(c); }
  for (const id of msg.removed || []) { cards.delete(id); const n = nodes.get(id); if (n) n.remove(); nodes.delete(id); }
  if (added) sortCards();
  renderAlarms(); renderSummary();
}

// "seconds ago" ticks in the browser: no request for that.
setInterval(() => {
  for (const v of document.querySelectorAll("[data-since]")) {
    const t = parseFloat(v.getAttribute("data-since"));
    if (t) v.textContent = A.duration(A.now() - t) + " ago";
  }
}, 1000);

A.stream("/api/events", {overview: full, units: changed});
