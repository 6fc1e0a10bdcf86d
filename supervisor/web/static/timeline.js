// The timeline: every module's decisions and the global log, merged by time, next to cycles and violations.
"use strict";

let items = [];
const seen = new Map();  // card id -> its last cycle and violation count
let reloading = null;

function toItems(data) {
  const out = [];
  for (const d of data.decisions) out.push({kind: "decision", t: d.t, module: d.module, tags: d.tags, src: d.module,
    title: d.decision, detail: "why: " + d.why + (d.files.length ? " · files: " + d.files.join(", ") : "")});
  for (const c of data.cycles) out.push({kind: "cycle", t: c.t, module: null, unit: c.unit, tags: [], src: c.unit,
    title: `${c.trigger}: ${A.tokens(c.tokens_before)} → wakeup ${A.tokens(c.wakeup_tokens)}` + (c.ratio ? ` (${A.pct(c.ratio, 1)})` : ""),
    detail: `flush ${c.flush} · ${c.outcome}` + (c.wip ? ` · WIP ${A.wip(c.wip)}` : "") +
      (c.recall && typeof c.recall.recall === "number" ? ` · recall ${A.recall(c.recall)}` : "")});
  for (const v of data.violations) out.push({kind: "violation", t: v.t, module: null, unit: v.unit, tags: [], src: v.unit,
    title: `${v.path}: ${v.rule}`, detail: `${v.action}${v.done ? " · " + v.done : ""}`});
  out.sort((a, b) => (b.t || 0) - (a.t || 0));
  return out;
}

function fillSelect(id, values) {
  const sel = document.getElementById(id);
  const keep = sel.value;
  sel.replaceChildren(sel.firstElementChild, ...values.map((v) => A.el("option", {value: v, text: v})));
  sel.value = keep;
}

function render() {
  const mod = document.getElementById("f-module").value;
  const tag = document.getElementById("f-tag").value;
  const text = document.getElementById("f-text").value.toLowerCase();
  const show = {decision: document.getElementById("f-decisions").checked, cycle: document.getElementById("f-cycles").checked,
    violation: document.getElementById("f-violations").checked};
  const shown = items.filter((i) => show[i.kind] && (!mod || i.module === mod || (i.kind !== "decision" && i.src === mod))
    && (!tag || i.tags.includes(tag)) && (!text || (i.title + " " + i.detail).toLowerCase().includes(text)));
  document.getElementById("f-count").textContent = `${shown.length} of ${items.length}`;
  document.getElementById("tl").replaceChildren(...shown.slice(0, 600).map((i) => A.el("div", {class: "tl-row " + i.kind},
    A.el("span", {class: "t", text: A.time(i.t)}),
    A.el("span", {}, A.el("span", {class: "pill " + (i.kind === "violation" ? "bad" : i.kind === "cycle" ? "auto" : "tag"), text: i.kind})),
    A.el("span", {class: "src", text: i.src || "global"}),
    A.el("span", {}, A.el("div", {text: i.title}), A.el("div", {class: "muted", text: i.detail}),
      i.tags.length ? A.el("div", {}, ...i.tags.map((t) => A.el("span", {class: "pill tag", style: "margin-right:4px", text: t}))) : null))));
}

async function load() {
  const res = await fetch("/api/timeline", {credentials: "same-origin"});
  if (!res.ok) { A.toast("cannot load the timeline: " + res.status, true); return; }
  const data = await res.json();
  items = toItems(data);
  fillSelect("f-module", [...new Set(data.decisions.map((d) => d.module).concat(data.units))].sort());
  fillSelect("f-tag", [...new Set(data.decisions.flatMap((d) => d.tags))].sort());
  render();
}

for (const id of ["f-module", "f-tag", "f-decisions", "f-cycles", "f-violations", "f-text"]) {
  document.getElementById(id).addEventListener("input", render);
}
// A cycle or a violation changes a unit's card: read the files again then, not on a timer.
function note(cards) {
  let moved = false;
  for (const c of cards) {
    const mark = JSON.stringify([c.last_cycle && c.last_cycle.started, c.violations]);
    if (seen.has(c.id) && seen.get(c.id) !== mark) moved = true;
    seen.set(c.id, mark);
  }
  if (moved && !reloading) reloading = setTimeout(() => { reloading = null; load(); }, 300);
}
A.stream("/api/events", {
  overview: (ov) => { A.header(ov.daemon, ov.host); note(ov.cards); },
  units: (msg) => note(msg.cards),
});
document.getElementById("f-count").addEventListener("click", load);
load();
