// The Plan page: the runs, the chosen one task by task, what to decide, the events. Text only through A.el.
"use strict";

const P = {name: new URLSearchParams(location.search).get("name"), plans: [], events: [], timer: null};

async function getJSON(url) {
  const res = await fetch(url, {credentials: "same-origin"});
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

function pick() {
  const box = document.getElementById("pick");
  box.replaceChildren(...P.plans.map((p) => A.el("a", {href: `/plans?name=${encodeURIComponent(p.plan)}`,
    class: p.plan === P.name ? "here" : ""}, p.plan, A.el("span", {class: `badge ${p.status}`, text: p.status}))));
}

function fact(k, v) { return [A.el("span", {class: "k", text: k}), A.el("span", {text: v || "–"})]; }

function summary(r) {
  const t = r.totals;
  const box = document.getElementById("summary");
  box.replaceChildren(
    A.el("div", {class: "plan-head"}, A.el("h1", {text: `plan ${r.plan}`}), A.el("span", {class: `badge ${r.status}`, text: r.status.replace("_", " ")})),
    r.description ? A.el("div", {class: "muted", text: r.description}) : null,
    A.el("div", {class: "plan-facts"},
      fact("started", `${r.started} (${r.trigger})`), fact("deadline", r.deadline), fact("ended", r.ended ? `${r.ended}: ${r.end_reason}` : "still running"),
      fact("branch", `${r.branch} (${(r.base || "").slice(0, 10)}..${(r.tip || "").slice(0, 10)})`),
      fact("report", r.report)),
    A.el("div", {class: "totals"},
      ...["done", "parked", "blocked", "pending"].map((s) => A.el("span", {class: "chip"}, A.el("b", {text: String(t[s])}), " " + s)),
      A.el("span", {class: "chip"}, A.el("b", {text: String(t.commits)}), " commits"),
      A.el("span", {class: "chip"}, A.el("b", {text: A.tokens(t.tokens)}), ` of ${A.tokens(t.token_budget)} tokens`),
      A.el("span", {class: "chip"}, A.el("b", {text: A.duration(t.seconds)}), " of work")));
}

function num(k, v) { return A.el("div", {}, A.el("div", {class: "k", text: k}), A.el("div", {class: "v", text: v})); }

function task(t) {
  const last = t.checks.length ? t.checks[t.checks.length - 1] : null;
  const failed = last && !last.passed ? last.results.find((x) => !x.ok) : null;
  const stat = t.diffstat || {};
  return A.el("article", {class: `task ${t.state}`, "data-task": t.id, "data-state": t.state},
    A.el("div", {class: "head"}, A.el("span", {class: `badge ${t.state}`, text: t.state}), A.el("span", {class: "id", text: t.id}),
      A.el("span", {class: "muted", text: `on ${t.unit}`}), t.after.length ? A.el("span", {class: "muted", text: `after ${t.after.join(", ")}`}) : null),
    A.el("div", {class: "ask", text: t.ask.split("\n")[0]}),
    A.el("div", {class: "nums"}, num("tries", `${t.attempts}/${t.max_attempts}`), num("time", A.duration(t.seconds)),
      num("tokens", A.tokens(t.tokens)), num("cycles", String(t.cycles))),
    t.commit ? A.el("div", {class: "line mono", text: `commit ${t.commit.slice(0, 12)} · ${stat.files || 0} file${stat.files === 1 ? "" : "s"} +${stat.insertions || 0} −${stat.deletions || 0}`}) : null,
    last ? A.el("div", {class: "line", text: `check ${last.attempt}: ${last.passed ? "passed" : "failed"} · ${last.results.map((x) => x.command).join(" · ")}`}) : null,
    failed && failed.tail ? A.el("pre", {class: "tail", text: failed.tail}) : null,
    t.reason && t.state !== "done" ? A.el("div", {class: "reason", text: t.reason}) : null,
    t.decide ? A.el("div", {class: "decide-one", text: t.decide}) : null,
    (t.violations || t.freezes.length) ? A.el("div", {class: "line muted", text: `${t.violations} violation(s), ${t.freezes.length} freeze(s)`}) : null);
}

function render(r) {
  summary(r);
  const decide = r.tasks.filter((t) => t.decide);
  document.getElementById("decide").hidden = !decide.length;
  document.getElementById("decide-list").replaceChildren(...decide.map((t) =>
    A.el("div", {class: "item"}, A.el("b", {text: `${t.id} `}), A.el("span", {class: "why", text: t.decide}))));
  document.getElementById("tasks").replaceChildren(...r.tasks.map(task));
}

function events() {
  const mine = P.events.filter((e) => !e.plan || e.plan === P.name).slice(-30).reverse();
  document.getElementById("events").replaceChildren(...(mine.length ? mine.map((e) => A.el("div", {class: "item"},
    A.el("div", {class: "when", text: `${e.time} · ${e.event}`}),
    A.el("div", {class: "why", text: [e.task || e.unit, e.reason].filter(Boolean).join(": ")}))) : [A.el("div", {class: "muted", text: "none yet"})]));
}

async function load() {
  try {
    P.plans = (await getJSON("/api/plans")).plans;
    if (!P.name && P.plans.length) P.name = (P.plans.find((p) => p.status !== "ended") || P.plans[P.plans.length - 1]).plan;
    pick();
    if (!P.name) {
      document.getElementById("summary").replaceChildren(A.el("div", {class: "empty", text: "No plan has run here yet: write plans/NAME.toml, then `agentd plan start NAME`."}));
      return;
    }
    render(await getJSON(`/api/plans/${encodeURIComponent(P.name)}`));
    events();
  } catch (err) {
    A.toast(String(err.message || err), true);
  }
}

function soon() { clearTimeout(P.timer); P.timer = setTimeout(load, 300); }

load();
A.stream("/api/plans/events", {
  recent: (list) => { P.events = list; events(); },
  event: (e) => { P.events.push(e); events(); soon(); },
  changed: (c) => { if (c.plan === P.name || !P.name) soon(); },
});
