// A unit's page: header and actions, context chart, cycles, wakeup, memory, violations, live terminal.
"use strict";

const UNIT = decodeURIComponent(location.pathname.split("/").pop());
document.title = UNIT + " · agentd";
let card = null;
let series = [];
let cycles = [];
let lastCycleSeen;

const term = new Terminal({
  disableStdin: true, convertEol: false, cursorBlink: false, cols: 120, rows: 32, scrollback: 5000,
  fontFamily: '"DejaVu Sans Mono", ui-monospace, Menlo, Consolas, monospace', fontSize: 12.5,
  theme: {background: "#05070a", foreground: "#d7dee8", cursor: "#05070a", selectionBackground: "#2b3b55"},
});
term.open(document.getElementById("term"));

function button(label, what, cls, enabled, body) {
  return A.el("button", {class: cls || "", "data-action": what, disabled: !enabled, onclick: async (e) => {
    e.target.disabled = true;
    await A.action(UNIT, what, body);
    setTimeout(() => { e.target.disabled = false; }, 800);
  }, text: label});
}

function renderHead() {
  const c = card;
  const d = c.display;
  const active = ["running", "starting", "checkpointing", "respawning"].includes(c.state);
  const box = document.getElementById("head");
  box.replaceChildren(
    A.glyph(d, "state-glyph"),
    A.el("div", {}, A.el("h1", {text: c.unit}),
      A.el("div", {class: "sub"}, A.el("span", {class: "tone-" + d.tone, id: "state-label", text: d.label}),
        " · " + [c.kind, c.module && "module " + c.module, c.host, c.description].filter(Boolean).join(" · "))),
    A.el("div", {class: "actions"},
      button("Checkpoint", "checkpoint", "", c.state === "running"),
      button("Restart", "restart", "", active || c.state === "backoff" || c.state === "failed" || c.enabled),
      button("Stop", "stop", "danger", c.state !== "inactive"),
      button("Start", "start", "primary", !active && c.state !== "stopping")));
  const alarms = document.getElementById("alarms");
  alarms.replaceChildren(...c.alarms.map((al) => A.el("div", {class: "alarm"},
    A.el("span", {class: "kind", text: "⚠ " + al.kind}), A.el("span", {class: "what", text: al.text}))));
}

