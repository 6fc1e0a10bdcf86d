// A unit's page: header and actions, context chart, cycles, wakeup, memory, violations, live terminal.
"use strict";

const UNIT = decodeURIComponent(location.pathname.split("/").pop());
document.title = UNIT + " · agentd";
let card = null;
let series = [];
let cycles = [];
let lastCycleSeen;

// The agent's output is untrusted: a link it draws (OSC 8) is never opened from here, only shown.
const term = new Terminal({
  disableStdin: true, convertEol: false, cursorBlink: false, cols: 120, rows: 32, scrollback: 5000,
  fontFamily: '"DejaVu Sans Mono", ui-monospace, Menlo, Consolas, monospace', fontSize: 12.5,
  theme: {background: "#05070a", foreground: "#d7dee8", cursor: "#05070a", selectionBackground: "#2b3b55"},
  linkHandler: {activate: (e, uri) => A.toast("a link in the agent's output, not opened: " + uri, true), allowNonHttpProtocols: false},
});
term.open(document.getElementById("term"));

// The terminal's font follows the width it has (8 to 12.5 px); on a phone its box scrolls sideways by itself.
function fitTerm() {
  const wrap = document.querySelector(".term-wrap");
  const size = Math.max(8, Math.min(12.5, Math.floor((wrap.clientWidth - 18) / term.cols / 0.602 * 2) / 2));
  if (size && term.options.fontSize !== size) term.options.fontSize = size;
}
window.addEventListener("resize", () => { fitTerm(); renderChart(); });
fitTerm();

const FAILED = ["failed", "error"];
const ACTIVE = ["running", "starting", "checkpointing", "respawning"];
let watching = null;  // the last action, followed on the stream for a while: {what, until, state}

function checkpointSeconds(c) {
  const l = c.checkpoint_limits;
  return l ? Math.round(l.deadline + l.grace) : null;
}

// What each asked action says before it acts, and its choices: [button label, body].
const ASK = {
  stop: (c) => {
    const s = checkpointSeconds(c);
    return {ask: `Stop ${c.unit}?`, says: s && c.checkpoint_limits.on_stop && c.state === "running"
      ? `It checkpoints first (the agent writes its notes; up to ${s} s), then its session ends. It stays stopped until you start it.`
      : "Its session ends now. It stays stopped until you start it.",
      go: s && c.checkpoint_limits.on_stop && c.state === "running" ? [["Stop", {}], ["Stop now, no checkpoint", {now: true}]] : [["Stop", {now: true}]]};
  },
  restart: (c) => {
    const s = checkpointSeconds(c);
    return {ask: `Restart ${c.unit}?`, says: s && c.state === "running"
      ? `It checkpoints first (up to ${s} s); a fresh session then starts from the wakeup.`
      : "Its session ends now and a fresh one starts from the wakeup.",
      go: s && c.state === "running" ? [["Restart", {}], ["Restart now, no checkpoint", {now: true}]] : [["Restart", {now: true}]]};
  },
  checkpoint: (c) => ({ask: `Checkpoint ${c.unit} now?`,
    says: "The agent writes what it confirmed; agentd checks its notes, then a fresh session starts from the wakeup.",
    go: [["Checkpoint", {}]]}),
};

function button(label, what, cls, enabled, title) {
  return A.el("button", {class: cls || "", "data-action": what, disabled: !enabled, title: title || null, text: label,
    onclick: () => (ASK[what] ? ask(what) : run(what, {}))});
}

function ask(what) {
  const q = ASK[what](card);
  const box = document.getElementById("confirm");
  box.replaceChildren(A.el("div", {class: "ask"}, A.el("b", {text: q.ask + " "}), q.says),
    ...q.go.map(([label, body]) => A.el("button", {class: what === "stop" ? "danger" : "primary",
      "data-confirm": what, "data-now": body.now ? "yes" : "no", text: label, onclick: () => run(what, body)})),
    A.el("button", {"data-confirm": "cancel", text: "Cancel", onclick: () => {
      box.hidden = true; say(`${what} ${UNIT}: cancelled, nothing was done.`, "");
    }}));
  box.hidden = false;
  box.querySelector("button").focus();
}

function say(text, tone, offer) {
  const box = document.getElementById("action-result");
  box.className = "result" + (tone ? " " + tone : "");
  box.replaceChildren(A.el("span", {class: "text", text}),
    ...(offer ? [button("Reset failed", "reset-failed", "primary", true, `agentd reset-failed ${UNIT}`)] : []),
    A.el("button", {text: "✕", title: "dismiss", "aria-label": "dismiss", onclick: () => { box.hidden = true; }}));
  box.hidden = false;
}

