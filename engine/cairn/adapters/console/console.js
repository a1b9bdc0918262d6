// Cairn's review console: plain DOM calls to the REST API (docs/http.md). Text from the store is
// only ever set as textContent, never parsed as HTML.
"use strict";

const KINDS = ["decision", "convention", "preference", "fact", "task", "insight"];
// The review queue's verdicts (review.decide): approve what the proposal says (the memory chosen to
// stay, with the tags chosen), reject (nothing changes), or edit then approve with the user's text.
const VERDICTS = [["approve", "Approve"], ["reject", "Reject"], ["edit", "Edit…"]];
// Proposals where one of several memories stays (review.MULTI_TYPES): the user chooses which, and its tags.
const MULTI = ["duplicate", "near_duplicate", "conflict", "summarise"];
// The first screen's newest current memories: what the store learnt lately, at a glance; the search
// below lists more (config list.limit).
const LATEST = 10;
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
    + (extra.score !== undefined ? ` · score ${extra.score.toFixed(3)}` : "")
    + (m.usage ? ` · injected ${m.usage.injected}×, cited ${m.usage.cited}×` : "") + ` · ${m.id}`;
  return el("li", {class: "memory status-" + m.status, "data-id": m.id},
    el("div", {class: "meta", text: meta}), el("p", {class: "text", text: m.text ?? "[forgotten]"}), actions);
}

// The first screen: the newest current memories (kind, day recorded, text) and how many review
// proposals wait, from GET /v1/memories and GET /v1/maintain/status.
async function loadHome() {
  try {
    const [{memories}, status] = await Promise.all([
      api("GET", "/v1/memories", undefined, {limit: LATEST}), api("GET", "/v1/maintain/status")]);
    $("latest").replaceChildren(...(memories.length ? memories.map((m) => el("li", {class: "memory", "data-id": m.id},
      el("span", {class: "kind", text: m.kind}),
      el("time", {datetime: m.recorded_at_iso ?? "", text: day(m.recorded_at_iso)}),
      el("span", {class: "text", text: m.text ?? "[forgotten]"}),
      el("button", {type: "button", onclick: () => showHistory(m.id), "aria-label": `History of ${m.id}`}, "History")))
      : [el("li", {class: "empty", text: "No memories yet: they arrive as you work with Claude Code, or with cairn remember."})]));
    showPending(status.pending);
  } catch (err) { notice(err.message); }
}

function showPending(n) {
  $("pending-line").textContent = n === 0 ? "No review proposals wait."
    : `${n} review proposal${n === 1 ? "" : "s"} wait${n === 1 ? "s" : ""} for your verdict.`;
  $("review-open").hidden = n === 0;
  $("waiting").classList.toggle("has-pending", n > 0);
}

async function openReview() {
  await loadReview();
  $("review-title").scrollIntoView();
  $("review-title").focus();
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
    await Promise.all([search(), loadHome()]);
    notice(`Replaced ${m.id} by ${result.memory.id}.`);
  } catch (err) { notice(err.message); }
}

async function forgetMemory(m) {
  if (!confirm(`Forget memory ${m.id} for good? Its text cannot be recovered.`)) return;
  try {
    await api("DELETE", `/v1/memories/${encodeURIComponent(m.id)}`);
    await Promise.all([search(), loadHome()]);
    notice(`Forgot ${m.id}.`);
  } catch (err) { notice(err.message); }
}

function source(m, index, proposal) {
  if (m.missing) return el("div", {class: "source"}, el("div", {class: "meta", text: `${m.id} · no longer in the store`}));
  const role = proposal.sources.length === 2 && ["duplicate", "near_duplicate", "conflict"].includes(proposal.type)
    ? (index === 0 ? "older" : "newer") : `source ${index + 1}`;
  const tags = m.tags && m.tags.length ? ` · #${m.tags.join(" #")}` : "";
  const meta = `${role} · ${m.kind} · ${day(m.valid_from_iso)} · ${m.status}` + (m.cold ? " · cold" : "") + tags
    + ` · ${m.id}`;
  const parts = [el("div", {class: "meta", text: meta}), el("p", {class: "text", text: m.text ?? "[forgotten]"})];
  if (MULTI.includes(proposal.type) && proposal.sources.length > 1) {
    const radio = el("input", {type: "radio", name: `keep-${proposal.id}`, value: m.id,
                               "aria-label": `keep ${m.id}`});
    radio.checked = m.id === defaultKept(proposal);
    parts.push(el("label", {class: "keep"}, radio, " this one stays"));
  }
  return el("div", {class: "source", "data-id": m.id}, ...parts);
}

function defaultKept(p) {
  const ids = p.sources.map((s) => s.id);
  return p.type === "conflict" ? ids[ids.length - 1] : ids[0];
}

// The tags the memory that stays may keep: every source's, checked by default as review.decide
// defaults (a conflict: the kept memory's; restatements: all).
function tagChoices(p, sources) {
  const all = [...new Set(sources.flatMap((m) => m.tags ?? []))].sort();
  if (!MULTI.includes(p.type) || !all.length) return [];
  const kept = sources.find((m) => m.id === defaultKept(p));
  return [el("fieldset", {class: "tags", "aria-label": `Tags kept by proposal ${p.id}`},
    el("legend", {text: "Tags it keeps"}),
    ...all.map((t) => {
      const box = el("input", {type: "checkbox", value: t, "aria-label": `tag ${t}`});
      box.checked = p.type !== "conflict" || (kept?.tags ?? []).includes(t);
      return el("label", {}, box, ` #${t} `);
    }))];
}