function renderNow() {
  const c = card;
  const kv = (k, v) => [A.el("div", {class: "k", text: k}), A.el("div", {text: v === null || v === undefined || v === "" ? "–" : String(v)})];
  document.getElementById("now").replaceChildren(A.gauge(c.context), A.el("div", {class: "kv", style: "margin-top:12px"},
    kv("state", c.state + (c.turn ? ` (turn: ${c.turn})` : "")),
    kv("doing", c.activity || c.waiting_for || c.reason),
    kv("session", c.session), kv("pid", c.pid), kv("uptime", c.uptime !== null ? A.duration(c.uptime) : null),
    kv("last turn end", c.last_turn_end ? A.duration(A.now() - c.last_turn_end) + " ago" : null),
    kv("restarts", c.restarts), kv("last exit", c.last_exit),
    kv("CPU / RSS", c.cpu_seconds !== null ? `${c.cpu_seconds.toFixed(1)} s / ${(c.rss_bytes / 1048576).toFixed(1)} MiB` : null),
    kv("queued sends", c.queued_sends), kv("violations", c.violations),
    kv("schedule", c.schedule ? Object.entries(c.schedule).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ") : null)));
}

function pill(text, cls) { return A.el("span", {class: "pill " + (cls || ""), text}); }

function renderCycles() {
  document.getElementById("cycle-count").textContent = cycles.length ? `${cycles.length} recorded` : "";
  if (!cycles.length) { document.getElementById("cycles").replaceChildren(A.el("div", {class: "muted", text: "no cycle yet"})); return; }
  const rows = cycles.slice(-30).reverse().map((r) => A.el("tr", {},
    A.el("td", {text: A.time(r.t)}), A.el("td", {text: r.trigger}),
    A.el("td", {text: r.tokens_before !== null && r.tokens_before !== undefined ? A.tokens(r.tokens_before) + (r.window ? " / " + A.tokens(r.window) : "") : "–"}),
    A.el("td", {text: A.tokens(r.wakeup_tokens)}), A.el("td", {text: r.ratio !== null && r.ratio !== undefined ? A.pct(r.ratio, 1) : "–"}),
    A.el("td", {}, pill(r.flush, r.flush === "verified" ? "good" : r.flush === "auto" ? "auto" : "")),
    A.el("td", {class: "mono", text: r.wip_commit ? String(r.wip_commit).slice(0, 10) : "–"}),
    A.el("td", {text: r.recall !== undefined && r.recall !== null ? (typeof r.recall === "number" ? A.pct(r.recall) : String(r.recall)) : "–"}),
    A.el("td", {class: "muted", text: r.outcome})));
  document.getElementById("cycles").replaceChildren(A.el("div", {class: "scroll-x"}, A.el("table", {},
    A.el("thead", {}, A.el("tr", {}, ...["when", "trigger", "tokens before", "wakeup", "ratio", "flush", "WIP commit", "recall", "outcome"].map((h) => A.el("th", {text: h})))),
    A.el("tbody", {}, rows))));
}

function renderChart() {
  const W = 640, H = 210, L = 38, R = 10, T = 10, B = 24;
  const pts = series.map(([t, used, win]) => [t, win ? used / win : 0]);
  for (const c of cycles) if (c.t && c.tokens_before && c.window) pts.push([c.t - 0.5, c.tokens_before / c.window]);
  pts.sort((a, b) => a[0] - b[0]);
  if (card && card.context) pts.push([A.now(), card.context.ratio]);
  const note = document.getElementById("chart-note");
  const box = document.getElementById("chart");
  if (pts.length < 2) { box.replaceChildren(A.el("div", {class: "muted", text: "no context figures yet"})); note.textContent = ""; return; }
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 60);
  const x = (t) => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = (r) => T + (1 - Math.min(1, r)) * (H - T - B);
  const ck = card && card.context ? card.context.checkpoint_at : null;
  const hard = card && card.context ? card.context.hard_limit : null;
  const svg = A.svg("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none"});
  for (const r of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(A.svg("line", {x1: L, x2: W - R, y1: y(r), y2: y(r), stroke: "#1f2836", "stroke-width": 1}));
    svg.append(A.svg("text", {x: 4, y: y(r) + 4, text: (r * 100) + "%"}));
  }
  if (ck) svg.append(A.svg("line", {x1: L, x2: W - R, y1: y(ck), y2: y(ck), stroke: "#b48cff", "stroke-dasharray": "5 4", "stroke-width": 1.2}));
  if (hard) svg.append(A.svg("line", {x1: L, x2: W - R, y1: y(hard), y2: y(hard), stroke: "#ff5d6c", "stroke-dasharray": "5 4", "stroke-width": 1.2}));
  for (const c of cycles) {
    if (!c.t || c.t < t0) continue;
    const g = A.svg("g", {});
    g.append(A.svg("line", {x1: x(c.t), x2: x(c.t), y1: T, y2: H - B, stroke: "#b48cff", "stroke-width": 1.5, opacity: 0.8}));
    g.append(A.svg("circle", {cx: x(c.t), cy: T + 4, r: 4, fill: c.flush === "verified" ? "#3fd68f" : "#f2c14e"}));
    g.append(A.svg("title", {text: `${A.time(c.t)} ${c.trigger}: ${A.tokens(c.tokens_before)} → wakeup ${A.tokens(c.wakeup_tokens)} (${c.flush})`}));
    svg.append(g);
  }
  let d = "";
  let area = "";
  pts.forEach(([t, r], i) => { d += (i ? "L" : "M") + x(t).toFixed(1) + "," + y(r).toFixed(1); });
  area = d + `L${x(pts[pts.length - 1][0]).toFixed(1)},${y(0)}L${x(pts[0][0]).toFixed(1)},${y(0)}Z`;
  const grad = A.svg("linearGradient", {id: "ctxfill", x1: 0, x2: 0, y1: 0, y2: 1},
    A.svg("stop", {offset: "0%", "stop-color": "#3fd68f", "stop-opacity": 0.35}), A.svg("stop", {offset: "100%", "stop-color": "#3fd68f", "stop-opacity": 0.02}));
  svg.append(A.svg("defs", {}, grad), A.svg("path", {d: area, fill: "url(#ctxfill)"}),
    A.svg("path", {d, fill: "none", stroke: "#3fd68f", "stroke-width": 2, "stroke-linejoin": "round"}));
  for (const [t, label] of [[t0, A.time(t0)], [t1, "now"]]) {
    svg.append(A.svg("text", {x: t === t0 ? L : W - R - 22, y: H - 6, text: label}));
  }
  box.replaceChildren(svg);
  note.textContent = `${cycles.filter((c) => c.t >= t0).length} cycle(s) marked · dashed: checkpoint_at, hard_limit`;
}

function renderMemory(detail) {
  const w = detail.wakeup;
  document.getElementById("wakeup").textContent = w.text || ("(cannot build the wakeup now: " + w.error + ")");
  document.getElementById("wakeup-note").textContent = w.text ? `${w.tokens} tokens of ${w.budget}` : "";
  const dec = detail.decisions.slice(-40).reverse();
  document.getElementById("decisions").replaceChildren(...(dec.length ? dec.map((d) => A.el("div", {class: "item"},
    A.el("div", {class: "when"}, d.time + " · " + d.module + " ", ...d.tags.map((t) => pill(t, "tag"))),
    A.el("div", {text: d.decision}), A.el("div", {class: "why", text: "why: " + d.why}))) : [A.el("div", {class: "muted", text: "no decisions"})]));
  const facts = detail.facts;
  document.getElementById("facts").replaceChildren(...(facts.length ? facts.map((f) => A.el("div", {class: "item"},
    A.el("div", {class: "when"}, f.id + " · " + f.module + " · ", pill(f.status, f.status === "valid" ? "good" : f.status === "stale" ? "auto" : "bad")),
    A.el("div", {text: f.text}), A.el("div", {class: "why", text: (f.source || "engram") + (f.invalid_why ? " — " + f.invalid_why : "")}))) :
    [A.el("div", {class: "muted", text: "no facts"})]));
  const vio = detail.violations.slice(-50).reverse();
  document.getElementById("violations").replaceChildren(vio.length ? A.el("div", {class: "scroll-x"}, A.el("table", {},
    A.el("thead", {}, A.el("tr", {}, ...["when", "path", "rule", "action", "done"].map((h) => A.el("th", {text: h})))),
    A.el("tbody", {}, vio.map((v) => A.el("tr", {}, A.el("td", {text: A.time(v.t)}), A.el("td", {class: "mono", text: v.path}),
      A.el("td", {text: v.rule}), A.el("td", {text: v.action}), A.el("td", {class: "muted", text: v.done || "–"}))))))
    : A.el("div", {class: "muted", text: "no violations"}));
}

async function loadDetail() {
  const res = await fetch("/api/units/" + encodeURIComponent(UNIT), {credentials: "same-origin"});
  if (!res.ok) { A.toast("cannot load " + UNIT + ": " + res.status, true); return; }
  const detail = await res.json();
  A.setNow(detail.now);
  series = detail.series; cycles = detail.cycles;
  if (detail.card) { card = detail.card; lastCycleSeen = JSON.stringify(card.last_cycle); renderHead(); renderNow(); }
  renderCycles(); renderChart(); renderMemory(detail);
}

function onCards(msg) {
  A.setNow(msg.now);
  for (const c of msg.cards) {
    if (c.unit !== UNIT) continue;
    card = c;
    if (c.context) series.push([msg.now, c.context.used, c.context.window]);
    renderHead(); renderNow(); renderChart();
    // A new cycle was recorded: the files changed (history, wakeup, memory); read them once.
    if (JSON.stringify(c.last_cycle) !== lastCycleSeen) { lastCycleSeen = JSON.stringify(c.last_cycle); loadDetail(); }
  }
}

document.getElementById("send-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = document.getElementById("send-text");
  if (!input.value.trim()) return;
  const ok = await A.action(UNIT, "send", {text: input.value});
  if (ok) input.value = "";
});

A.stream("/api/events?unit=" + encodeURIComponent(UNIT), {
  overview: (ov) => { A.header(ov.daemon, ov.host); onCards({now: ov.now, cards: ov.cards}); },
  units: onCards,
  session: (s) => {
    const note = document.getElementById("term-note");
    if (!s.session) { note.textContent = "no session running: the terminal follows the next one"; return; }
    term.reset();
    if (s.cols && s.rows) term.resize(s.cols, s.rows);
    note.textContent = `session ${s.session} · pid ${s.pid} · ${s.cols}×${s.rows}`;
  },
  term: (t) => term.write(t.data),
  dropped: (d) => term.write("\r\n\x1b[33m[" + d.note + "]\x1b[0m\r\n"),
});
loadDetail();
setInterval(() => { if (card) renderNow(); }, 1000);
