// Cairn's review console: plain DOM calls to the REST API (docs/http.md). Text from the store is
// only ever set as textContent, never parsed as HTML.
"use strict";

const KINDS = ["decision", "convention", "preference", "fact", "task", "insight"];
const VERDICTS = [
  ["keep_both", "Keep both"], ["replace_older", "Newer replaces older"], ["replace_newer", "Older replaces newer"],
  ["merge", "Merge…"], ["forget_older", "Forget older"], ["forget_newer", "Forget newer"],
];
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const store = params.get("store");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function notice(message) { $("notice").textContent = message; }

async function api(method, path, body, query = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query)) {
    for (const one of [].concat(v)) if (one !== "" && one !== null && one !== undefined) url.searchParams.append(k, one);
  }
  if (store) url.searchParams.set("store", store);
  const headers = {};
  const token = sessionStorage.getItem("cairn-token");
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const data = await response.json();
  if (response.status === 401) $("token-form").hidden = false;
  if (!response.ok) throw new Error(`${data.error}: ${data.message}`);
  return data;
}

function day(iso) { return iso ? iso.slice(0, 10) : "—"; }

function memoryRow(m, extra = {}) {
  const actions = el("div", {class: "actions"},
    el("button", {type: "button", onclick: () => showHistory(m.id), "aria-label": `History of ${m.id}`}, "History"));
  if (m.status === "current") {
    actions.append(
      el("button", {type: "button", onclick: () => replaceMemory(m), "aria-label": `Replace ${m.id}`}, "Replace…"),
      el("button", {type: "button", onclick: () => forgetMemory(m), "aria-label": `Forget ${m.id}`}, "Forget"));
  }
  const meta = `${m.kind} · ${day(m.valid_from_iso)} · ${m.status}` + (m.tags.length ? " · #" + m.tags.join(" #") : "")
    + (extra.score !== undefined ? ` · score ${extra.score.toFixed(3)}` : "") + ` · ${m.id}`;
  return el("li", {class: "memory status-" + m.status, "data-id": m.id},
    el("div", {class: "meta", text: meta}), el("p", {class: "text", text: m.text ?? "[forgotten]"}), actions);
}

async function search(event) {
  if (event) event.preventDefault();
  const query = $("query").value.trim();
  const kind = $("kind").value;
  const tag = $("tag").value.trim();
  const asOf = $("as-of").value;
  const superseded = $("superseded").checked;
  const list = $("memories");
  try {
    let rows;
    if (query) {
      const body = {query, include_superseded: superseded};
      if (kind) body.kinds = [kind];
      if (tag) body.tags = [tag];
      if (asOf) body.as_of = asOf;
      rows = (await api("POST", "/v1/recall", body)).hits.map((h) => memoryRow(h.memory, {score: h.score}));
    } else {
      const data = await api("GET", "/v1/memories", undefined,
        {kind, tag, as_of: asOf, include_superseded: superseded ? "true" : ""});
      rows = data.memories.map((m) => memoryRow(m));
    }
    list.replaceChildren(...rows);
    notice(rows.length ? "" : "No memories match.");
  } catch (err) { notice(err.message); }
}

async function showHistory(id) {
  try {
    const {chain} = await api("GET", `/v1/memories/${encodeURIComponent(id)}/history`);
    $("history-caption").textContent = `Versions of ${id}, oldest first: valid time (when it held) and transaction time (when the store believed it).`;
    $("history").tBodies[0].replaceChildren(...chain.map((m) => el("tr", {"data-id": m.id},
      el("td", {text: m.id}), el("td", {text: m.status}), el("td", {text: m.valid_from_iso ?? "—"}),
      el("td", {text: m.valid_to_iso ?? "—"}), el("td", {text: m.recorded_at_iso ?? "—"}),
      el("td", {text: m.retired_at_iso ?? "—"}), el("td", {text: m.text ?? "[forgotten]"}))));
    $("history-section").hidden = false;
    $("history-title").focus();
  } catch (err) { notice(err.message); }
}