function failedText(state, reason) {
  return `${UNIT} is ${state}: ${reason || "no reason recorded"}. Reset failed clears its start limit and starts it ` +
    `again (agentd reset-failed ${UNIT}); if it keeps failing, read its terminal and agentd logs ${UNIT} first.`;
}

const DONE = {start: "started", stop: "stopped", restart: "restarted", "reset-failed": "reset"};

// What came of an action, from the daemon's answer: a sentence, its tone, and whether to offer reset-failed.
function explain(what, status, data, body) {
  const r = data.result;
  if (status === 0 || status >= 500) return [`${what} ${UNIT}: ${data.error || "HTTP " + status}`, "bad"];
  if (status >= 400) return [`${what} ${UNIT} refused: ${data.error || "HTTP " + status}`, "bad"];
  if (status === 202) return [`${what} ${UNIT} goes on in the daemon${(what === "stop" || what === "restart") && !body.now ?
    " (a checkpoint first)" : ""}; this page follows it.`, ""];
  const warn = r && Array.isArray(r.warnings) && r.warnings.length ? " Note: " + r.warnings.join("; ") : "";
  if (what === "send") return [r && r.delivered === "now" ? `typed into ${UNIT} now.` :
    `queued for ${UNIT}: typed at its next turn end (position ${r && r.position}).`, "good"];
  if (what === "checkpoint") return [`checkpoint of ${UNIT} done: notes ${r && r.flush}, ${r && r.outcome}` +
    (r && typeof r.ratio === "number" ? `, wakeup ${A.pct(r.ratio, 1)} of the context before.` : "."), r && r.flush === "verified" ? "good" : ""];
  const state = r && typeof r === "object" ? r[UNIT] : null;
  if (state === "already running") return [`${UNIT} is already running: nothing to start.${warn}`, ""];
  if (FAILED.includes(state)) return [failedText(state, card && card.reason) + warn, "bad", true];
  if (what !== "stop" && state === "inactive") return [`${UNIT} did not start: ${(card && card.reason) || "see its state"}.${warn}`, "bad"];
  return [`${DONE[what] || what} ${UNIT}: it is ${state || "changed"} now.${warn}`, "good"];
}

async function run(what, body) {
  document.getElementById("confirm").hidden = true;
  for (const b of document.querySelectorAll(".actions button")) b.disabled = true;
  say(`${what} ${UNIT}…`, "");
  const {status, data} = await A.post(UNIT, what, body);
  const [text, tone, offer] = explain(what, status, data, body);
  say(text, tone, offer);
  // Followed from the daemon's answer on: a card at least as new as the answer (the unit's change count
  // when it was given) whose state is not the one the sentence named is news: a unit that fails a moment
  // after "started" is told, and a card computed before the action is not taken for its outcome.
  const at = data && data.unit ? data.unit : {state: card && card.state, version: card && card.version};
  const answered = data && data.result && typeof data.result === "object" ? data.result[UNIT] : null;
  const said = typeof answered === "string" && /^[a-z-]+$/.test(answered) ? answered : at.state;
  watching = status >= 200 && status < 300 ? {what, until: Date.now() + 30000, state: said, version: at.version || 0} : null;
  if (card) { renderHead(); follow(card); }
  return status >= 200 && status < 300 ? data : null;
}

// After an action, its result line follows the unit for a while: "stopped ... now: stopped", or a failure again.
function follow(c) {
  if (!watching || Date.now() > watching.until || !(c.version >= watching.version) || c.state === watching.state) return;
  watching.state = c.state;
  watching.version = c.version;
  if (FAILED.includes(c.state)) { say(failedText(c.state, c.reason), "bad", true); return; }
  const box = document.getElementById("action-result");
  const head = box.querySelector(".text").textContent.split(" — now:")[0];
  box.querySelector(".text").textContent = `${head} — now: ${c.display.label}`;
}

