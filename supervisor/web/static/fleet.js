// The fleet: this daemon's units and its [fleet] peers' (GET /api/fleet, asked again every `refresh` seconds;
// the daemon asks the peers on its own schedule, so a page never waits for one).
"use strict";

let every = 5;

function unitLink(c, self) {
  if (self) return A.el("a", {href: "/unit/" + encodeURIComponent(c.unit), text: c.unit});
  return A.el("span", {text: c.unit});
}

function note(c) {
  if (c.alarms && c.alarms.length) return c.alarms[0].text;
  if (c.warnings && c.warnings.length) return c.warnings[0];
  if (c.waiting_for) return "waiting for " + c.waiting_for;
  return c.activity || (c.state !== "running" ? c.reason : "") || c.description || "";
}

function render(v) {
  A.setNow(v.now);
  every = Math.max(2, v.refresh || 5);
  const self = v.hosts.find((h) => h.self);
  A.header(self && self.daemon, v.host);
  document.getElementById("hosts").replaceChildren(...v.hosts.map((h) =>
    A.el("span", {class: "chip host-chip " + (h.ok ? "ok" : h.pending ? "" : "down"), "data-host": h.name,
                  "data-ok": h.ok ? "yes" : h.pending ? "pending" : "no",
                  title: h.ok ? (h.url || "this daemon") : h.error},
      A.el("span", {class: h.ok ? "tone-ok" : "tone-bad", text: h.ok ? "●" : "✖"}),
      A.el("b", {text: h.name}), h.ok ? `${h.units} units` : h.pending ? "asking…" : "not answering: " + h.error)));
  const alarms = document.getElementById("alarms");
  alarms.replaceChildren(...v.alarms.map((a) => A.el("div", {class: "alarm" + (a.kind === "blocked" ? " warn" : ""), "data-kind": a.kind},
    A.el("span", {class: "kind", text: "⚠ " + a.kind}), A.el("span", {class: "who", text: a.unit ? `${a.host}/${a.unit}` : a.host}),
    A.el("span", {class: "what", text: a.text}))));
  document.getElementById("warnings").replaceChildren(...v.warnings.map((w) => A.el("div", {class: "alarm amber"},
    A.el("span", {class: "kind", text: "warning"}), A.el("span", {class: "who", text: `${w.host}/${w.unit}`}),
    A.el("span", {class: "what", text: w.text}))));
  document.getElementById("rows").replaceChildren(...v.cards.map((c) => {
    const d = c.display;
    const ctx = c.context;
    return A.el("tr", {"data-id": c.id, "data-host": c.host, "data-unit": c.unit, "data-state": d.key,
                       class: c.alarms && c.alarms.length ? "alarmed" : ""},
      A.el("td", {class: "host-cell", "data-label": "host", text: c.host}),
      A.el("td", {"data-label": "unit"}, unitLink(c, c.host === v.host)),
      A.el("td", {"data-label": "state"}, A.el("span", {}, A.glyph(d, "state-glyph"), " " + d.label)),
      A.el("td", {"data-label": "context", text: ctx ? (ctx.exact ? "" : "~") + A.pct(ctx.ratio) + " of " + A.tokens(ctx.window) : "–"}),
      A.el("td", {"data-label": "crashes · cycles", text: `${c.crashes || 0} · ${c.cycles || 0}`}),
      A.el("td", {"data-label": "note", class: "muted", text: note(c)}));
  }));
  if (!v.cards.length) document.getElementById("rows").append(A.el("tr", {}, A.el("td", {colspan: "6", class: "empty", text: "No units."})));
}

async function refresh() {
  const live = document.getElementById("live");
  try {
    const res = await fetch("/api/fleet", {credentials: "same-origin"});
    if (!res.ok) throw new Error(res.statusText);
    render(await res.json());
    live.className = "live on"; live.lastChild.textContent = `every ${every}s`;
  } catch (e) {
    live.className = "live off"; live.lastChild.textContent = "reconnecting";
  }
  setTimeout(refresh, every * 1000);
}

refresh();
