// agentd dashboard: shared helpers (plain JS, no build step, no framework).
"use strict";

const A = {};

// Build an element: A.el("div", {class: "x", text: "y"}, child, ...). Text is never parsed as HTML.
A.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "style") node.setAttribute("style", v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c.nodeType ? c : String(c));
  return node;
};

A.svg = function (tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
};

A.duration = function (s) {
  if (s === null || s === undefined || isNaN(s)) return "–";
  s = Math.max(0, Math.floor(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d" + String(Math.floor(s % 86400 / 3600)).padStart(2, "0") + "h";
};

A.tokens = function (n) {
  if (n === null || n === undefined) return "–";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + "k";
  return String(n);
};

A.pct = (r, digits) => r === null || r === undefined ? "–" : (r * 100).toFixed(digits === undefined ? 0 : digits) + "%";

A.time = function (epoch) {
  if (!epoch) return "–";
  const d = new Date(epoch * 1000);
  const clock = d.toLocaleTimeString(undefined, {hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false});
  if (d.toDateString() === new Date().toDateString()) return clock;
  return d.toLocaleDateString(undefined, {month: "short", day: "numeric"}) + " " + clock;
};

// Server clock minus browser clock: "seconds ago" stays right when the two differ.
A.skew = 0;
A.now = () => Date.now() / 1000 + A.skew;
A.setNow = (serverNow) => { if (serverNow) A.skew = serverNow - Date.now() / 1000; };

// The context gauge with its checkpoint_at and hard_limit marks.
A.gauge = function (ctx) {
  if (!ctx) {
    return A.el("div", {},
      A.el("div", {class: "gauge-row"}, A.el("span", {text: "context"}), A.el("span", {class: "muted", text: "no session"})),
      A.el("div", {class: "gauge none"}));
  }
  const r = Math.min(1, ctx.ratio || 0);
  const zone = r >= ctx.hard_limit ? "high" : r >= ctx.checkpoint_at ? "mid" : "";
  return A.el("div", {title: `checkpoint at ${A.pct(ctx.checkpoint_at)}, hard limit ${A.pct(ctx.hard_limit)}` +
                             (ctx.exact ? " (reported by the agent)" : " (estimated)")},
    A.el("div", {class: "gauge-row"},
      A.el("span", {}, "context ", A.el("b", {text: (ctx.exact ? "" : "~") + A.tokens(ctx.used)}), " / " + A.tokens(ctx.window)),
      A.el("b", {text: A.pct(ctx.ratio)})),
    A.el("div", {class: "gauge"},
      A.el("div", {class: "fill " + zone, style: `width:${(r * 100).toFixed(1)}%`}),
      A.el("div", {class: "mark ckpt", style: `left:calc(${(ctx.checkpoint_at * 100).toFixed(1)}% - 1px)`}),
      A.el("div", {class: "mark hard", style: `left:calc(${(ctx.hard_limit * 100).toFixed(1)}% - 1px)`})));
};

A.glyph = (d, extra) => A.el("span", {class: `glyph tone-${d.tone} ${extra || ""}`, title: d.label, text: d.glyph});

// One live stream per page (server-sent events); the browser reconnects by itself.
A.stream = function (url, handlers) {
  const live = document.getElementById("live");
  const es = new EventSource(url);
  const mark = (on) => { if (live) { live.className = "live " + (on ? "on" : "off"); live.lastChild.textContent = on ? "live" : "reconnecting"; } };
  es.onopen = () => mark(true);
  es.onerror = () => mark(false);
  for (const [name, fn] of Object.entries(handlers)) es.addEventListener(name, (e) => fn(JSON.parse(e.data)));
  return es;
};

A.toast = function (text, bad) {
  const t = A.el("div", {class: "toast" + (bad ? " bad" : ""), text});
  document.body.append(t);
  setTimeout(() => t.remove(), bad ? 7000 : 3500);
};

// A cycle record's probe recall as `agentd history` reads it: the figure, what was found of what was checked,
// and what the new session missed; "–" when the record has none.
A.recall = function (r) {
  if (!r || typeof r.recall !== "number") return "–";
  const of = typeof r.found === "number" && typeof r.probes === "number" ? ` (${r.found}/${r.probes})` : "";
  const missing = Array.isArray(r.missing) && r.missing.length ? ", missing: " + r.missing.map(String).join(", ") : "";
  return String(r.recall) + of + missing;
};
// The WIP commit that kept a session's uncommitted work, as `agentd history` shows it (12 characters).
A.wip = (commit) => commit ? String(commit).slice(0, 12) : "–";

// An action: a POST to the daemon (same origin; the cookie carries the token). {status, data}; never throws.
A.post = async function (unit, what, body) {
  try {
    const res = await fetch(`/api/units/${encodeURIComponent(unit)}/${what}`, {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {}), credentials: "same-origin"});
    let data = {};
    try { data = await res.json(); } catch (e) { /* empty body */ }
    return {status: res.status, data};
  } catch (e) {
    return {status: 0, data: {error: "the daemon did not answer (" + (e.message || e) + ")"}};
  }
};

A.header = function (daemon, host) {
  const meta = document.getElementById("meta-info");
  if (meta && daemon) meta.textContent = `${host || ""} · agentd ${daemon.version} · pid ${daemon.pid} · ${daemon.project_root}`;
};