async function replaceMemory(m) {
  const text = prompt(`Replace memory ${m.id} with:`, m.text);
  if (!text || text === m.text) return;
  try {
    const result = await api("POST", `/v1/memories/${encodeURIComponent(m.id)}/replace`, {text});
    await search();
    notice(`Replaced ${m.id} by ${result.memory.id}.`);
  } catch (err) { notice(err.message); }
}

async function forgetMemory(m) {
  if (!confirm(`Forget memory ${m.id} for good? Its text cannot be recovered.`)) return;
  try {
    await api("DELETE", `/v1/memories/${encodeURIComponent(m.id)}`);
    await search();
    notice(`Forgot ${m.id}.`);
  } catch (err) { notice(err.message); }
}

function side(label, m) {
  return el("div", {}, el("div", {class: "meta", text: `${label} · ${m.date} · ${m.id}`}), el("p", {class: "text", text: m.text}));
}

async function loadReview() {
  const list = $("review");
  try {
    const data = await api("GET", "/v1/review", undefined, {limit: 20});
    list.replaceChildren(...data.pairs.map((p) => {
      const buttons = VERDICTS.map(([verdict, label]) => el("button", {
        type: "button", "data-verdict": verdict, onclick: () => decide(p, verdict)}, label));
      return el("li", {class: "pair-row", "data-older": p.older.id, "data-newer": p.newer.id},
        el("div", {class: "meta", text: `${p.kind} · proposed: ${p.verdict} · ${p.reason}`
          + (p.cosine !== undefined ? ` · cosine ${p.cosine}` : "")}),
        el("div", {class: "pair"}, side("older", p.older), side("newer", p.newer)),
        el("div", {class: "actions", role: "group", "aria-label": "Verdict"}, ...buttons));
    }));
    notice(data.pairs.length ? "" : `Nothing to review (${data.scanned} memories scanned).`);
  } catch (err) { notice(err.message); }
}

async function decide(pair, verdict) {
  const body = {older_id: pair.older.id, newer_id: pair.newer.id, verdict};
  if (verdict === "merge") {
    const text = prompt("Merged statement:", `${pair.older.text} ${pair.newer.text}`);
    if (!text) return;
    body.text = text;
  } else if (verdict.startsWith("forget") && !confirm("Forget that memory for good?")) {
    return;
  }
  try {
    const result = await api("POST", "/v1/review/decide", body);
    await loadReview();
    await search();
    notice(`Verdict ${result.verdict} recorded.`);
  } catch (err) { notice(err.message); }
}

async function searchSessions(event) {
  event.preventDefault();
  const query = $("sessions-query").value.trim();
  if (!query) return;
  try {
    const {hits} = await api("POST", "/v1/sessions/search", {query});
    $("sessions").replaceChildren(...hits.map((h) => el("li", {},
      el("div", {class: "meta", text: `${h.turn.role} · ${h.turn.at_iso ?? ""} · session ${h.turn.session_id} #${h.turn.position}`}),
      el("p", {class: "text", text: h.turn.text}))));
    notice(hits.length ? "" : "No turns match.");
  } catch (err) { notice(err.message); }
}

async function start() {
  for (const k of KINDS) $("kind").append(el("option", {value: k, text: k}));
  $("search-form").addEventListener("submit", search);
  $("sessions-form").addEventListener("submit", searchSessions);
  $("review-load").addEventListener("click", loadReview);
  $("history-title").setAttribute("tabindex", "-1");
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("cairn-token", $("token").value.trim());
    $("token-form").hidden = true;
    start2();
  });
  await start2();
}

async function start2() {
  try {
    const status = await api("GET", "/v1/status");
    $("store-line").textContent = `store ${status.store}: ${status.counts.current} current memories`
      + (status.keyword_only ? " (keyword-only recall)" : "");
    await search();
  } catch (err) { $("store-line").textContent = ""; notice(err.message); }
}

start();
