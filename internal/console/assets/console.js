// The reconciler console: a read-only view of this node's JSON API.
//
// Rules this file keeps (docs/console.md):
//   - every value from the API is put into the page with textContent or
//     createTextNode (el() below), never as markup: names come from pull
//     requests and samples from live traffic;
//   - data calls are same-origin fetches with the token as a bearer header,
//     no cookies, no Content-Type (the console only reads);
//   - it polls with If-None-Match, so an unchanged resource costs a 304;
//   - it is a classic deferred script, not a module: a browser fetches a
//     module in CORS mode with an Origin header, which the API refuses
//     unless [api] allowed_origins lists the node itself.

(() => {
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "reconciler.console.token";

// el builds an element; children are nodes or strings (made text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = String(v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

// link makes an in-console link; the hash path is built from encoded parts.
function link(text, ...parts) {
  return el("a", { href: "#/" + parts.map(encodeURIComponent).join("/") }, text);
}

// safeURL returns u when it is an http(s) URL, so that a javascript: URL from
// a forge record can never become a link.
function safeURL(u) {
  try {
    const p = new URL(String(u));
    return p.protocol === "https:" || p.protocol === "http:" ? p.href : null;
  } catch {
    return null;
  }
}

function table(head, rows, opts = {}) {
  const t = el("table", { "data-table": opts.name });
  if (opts.caption) t.append(el("caption", { class: "note" }, opts.caption));
  t.append(el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col", class: /^#|count|evaluated|unchanged/i.test(h) ? "num" : null }, h)))));
  const body = el("tbody");
  for (const r of rows) body.append(el("tr", {}, r.map((c) => (c instanceof Node && c.tagName === "TD" ? c : el("td", {}, c)))));
  if (rows.length === 0) body.append(el("tr", {}, el("td", { colspan: head.length, class: "muted" }, "none")));
  t.append(body);
  return t;
}

function num(v, key) {
  return el("td", { class: "num", "data-count": key }, String(v ?? 0));
}

function badge(text, kind) {
  return el("span", { class: "badge " + kind }, text);
}

function when(s) {
  if (!s || s.startsWith("0001-")) return "";
  const d = new Date(s);
  return isNaN(d) ? String(s) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function short(sha) {
  return sha ? String(sha).slice(0, 12) : "";
}

function facts(pairs) {
  const dl = el("dl", { class: "facts" });
  for (const [k, v, key] of pairs) dl.append(el("dt", {}, k), el("dd", { "data-fact": key }, v ?? ""));
  return dl;
}

// --- API access -----------------------------------------------------------

class AuthError extends Error {}

const cache = new Map(); // path -> {etag, data}

// api GETs path, answering from the cache on 304. changed says whether the
// data differs from the last answer, so a poll re-renders only on change.
async function api(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const prev = cache.get(path);
  if (prev && prev.etag) headers["If-None-Match"] = prev.etag;
  const res = await fetch(path, { headers, cache: "no-store", credentials: "omit", redirect: "error" });
  if (res.status === 304 && prev) return { data: prev.data, changed: false };
  if (res.status === 401 || res.status === 403) {
    const body = await res.json().catch(() => ({}));
    throw new AuthError(body?.error?.message || res.statusText);
  }
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(`${path}: HTTP ${res.status} ${body?.error?.message || ""}`);
  }
  const data = await res.json();
  cache.set(path, { etag: res.headers.get("ETag"), data });
  return { data, changed: true };
}

// load fetches several paths; changed is true when any answer changed.
async function load(paths) {
  const out = await Promise.all(paths.map(api));
  return { data: out.map((o) => o.data), changed: out.some((o) => o.changed) };
}

// --- views ----------------------------------------------------------------

const views = {
  "": overview,
  generations: generations,
  policies: policyView,
  experiments: experimentView,
};

function conditionCell(conds) {
  const td = el("td");
  for (const c of conds || []) {
    const kind = c.status === "True" ? (c.type === "Invalid" || c.type === "PullError" ? "bad" : "ok") : "warn";
    const label = c.type + (c.nodeId ? " " + c.nodeId : "") + (c.generation ? " g" + c.generation : "");
    td.append(badge(label, kind), " ");
    if (c.message) td.append(el("div", { class: "muted" }, c.message));
  }
  return td;
}

function nodeRows(nodes, leader) {
  return (nodes || []).map((n) => [
    el("span", { class: "mono", "data-node": n.id }, n.id),
    n.state || "",
    n.reachable ? badge("reachable", "ok") : badge("unreachable", "bad"),
    [n.group || "", n.subgroup ? " / " + n.subgroup : ""].join(""),
    num(n.generation, "node-generation"),
    n.id === leader ? badge("leader", "ok") : n.voter === false ? "non-voter" : "follower",
    n.httpAddr || "",
  ]);
}

function experimentRows(exps) {
  return exps.map((x) => {
    const [, policy, , id] = x.name.split("/");
    const src = x.source || {};
    const from = src.kind === "pull_request" ? "PR #" + src.number : src.kind === "branch" ? "branch " + src.branch : src.kind || "";
    return [link(id, "experiments", policy, id), policy, from, x.state || "(not started)",
      x.valid === false ? badge("invalid", "bad") : x.conflict ? badge("conflict", "warn") : x.previewed ? badge("previewed", "ok") : badge("not previewed", "warn")];
  });
}

// unchanged reports whether what a page shows is what it showed last time:
// /v1/status carries heartbeat times and changes every few seconds, and a
// redraw for nothing would move the keyboard focus.
const shown = new Map();
function unchanged(key, value) {
  const sig = JSON.stringify(value);
  if (shown.get(key) === sig) return true;
  shown.set(key, sig);
  return false;
}

async function overview() {
  const { data: [st], changed } = await load(["/v1/status"]);
  const visible = { ...st, nodes: (st.nodes || []).map(({ lastHeartbeat, appliedIndex, status, ...n }) => n), statistics: undefined };
  if (!changed || (unchanged("overview", visible) && document.querySelector("#view [data-table=nodes]"))) return null;
  const exps = (st.experiments || []).filter((x) => x.kind === "experiment");
  const parts = Object.entries(st.parts || {}).map(([k, v]) => [k, badge(v.state, v.state === "OK" ? "ok" : "bad"), v.message || ""]);
  return [
    el("h1", {}, "Overview"),
    facts([
      ["Active generation", el("a", { href: "#/generations", "data-active-generation": st.activeGeneration }, String(st.activeGeneration)), "active-generation"],
      ["Commit", el("span", { class: "mono" }, st.commit || st.source?.commit || ""), "commit"],
      ["Leader", st.leader || "(none known)", "leader"],
      ["This node", `${st.nodeId} (${st.raftState}, serving generation ${st.servedGeneration ?? ""})`, "node"],
      ["Source", st.source?.error ? el("span", { class: "bad" }, st.source.error) : "following " + short(st.source?.commit), "source"],
    ]),
    el("h2", {}, "Nodes"),
    table(["Node", "State", "Health", "Group", "Generation", "Role", "Address"], nodeRows(st.nodes, st.leader), { name: "nodes" }),
    el("h2", {}, "Policies"),
    table(["Policy", "Etag", "Conditions"], (st.policies || []).map((p) => {
      const id = p.name.replace(/^policies\//, "");
      return [link(id, "policies", id), el("span", { class: "mono" }, p.etag), conditionCell(p.conditions)];
    }), { name: "policies" }),
    el("h2", {}, "Experiments"),
    table(["Experiment", "Policy", "Source", "State", "Preview"], experimentRows(exps), { name: "experiments" }),
    el("h2", {}, "Node parts"),
    table(["Part", "State", "Message"], parts, { name: "parts" }),
  ];
}

async function generations() {
  const { data: [g], changed } = await load(["/v1/generations"]);
  if (!changed) return null;
  const gens = [...(g.generations || [])].sort((a, b) => b.generation - a.generation);
  const state = (s) => badge(s, s === "ACTIVE" ? "ok" : s === "INVALID" ? "bad" : "warn");
  return [
    el("h1", {}, "Generation history"),
    table(["#", "State", "Commit", "Author", "Created", "Activated", "Ready nodes", "Notes"], gens.map((x) => [
      num(x.generation, "generation"), state(x.state), el("span", { class: "mono" }, short(x.commit)),
      // Author and requester come from commits anyone may push: text nodes only.
      el("span", { "data-author": "" }, x.author || ""),
      when(x.createTime), when(x.activateTime), (x.readyNodes || []).join(", "),
      el("span", { "data-notes": "" }, [rollbackLine(x), ...(x.errors || [])].filter(Boolean).join("; ")),
    ]), { name: "generations" }),
  ];
}

// rollbackLine says which generation a revert restored and who asked.
function rollbackLine(x) {
  if (!x.rollbackOf) return "";
  return `rollback to generation ${x.rollbackOf}` + (x.requestedBy ? `, asked by ${x.requestedBy}` : "");
}

function ruleRows(rules) {
  // The API lists rules in evaluation order; sort again so the page never
  // depends on it: priority, ties by name.
  const sorted = [...(rules || [])].sort((a, b) => a.priority - b.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return sorted.map((r, i) => [num(i + 1, "order"), num(r.priority, "priority"), el("span", { "data-rule": "" }, r.name),
    badge(r.action, r.action === "deny" ? "bad" : "ok"), el("pre", {}, r.match || ""), r.description || ""]);
}

async function policyView(name) {
  const base = "/v1/policies/" + encodeURIComponent(name);
  const { data: [p, ex], changed } = await load([base, base + "/experiments"]);
  if (!changed) return null;
  const lists = (p.lists || []).map((l) => [l.name, l.kind || "", num(l.entries, "entries"), el("span", { class: "mono" }, l.file || ""), el("span", { class: "mono" }, l.etag || "")]);
  const exps = (ex.experiments || []).map((x) => ({ ...x, state: x.previewMetadata?.state }));
  return [
    el("h1", {}, "Policy ", el("span", { class: "mono" }, name)),
    facts([
      ["Description", p.description || ""], ["Default action", p.default_action], ["On error", p.on_error || ""],
      ["Group", p.group || "default"], ["Generation", String(p.generation)], ["Commit", el("span", { class: "mono" }, p.commit || "")],
      ["Etag", el("span", { class: "mono" }, p.etag || "")],
    ]),
    el("h2", {}, "Rules in evaluation order"),
    table(["#", "Priority", "Name", "Action", "Match", "Description"], ruleRows(p.rules), { name: "rules" }),
    el("h2", {}, "Lists"),
    table(["List", "Kind", "Entries", "File", "Etag"], lists, { name: "lists" }),
    el("h2", {}, "Experiments on this policy"),
    table(["Experiment", "Policy", "Source", "State", "Preview"], experimentRows(exps), { name: "experiments" }),
  ];
}

// minutes turns the experiment's series (the node's last hour, merged
// across nodes: docs/api.md) into rows of one minute each.
function minutes(series) {
  if (!series || !Array.isArray(series.evaluated)) return [];
  const start = Date.parse(series.start) / 1000;
  const step = series.stepSeconds || 60;
  return series.evaluated.map((ev, i) => {
    const changed = series.changed?.[i] ?? 0, a2d = series.allowToDeny?.[i] ?? 0, d2a = series.denyToAllow?.[i] ?? 0;
    return { t: start + i * step, ev, changed, a2d, d2a, rc: Math.max(0, changed - a2d - d2a) };
  });
}

function chart(rows) {
  const box = el("figure", { class: "chart", "aria-label": "changed decisions per minute, last hour", "data-minutes": rows.length });
  if (rows.length === 0) {
    box.append(el("figcaption", { class: "note" }, "No live traffic reached this experiment in the last hour."));
    return box;
  }
  if (typeof window.uPlot === "function") {
    // The series starts at the hour's first minute with traffic; the chart
    // always spans the whole hour, the minutes before that being zeros.
    const step = rows.length > 1 ? rows[1].t - rows[0].t : 60;
    const pad = Array.from({ length: Math.max(0, 60 - rows.length) }, (_, i) => ({ t: rows[0].t - (60 - rows.length - i) * step, a2d: 0, d2a: 0, rc: 0 }));
    const all = [...pad, ...rows];
    const data = [all.map((p) => p.t), all.map((p) => p.a2d), all.map((p) => p.d2a), all.map((p) => p.rc)];
    const opts = {
      width: Math.min(900, (document.getElementById("main")?.clientWidth || 900) - 40), height: 240,
      title: "Changed decisions per minute, last hour (all nodes)",
      series: [{},
        { label: "allow → deny", stroke: "#a40e26", width: 2 },
        { label: "deny → allow", stroke: "#116329", width: 2, dash: [8, 4] },
        { label: "rule changed", stroke: "#0b5cad", width: 2, dash: [2, 3] }],
    };
    new window.uPlot(opts, data, box);
  }
  box.append(el("figcaption", { class: "note" },
    "Solid: allow → deny; long dashes: deny → allow; dots: same decision, other rule. One point per minute, counted by the nodes."));
  // The same numbers as a table, for keyboards and screen readers.
  const t = table(["Minute (UTC)", "Evaluated", "Changed", "Allow → deny", "Deny → allow"],
    rows.map((p) => [when(new Date(p.t * 1000).toISOString()), num(p.ev, "minute-evaluated"), num(p.changed, "minute-changed"),
      num(p.a2d, "minute-allowToDeny"), num(p.d2a, "minute-denyToAllow")]), { name: "minutes" });
  // A redraw (the counts moved) keeps the table open if the reader opened it.
  const open = document.querySelector("#view .chart details")?.open;
  box.append(el("details", { open: open ? "" : null }, el("summary", {}, "The minutes as a table"), t));
  return box;
}

const MAX_SAMPLES = 20; // the API keeps a bounded set; the page shows the first ones

function sampleRows(samples) {
  return (samples || []).slice(0, MAX_SAMPLES).map((s) => [when(s.time), `${s.liveDecision} (${s.liveRule || "default"})`,
    `${s.experimentDecision} (${s.experimentRule || "default"})`, el("code", { class: "sample" }, JSON.stringify(s.request))]);
}

function sourceFacts(src) {
  const url = safeURL(src.url);
  const label = src.kind === "pull_request" ? `pull request #${src.number}` : src.kind === "branch" ? "branch" : src.kind || "";
  return [
    ["Source", [label, " ", src.branch ? el("span", { class: "mono", "data-branch": "" }, src.branch) : "",
      url ? [" ", el("a", { href: url, rel: "noopener noreferrer" }, "open")] : ""], "source"],
    ["Head commit", el("span", { class: "mono" }, short(src.headCommit)), "head"],
  ];
}

function verdict(sum) {
  if (!sum) return [el("p", { class: "muted" }, "No thresholds configured for this policy ([preview.thresholds]).")];
  const text = typeof sum === "string" ? sum : JSON.stringify(sum, null, 1);
  return [el("pre", { "data-verdict": "" }, text)];
}

function countRows(s) {
  const keys = ["evaluated", "unchanged", "allowToDeny", "denyToAllow", "ruleChanged", "errors", "dropped"];
  return keys.map((k) => [k, num(s?.[k], k), num(s?.replayed?.[k], "replayed-" + k)]);
}

async function experimentView(policy, id) {
  const path = `/v1/policies/${encodeURIComponent(policy)}/experiments/${encodeURIComponent(id)}?view=FULL`;
  const { data: [x], changed } = await load([path]);
  if (!changed) return null;
  const s = x.stats || {};
  const tr = (s.transitions || []).map((t) => [el("span", { "data-rule": "" }, t.liveRule || "(default)"), t.liveDecision,
    el("span", { "data-rule": "" }, t.experimentRule || "(default)"), t.experimentDecision, num(t.count, "transition")]);
  return [
    el("h1", {}, "Experiment ", el("span", { class: "mono" }, id), " on ", link(policy, "policies", policy)),
    facts([
      ...sourceFacts(x.source || {}),
      ["State", x.previewMetadata?.state || "(not started)", "state"],
      ["Previewed", x.previewed ? "yes" : "no (over a cap, or invalid)", "previewed"],
      ["Started", when(x.previewMetadata?.startTime)], ["Etag", el("span", { class: "mono" }, x.etag)],
    ]),
    el("h2", {}, "Counts"),
    table(["Outcome", "Live traffic", "Replayed"], countRows(s), { name: "counts" }),
    el("h2", {}, "Changed decisions over time"),
    chart(minutes(s.series)),
    el("h2", {}, "Transitions by rule"),
    table(["Live rule", "Live", "Experiment rule", "Experiment", "Count"], tr, { name: "transitions" }),
    el("h2", {}, "Samples (redacted by the node)"),
    table(["Time", "Live", "Experiment", "Request"], sampleRows(s.samples), { name: "samples" }),
    el("h2", {}, "Thresholds and verdict"),
    ...verdict(x.summary),
    el("h2", {}, "Previewed rules in evaluation order"),
    table(["#", "Priority", "Name", "Action", "Match", "Description"], ruleRows(x.policy?.rules), { name: "preview-rules" }),
  ];
}

// --- routing and polling -----------------------------------------------------

function decodePart(p) {
  try {
    return decodeURIComponent(p);
  } catch {
    return p; // a stray "%" in a typed URL must not stop the polling
  }
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodePart);
  const view = Object.hasOwn(views, parts[0] || "") ? views[parts[0] || ""] : null; // not "constructor" and kin
  return view ? { view, args: parts.slice(1), key: location.hash } : { view: overview, args: [], key: "" };
}

let current = "";
let timer = 0;
let seq = 0; // the latest tick; an older one that finishes late is dropped

async function tick() {
  clearTimeout(timer);
  const my = ++seq;
  const r = route();
  const fresh = r.key !== current;
  if (fresh) {
    cache.clear();
    shown.clear();
  }
  try {
    const nodes = await r.view(...r.args);
    if (my !== seq) return;
    showLogin(false);
    if (nodes) {
      const view = document.getElementById("view");
      const focused = view.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
      view.replaceChildren(...nodes);
      if (focused) view.querySelector(`a[href="${CSS.escape(focused)}"]`)?.focus(); // keep the keyboard's place
      current = r.key;
      // When the page last drew, in ms since it loaded: what the load-time
      // benchmark (test/console) reads.
      view.dataset.renderedMs = String(Math.round(performance.now()));
    }
    document.getElementById("live").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    if (my !== seq) return;
    if (e instanceof AuthError) {
      document.getElementById("view").replaceChildren();
      current = "";
      showLogin(true, e.message);
      return; // no polling until a token is given
    }
    document.getElementById("live").textContent = "error: " + e.message;
    if (fresh) document.getElementById("view").replaceChildren(el("p", { class: "error" }, e.message));
  }
  timer = setTimeout(tick, POLL_MS);
}

function showLogin(on, reason) {
  document.getElementById("login").hidden = !on;
  document.getElementById("login-reason").textContent = on ? reason || "" : "";
  document.getElementById("signout").hidden = on || !sessionStorage.getItem(TOKEN_KEY);
  if (on) document.getElementById("token").focus();
}

document.getElementById("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token");
  sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  input.value = "";
  current = "";
  tick();
});
document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  cache.clear();
  current = "";
  tick();
});
window.addEventListener("hashchange", () => {
  current = "";
  tick();
  document.getElementById("main").focus();
});
tick();
})();