function renderHead() {
  const c = card;
  const d = c.display;
  const active = ACTIVE.includes(c.state);
  const failed = FAILED.includes(c.state);
  const box = document.getElementById("head");
  box.replaceChildren(
    A.glyph(d, "state-glyph"),
    A.el("div", {}, A.el("h1", {text: c.unit}),
      A.el("div", {class: "sub"}, A.el("span", {class: "tone-" + d.tone, id: "state-label", text: d.label}),
        " · " + [c.kind, c.module && "module " + c.module, c.host, c.description].filter(Boolean).join(" · "))),
    A.el("div", {class: "actions"},
      button("Checkpoint", "checkpoint", "", c.state === "running" && !!c.checkpoint_limits,
        c.checkpoint_limits ? null : "checkpoints are off for this unit ([checkpoint] enabled = false)"),
      button("Restart", "restart", "", active || c.state === "backoff" || failed || c.enabled),
      button("Stop", "stop", "danger", c.state !== "inactive" && !failed),
      failed ? button("Reset failed", "reset-failed", "primary", true, `agentd reset-failed ${c.unit}`) : null,
      button("Start", "start", failed ? "" : "primary", !active && c.state !== "stopping")));
  const alarms = document.getElementById("alarms");
  alarms.replaceChildren(...c.alarms.map((al) => A.el("div", {class: "alarm" + (al.kind === "blocked" ? " warn" : ""), "data-kind": al.kind},
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
    kv("crashes", c.crashes), kv("cycles", c.cycles), kv("restarts", c.restarts), kv("last exit", c.last_exit),
    kv("CPU / RSS", c.cpu_seconds !== null ? `${c.cpu_seconds.toFixed(1)} s / ${(c.rss_bytes / 1048576).toFixed(1)} MiB` : null),
    kv("queued sends", c.queued_sends), kv("violations", c.violations),
    kv("schedule", c.schedule ? Object.entries(c.schedule).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ") : null)));
}

function pill(text, cls) { return A.el("span", {class: "pill " + (cls || ""), text}); }

function renderCycles() {
  document.getElementById("cycle-count").textContent = cycles.length ? `${cycles.length} recorded` : "";
  if (!cycles.length) { document.getElementById("cycles").replaceChildren(A.el("div", {class: "muted", text: "no cycle yet"})); return; }
  const heads = ["when", "trigger", "tokens before", "wakeup", "ratio", "flush", "WIP commit", "recall", "outcome"];
  const cell = (i, attrs, ...kids) => A.el("td", {"data-label": heads[i], ...attrs}, ...kids);
  const rows = cycles.slice(-30).reverse().map((r) => A.el("tr", {"data-started": r.started || ""},
    cell(0, {text: A.time(r.t)}), cell(1, {text: r.trigger}),
    cell(2, {text: r.tokens_before !== null && r.tokens_before !== undefined ? A.tokens(r.tokens_before) + (r.window ? " / " + A.tokens(r.window) : "") : "–"}),
    cell(3, {text: A.tokens(r.wakeup_tokens)}), cell(4, {text: r.ratio !== null && r.ratio !== undefined ? A.pct(r.ratio, 1) : "–"}),
    cell(5, {}, pill(r.flush, r.flush === "verified" ? "good" : r.flush === "auto" ? "auto" : "")),
    cell(6, {class: "mono wip", text: A.wip(r.wip)}),
    cell(7, {class: "recall wrap" + (r.recall && r.recall.recall < 1 ? " tone-warn" : ""), text: A.recall(r.recall)}),
    cell(8, {class: "muted wrap", text: r.outcome})));
  document.getElementById("cycles").replaceChildren(A.el("div", {class: "scroll-x"}, A.el("table", {class: "stack"},
    A.el("thead", {}, A.el("tr", {}, ...heads.map((h) => A.el("th", {text: h})))),
    A.el("tbody", {}, rows))));
}

function renderChart() {
  // drawn at the width it is shown at (its text would be squeezed on a phone otherwise)
  const W = Math.max(280, Math.round(document.getElementById("chart").clientWidth || 640)), H = 210, L = 38, R = 10, T = 10, B = 24;
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
  const vh = ["when", "path", "rule", "action", "done"];
  document.getElementById("violations").replaceChildren(vio.length ? A.el("div", {class: "scroll-x"}, A.el("table", {class: "stack"},
    A.el("thead", {}, A.el("tr", {}, ...vh.map((h) => A.el("th", {text: h})))),
    A.el("tbody", {}, vio.map((v) => A.el("tr", {}, A.el("td", {"data-label": vh[0], text: A.time(v.t)}),
      A.el("td", {"data-label": vh[1], class: "mono", text: v.path}), A.el("td", {"data-label": vh[2], text: v.rule}),
      A.el("td", {"data-label": vh[3], text: v.action}), A.el("td", {"data-label": vh[4], class: "muted", text: v.done || "–"}))))))
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
    renderHead(); renderNow(); renderChart(); follow(c);
    // A new cycle was recorded: the files changed (history, wakeup, memory); read them once.
    if (JSON.stringify(c.last_cycle) !== lastCycleSeen) { lastCycleSeen = JSON.stringify(c.last_cycle); loadDetail(); }
  }
}

document.getElementById("send-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = document.getElementById("send-text");
  if (!input.value.trim()) return;
  const ok = await run("send", {text: input.value});
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
    fitTerm();
    note.textContent = `session ${s.session} · pid ${s.pid} · ${s.cols}×${s.rows}`;
  },
  term: (t) => term.write(t.data),
  dropped: (d) => term.write("\r\n\x1b[33m[" + d.note + "]\x1b[0m\r\n"),
});
loadDetail();
setInterval(() => { if (card) renderNow(); }, 1000);