function evidence(p) {
  const parts = [p.type];
  if (p.subject) parts.push(`about “${p.subject}”`);
  if (p.payload.reason) parts.push(p.payload.reason);
  if (p.payload.similarity !== undefined && p.payload.similarity !== null) {
    parts.push(`${p.payload.measure ?? "similarity"} ${p.payload.similarity}`);
  }
  parts.push(`proposed ${day(p.created_at_iso)}, expires ${day(p.expires_at_iso)}`);
  return parts.join(" · ");
}

async function loadReview() {
  const list = $("review");
  try {
    const [queue, status] = await Promise.all([
      api("GET", "/v1/review/proposals", undefined, {limit: 20}), api("GET", "/v1/maintain/status")]);
    // Each proposal with its evidence: the source memories as they are now and what a verdict would do.
    const shown = await Promise.all(queue.proposals.map((p) => api("GET", `/v1/review/proposals/${encodeURIComponent(p.id)}`)));
    list.replaceChildren(...shown.map(({proposal: p, sources, stale, after}) => {
      const buttons = VERDICTS.map(([verdict, label]) => el("button", {
        type: "button", "data-verdict": verdict, "aria-label": `${label.replace("…", "")} proposal ${p.id}`,
        onclick: () => decide(p, sources, verdict)}, label));
      const body = p.type === "add"
        ? [el("div", {class: "source"}, el("div", {class: "meta", text: `new ${p.payload.kind}`
            + (p.payload.context ? ` · from “${p.payload.context}”` : "")
            + (p.payload.paths?.length ? ` · for ${p.payload.paths.join(", ")}` : "")
            + (p.payload.origin ? ` · ${p.payload.origin}` : "")}), el("p", {class: "text", text: p.payload.text}))]
        : sources.map((m, i) => source(m, i, p));
      return el("li", {class: "proposal-row", "data-proposal": p.id, "data-type": p.type},
        el("div", {class: "meta", text: evidence(p)}),
        el("div", {class: "pair"}, ...body), ...tagChoices(p, sources),
        el("p", {class: "after", text: stale ? `Stale: ${stale}` : after}),
        el("div", {class: "actions", role: "group", "aria-label": `Verdict on proposal ${p.id}`}, ...buttons));
    }));
    showPending(status.pending);
    $("review-status").textContent = `${status.pending} pending · ${status.cold} cold`
      + (status.last_run ? ` · last maintenance ${new Date(status.last_run.at).toISOString().slice(0, 10)}`
        : " · no maintenance run yet");
    notice(shown.length ? "" : "Nothing to review.");
  } catch (err) { notice(err.message); }
}

function draftOf(proposal, sources) {
  if (proposal.type === "add") return proposal.payload.text;
  if (proposal.payload.draft) return proposal.payload.draft;
  const texts = sources.filter((m) => m.text).map((m) => m.text);
  return proposal.type === "summarise" ? texts.join(" ") : (texts[texts.length - 1] ?? "");
}

async function decide(proposal, sources, verdict) {
  const body = {verdict};
  const row = document.querySelector(`li[data-proposal="${CSS.escape(proposal.id)}"]`);
  if (verdict === "edit") {
    const text = prompt("The statement to store instead:", draftOf(proposal, sources));
    if (!text) return;
    body.text = text;
  }
  if (verdict !== "reject" && row) {
    const kept = row.querySelector(`input[name="keep-${CSS.escape(proposal.id)}"]:checked`);
    if (verdict === "approve" && kept) body.keep_id = kept.value;
    const boxes = [...row.querySelectorAll("fieldset.tags input[type=checkbox]")];
    if (boxes.length) body.tags = boxes.filter((b) => b.checked).map((b) => b.value);
  }
  try {
    const result = await api("POST", `/v1/review/proposals/${encodeURIComponent(proposal.id)}/decide`, body);
    await loadReview();
    await Promise.all([search(), loadHome()]);
    notice(`Verdict ${result.verdict} on ${proposal.type} proposal: ${result.state}.`);
  } catch (err) { notice(err.message); }
}

async function searchSessions(event) {
  event.preventDefault();
  const query = $("sessions-query").value.trim();
  if (!query) return;
  try {
    // One result per session: its id once, the turns around its best hits, the hits marked.
    const {results} = await api("POST", "/v1/sessions/search", {query});
    $("sessions").replaceChildren(...results.map((r) => el("li", {},
      el("div", {class: "meta", text: `session ${r.session_id} · ${r.turns.length} turn${r.turns.length === 1 ? "" : "s"}`}),
      ...r.turns.map((t) => el("p", {class: t.hit ? "text hit" : "text context",
                                      text: `${t.role} #${t.position}: ${t.text}`})))));
    notice(results.length ? "" : "No turns match.");
  } catch (err) { notice(err.message); }
}

async function start() {
  for (const k of KINDS) $("kind").append(el("option", {value: k, text: k}));
  $("search-form").addEventListener("submit", search);
  $("sessions-form").addEventListener("submit", searchSessions);
  $("review-load").addEventListener("click", loadReview);
  $("review-open").addEventListener("click", openReview);
  for (const id of ["history-title", "review-title"]) $(id).setAttribute("tabindex", "-1");
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
      + (status.counts.cold ? ` (and ${status.counts.cold} cold)` : "")
      + (status.keyword_only ? " (keyword-only recall)" : "");
    // The memory list below the search form fills on a search; the first screen shows the newest.
    await loadHome();
  } catch (err) { $("store-line").textContent = ""; notice(err.message); }
}

start();
