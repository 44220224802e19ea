// The lineage page: ask, watch the DAG that ran, open every piece of evidence, and experiment.
// Plain JavaScript over the service's own API (/v1/run, /v1/dag, the lookups); no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { prev: null, cur: null, live: null, graph: null, overrides: {}, selected: null, open: new Set() };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function svgEl(tag, attrs = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

async function api(path, body) {
  const headers = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) headers.Authorization = "Bearer " + key;
  const resp = await fetch(path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(typeof data.detail === "string" ? data.detail : resp.status + " " + JSON.stringify(data.detail));
  return data;
}

function flow() { return document.querySelector("input[name=flow]:checked").value; }
function ns() { return $("namespace").value; }

async function loadNamespaces(asked = true) {
  // `asked`: the user gave a key. At page load nobody has acted yet: a server that wants a key
  // gets a hint, not an error.
  try {
    const rows = await api("/v1/namespaces");
    const select = $("namespace"), keep = select.value || sessionStorage.getItem("namespace") || "demo";
    select.replaceChildren(...rows.map((r) => el("option", { value: r.namespace }, r.namespace)));
    if (rows.some((r) => r.namespace === keep)) select.value = keep;
    status(rows.length ? "" : "This key sees no namespace.");
  } catch (err) {
    if (asked || $("key").value) status(err.message, true);
    else status("Enter an API key to list your namespaces.");
  }
}

function status(text, bad = false) {
  const el = $("status");
  el.textContent = text;
  el.className = bad ? "error" : "muted";
  el.dataset.updates = String(Number(el.dataset.updates || 0) + 1);  // tells two equal texts apart
}

function request() {
  const options = {}, config = {};
  for (const name of ["top_k", "level", "rrf_k"]) {
    const v = $(name).value.trim();
    if (v !== "" && !(flow() === "global" && name !== "level")) options[name] = Number(v);
  }
  if (flow() === "local") {
    const on = [...$("channels").querySelectorAll("input:checked")].map((c) => c.value);
    if (on.length < 5) config.channels = on.join(",") || "none";
    if ($("selector").value !== "llm") config.selector = $("selector").value;
    if ($("ranking").value !== "rrf") config.ranking = $("ranking").value;
    if ($("decompose").checked) config.decompose = "on";
  } else if ($("global_selection").value !== "static") {
    config.global_selection = $("global_selection").value;
  }
  return { flow: flow(), query: $("query").value, namespace: ns(), offline: $("offline").checked,
           options, config, overrides: state.overrides };
}

async function streamRun(body, onEvent) {
  // POST with a server-sent event stream as the answer (EventSource can only GET)
  const headers = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) headers.Authorization = "Bearer " + key;
  const resp = await fetch("/v1/run", { method: "POST", headers, body: JSON.stringify({ ...body, stream: true }) });
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    throw new Error(typeof data.detail === "string" ? data.detail : resp.status + " " + JSON.stringify(data.detail));
  }
  const reader = resp.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const chunk = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message", data = "";
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

async function run(event) {
  if (event) event.preventDefault();
  if (!$("query").value.trim()) return status("Type a question first.", true);
  sessionStorage.setItem("namespace", ns());
  const body = request();
  status("Running…");
  $("run").disabled = true;
  try {
    const started = performance.now();
    const params = new URLSearchParams(body.config).toString();
    state.graph = await api(`/v1/dag/${body.flow}${params ? "?" + params : ""}`);
    const live = { trace: [], overridden: Object.keys(body.overrides), flow: body.flow };
    state.live = live;
    renderDag(live);  // the whole DAG, idle; nodes light up as they finish
    let answer = "", res = null;
    await streamRun(body, (name, data) => {
      if (name === "stage") { live.trace.push(data); renderDag(live); }
      else if (name === "token") { answer += data.text; renderAnswer(answer); }
      else if (name === "result") res = data;
      else if (name === "error") throw new Error(data.detail);
    });
    if (!res) throw new Error("the run ended without a result");
    const sameQuestion = state.cur && state.cur.query === body.query && state.cur.flow === body.flow;
    state.prev = sameQuestion ? state.cur : null;
    state.cur = { ...res, query: body.query, request: body };
    state.live = null;
    render();
    status(`Done in ${Math.round(performance.now() - started)} ms.`);
  } catch (err) {
    status(err.message, true);
  } finally {
    $("run").disabled = false;
  }
}

function render() {
  const { cur } = state, result = cur.result || {};
  renderAnswer(result.answer || "");
  const local = cur.flow === "local";
  for (const id of ["entities", "communities", "sources", "evidence"]) $(id).replaceChildren();
  if (local) {
    renderEntities(cur.values.matched_entities || []);
    renderCommunities(result.communities || [], cur.values.ranked_communities || []);
    renderSources(result.sources || []);
    renderEvidence(result.evidence || []);
  }
  renderDiff();
  renderDag();
  const t = cur.trace, cached = t.filter((x) => x.cached).length;
  $("runinfo").textContent = `${t.length} nodes ran, ${cached} from the cache, ` +
    `${Math.round(t.reduce((a, x) => a + x.ms, 0))} ms in nodes` + (cur.overridden.length ? `; overridden: ${cur.overridden.join(", ")}` : "");
  if (local) renderGraph(cur.values.matched_entities || []);
  else $("graph").replaceChildren(el("p", { class: "muted" }, "Local search only."));
}

const CITATION = /\[([^\[\]]+)\]/g;

function renderAnswer(text) {
  const box = $("answer");
  box.replaceChildren();
  let last = 0;
  for (const m of text.matchAll(CITATION)) {
    box.append(text.slice(last, m.index), "[");
    m[1].split(/,\s*/).forEach((ref, i) => {
      if (i) box.append(", ");
      const id = ref.replace(/^community\s+/, "");
      const isCommunity = ref.startsWith("community ");
      box.append(el("span", { class: "cite", "data-id": id, onclick: () => (isCommunity ? showCommunity(id) : showSource(id)) }, ref));
    });
    box.append("]");
    last = m.index + m[0].length;
  }
  box.append(text.slice(last));
}

function renderEntities(rows) {
  $("entities").append(el("tr", {}, el("th", {}, "entity"), el("th", {}, "channels"), el("th", {}, "score")));
  for (const e of rows) $("entities").append(el("tr", {}, el("td", {}, e.name), el("td", {}, e.channels.join(", ")), el("td", {}, e.score.toFixed(4))));
}

function renderCommunities(kept, ranked) {
  const ranks = Object.fromEntries(ranked.map((c) => [c.id, c.ranks || {}]));
  $("communities").append(el("tr", {}, ...["id", "title", "score", "semantic · overlap · weight", ""].map((h) => el("th", {}, h))));
  for (const c of kept) {
    const r = ranks[c.id] || {};
    const drop = el("button", { class: "small", type: "button", title: "re-run without this community",
                                onclick: () => dropCommunity(c.id) }, "drop");
    $("communities").append(el("tr", { "data-id": c.id }, el("td", {}, el("span", { class: "cite", onclick: () => showCommunity(c.id) }, c.id)),
      el("td", {}, c.title), el("td", {}, c.score.toFixed(4)),
      el("td", {}, [r.semantic, r.overlap, r.weight].map((x) => (x == null ? "–" : x)).join(" · ")), el("td", {}, drop)));
  }
}

function renderSources(rows) {
  for (const s of rows) {
    $("sources").append(el("li", {}, el("span", { class: "cite", "data-id": s.text_unit_id, onclick: () => showSource(s.text_unit_id) },
      s.title || s.document_id), ` [${s.start}:${s.end}] `, el("span", { class: "muted" }, s.signals.join(", "))));
  }
}

const EVIDENCE_SHOWN = 10;  // the rest behind a "more" control: a long list would bury the page

function renderEvidence(rows, from = 0) {
  const list = $("evidence");
  list.querySelector(".more")?.remove();
  const upto = from === 0 ? Math.min(rows.length, EVIDENCE_SHOWN) : rows.length;
  for (const e of rows.slice(from, upto)) {
    list.append(el("li", {}, el("span", { class: "cite evidence-id", "data-id": e.id, onclick: () => showSource(e.id) }, e.id),
      ` (${e.kind}) `, (e.statement || e.text).slice(0, 160)));
  }
  if (upto < rows.length) {
    list.append(el("li", { class: "more" }, el("button", { type: "button", onclick: () => renderEvidence(rows, upto) },
      `${rows.length - upto} more`)));
  }
}

async function dropCommunity(id) {
  const ranked = state.cur.values.ranked_communities || [];
  state.overrides = { ...state.overrides, ranked_communities: ranked.filter((c) => c.id !== id) };
  await run();
  state.overrides = {};
}

function renderDiff() {
  const { prev, cur } = state;
  $("changes").hidden = !prev;
  if (!prev) return;
  const lines = [];
  const pair = (label, before, after) => {
    const a = new Map(before), b = new Map(after);
    for (const [k, v] of b) if (!a.has(k)) lines.push(["added", `${label} ${v}`]);
      else if (a.get(k) !== v) lines.push(["changed", `${label} ${a.get(k)} → ${v}`]);
    for (const [k, v] of a) if (!b.has(k)) lines.push(["removed", `${label} ${v}`]);
  };
  const pr = prev.result || {}, cr = cur.result || {};
  const ents = (r) => (r.values.matched_entities || []).map((e) => [e.id, `${e.name} (${e.channels.join(", ")})`]);
  const comms = (r) => (r.communities || []).map((c) => [c.id, `${c.id} ${c.title}`]);
  const srcs = (r) => (r.sources || []).map((s, i) => [s.text_unit_id, `#${i + 1} ${s.title || s.document_id}`]);
  pair("entity", ents(prev), ents(cur));
  pair("community", comms(pr), comms(cr));
  pair("source", srcs(pr), srcs(cr));
  // communities and sources side by side, before and after
  const side = el("table", { class: "side" }, el("tr", {}, el("th", {}, "before"), el("th", {}, "after")));
  for (const [label, before, after] of [["communities", comms(pr), comms(cr)], ["sources", srcs(pr), srcs(cr)]]) {
    const inAfter = new Set(after.map(([k]) => k)), inBefore = new Set(before.map(([k]) => k));
    const cell = (rows, other, kind) => el("td", {}, ...rows.map(([k, v]) => el("div", { class: other.has(k) ? "" : kind }, v)));
    side.append(el("tr", {}, el("th", { colspan: 2 }, label)),
                el("tr", {}, cell(before, inAfter, "removed"), cell(after, inBefore, "added")));
  }
  const cached = cur.trace.filter((t) => t.cached).map((t) => t.node);
  $("diff").replaceChildren(...(lines.length ? lines : [["same", "the same entities, communities and sources"]])
    .map(([kind, text]) => el("div", { class: kind }, text)),
    el("div", { class: "muted cached-nodes" }, cached.length ? `served from the cache: ${cached.join(", ")}` : "nothing came from the cache"),
    side);
}

// ------------------------------------------------------------------------ the DAG, drawn in layers

function layers(nodes) {
  const byName = Object.fromEntries(nodes.map((n) => [n.name, n]));
  const depth = {};
  const visit = (name) => {
    if (depth[name] !== undefined) return depth[name];
    depth[name] = 0;
    const n = byName[name];
    depth[name] = n ? Math.max(0, ...n.inputs.filter((i) => byName[i]).map((i) => visit(i) + 1)) : 0;
    return depth[name];
  };
  nodes.forEach((n) => visit(n.name));
  return depth;
}

function layered(nodes) {
  const depth = layers(nodes), rows = [];
  for (const n of nodes) (rows[depth[n.name]] = rows[depth[n.name]] || []).push(n);
  return rows.map((row) => row.sort((a, b) => a.name.localeCompare(b.name)));
}

// A flow that names its stages (parse, match, recall, rank, select, answer for local search) is
// drawn as one box per stage, each folded until opened; its nodes are then drawn in their layers.
function dagItems(nodes, kindOf, trace) {
  const stages = state.graph.stages || [];
  const box = (n) => ({ id: n.name, label: n.name, kind: kindOf(n.name), ms: trace[n.name] ? trace[n.name].ms : null,
                        sub: null, node: n.name });
  if (!stages.length) return layered(nodes).map((row) => row.map(box));
  const rows = [];
  for (const stage of stages) {
    const members = nodes.filter((n) => n.stage === stage);
    const kinds = members.map((n) => kindOf(n.name)), ran = members.filter((n) => trace[n.name]);
    const ms = ran.reduce((a, n) => a + trace[n.name].ms, 0);
    const kind = kinds.includes("overridden") ? "overridden" : kinds.includes("ran") ? "ran" : kinds.includes("cached") ? "cached" : "idle";
    const open = state.open.has(stage);
    rows.push([{ id: "stage:" + stage, label: (open ? "▾ " : "▸ ") + stage, kind, stage, open,
                 ms: ran.length ? ms : null, sub: `${members.length} nodes · ${ran.length} ran` }]);
    if (open) rows.push(...layered(members).map((row) => row.map(box)));
  }
  return rows;
}

function renderDag(run = state.cur) {
  const { graph } = state, cur = run;
  const nodes = graph.nodes.filter((n) => !n.input);
  const stageOf = Object.fromEntries(nodes.map((n) => [n.name, n.stage]));
  const trace = Object.fromEntries(cur.trace.map((t) => [t.node, t]));
  const kindOf = (name) => (cur.overridden.includes(name) ? "overridden" : trace[name] ? (trace[name].cached ? "cached" : "ran") : "idle");
  const rows = dagItems(nodes, kindOf, trace);
  const shownAs = (name) => (stageOf[name] && !state.open.has(stageOf[name]) ? "stage:" + stageOf[name] : name);
  const W = 150, H = 34, width = Math.max(...rows.map((r) => r.length)) * W + 20, height = rows.length * (H + 22) + 20;
  // never drawn larger than life: a folded DAG is a column of six boxes, not a poster
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${cur.flow} DAG` });
  svg.style.maxWidth = `${width * 1.2}px`;  // CSSOM: the page's policy refuses style attributes
  const pos = {};
  rows.forEach((row, y) => row.forEach((item, x) => {
    pos[item.id] = { x: 10 + x * W + (width - 20 - row.length * W) / 2, y: 10 + y * (H + 22) };
  }));
  const drawn = new Set();
  for (const [from, to] of graph.edges) {
    const a = pos[shownAs(from)], b = pos[shownAs(to)], key = shownAs(from) + ">" + shownAs(to);
    if (!a || !b || a === b || drawn.has(key)) continue;
    drawn.add(key);
    svg.append(svgEl("path", { class: "edge", d: `M${a.x + 68},${a.y + H} C${a.x + 68},${a.y + H + 14} ${b.x + 68},${b.y - 14} ${b.x + 68},${b.y}` }));
  }
  for (const item of rows.flat()) {
    const p = pos[item.id], isStage = item.stage !== undefined;
    const attrs = isStage ? { class: `stage ${item.kind}${item.open ? " open" : ""}`, "data-stage": item.stage }
      : { class: `node ${item.kind}${state.selected === item.node ? " selected" : ""}`, "data-node": item.node };
    const g = svgEl("g", { ...attrs, "data-ms": item.ms ?? "", transform: `translate(${p.x},${p.y})` });
    g.append(svgEl("rect", { width: 136, height: H }));
    const label = svgEl("text", { x: 6, y: 14 }); label.textContent = item.label.length > 24 ? item.label.slice(0, 23) + "…" : item.label;
    const ms = svgEl("text", { x: 6, y: 27, class: "ms" });
    const time = item.ms == null ? "not run" : `${item.ms.toFixed(1)} ms`;
    ms.textContent = isStage ? `${item.sub} · ${time}` : item.kind === "overridden" ? "overridden" : item.kind === "cached" ? `${time} · cached` : time;
    const title = svgEl("title"); title.textContent = isStage ? `${item.stage}: ${item.open ? "fold" : "open"} its nodes` : item.node;
    g.append(label, ms, title);
    g.addEventListener("click", () => (isStage ? toggleStage(item.stage) : showNode(item.node)));  // values arrive with the result
    svg.append(g);
  }
  const legend = el("div", { class: "legend" }, ...[["ran", "ran"], ["cached", "cached"], ["overridden", "overridden"], ["idle", "not run"]]
    .map(([kind, name]) => el("span", { class: kind }, el("b", {}, "■ "), name)));
  const controls = (graph.stages || []).length ? [el("div", { class: "dag-controls" },
    el("button", { type: "button", class: "small plain", id: "open-stages", onclick: () => toggleStage(null, true) }, "open all"),
    el("button", { type: "button", class: "small plain", id: "fold-stages", onclick: () => toggleStage(null, false) }, "fold all"))] : [];
  $("dag").replaceChildren(...controls, svg, legend);
}

function toggleStage(stage, all) {
  if (stage === null) state.open = new Set(all ? state.graph.stages : []);
  else if (state.open.has(stage)) state.open.delete(stage);
  else state.open.add(stage);
  renderDag(state.live || state.cur);
}

function showNode(name) {
  state.selected = name;
  const info = state.graph.nodes.find((n) => n.name === name) || {};
  $("node").hidden = false;
  $("node-name").textContent = name;
  $("node-doc").textContent = `${info.doc || ""} (inputs: ${(info.inputs || []).join(", ") || "none"})`;
  const value = state.cur ? state.cur.values[name] : undefined;
  $("node-value").textContent = value === undefined ? "(not computed in this run)" : JSON.stringify(value, null, 2);
  renderDag(state.live || state.cur);
}

async function showSource(id) {
  try {
    const s = await api(`/v1/namespaces/${encodeURIComponent(ns())}/sources/${encodeURIComponent(id)}?context_chars=300`);
    $("source").hidden = false;
    $("source-title").textContent = `${s.evidence_id} — ${s.title || s.document_id}`;
    $("source-where").textContent = `${s.kind} in document ${s.document_id}, characters ${s.start}–${s.end} of ${s.document_chars}` +
      (s.statement ? ` · claim: ${s.statement}` : "");
    $("source-text").replaceChildren("…" + s.before, el("mark", {}, s.text), s.after + "…");
    $("source").scrollIntoView({ block: "nearest" });
  } catch (err) { status(err.message, true); }
}

async function showCommunity(id) {
  try {
    const c = await api(`/v1/namespaces/${encodeURIComponent(ns())}/communities/${encodeURIComponent(id)}`);
    $("node").hidden = false;
    $("node-name").textContent = `community ${c.id}: ${c.title}`;
    $("node-doc").textContent = `level ${c.level}, ${c.member_count} members: ${c.members.map((m) => m.name).join(", ")}`;
    $("node-value").textContent = c.full_content || c.summary;
  } catch (err) { status(err.message, true); }
}

// -------------------------------------------------------- the matched entities and their neighbours

async function renderGraph(matched) {
  const top = matched.slice(0, 3);
  const box = $("graph");
  if (!top.length) return box.replaceChildren(el("p", { class: "muted" }, "No entity matched."));
  const found = await Promise.all(top.map((m) => api(`/v1/namespaces/${encodeURIComponent(ns())}/entities/${encodeURIComponent(m.name)}/neighbors?depth=1&limit=8`).catch(() => null)));
  const names = new Map(), edges = [];
  found.filter(Boolean).forEach((r) => {
    names.set(r.entity.id, { name: r.entity.name, matched: true });
    r.neighbors.forEach((n) => { if (!names.has(n.id)) names.set(n.id, { name: n.name }); edges.push([r.entity.id, n.id, n.weight]); });
  });
  const ids = [...names.keys()], W = 620, Hh = 360, cx = W / 2, cy = Hh / 2;
  const pos = {};
  const centres = ids.filter((i) => names.get(i).matched), outer = ids.filter((i) => !names.get(i).matched);
  centres.forEach((id, k) => { pos[id] = { x: cx + (centres.length > 1 ? 70 * Math.cos((2 * Math.PI * k) / centres.length) : 0), y: cy + (centres.length > 1 ? 50 * Math.sin((2 * Math.PI * k) / centres.length) : 0) }; });
  outer.forEach((id, k) => { const a = (2 * Math.PI * k) / outer.length; pos[id] = { x: cx + 240 * Math.cos(a), y: cy + 140 * Math.sin(a) }; });
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${Hh}`, role: "img", "aria-label": "entity graph" });
  const maxW = Math.max(1, ...edges.map((e) => e[2]));
  for (const [a, b, w] of edges) svg.append(svgEl("line", { x1: pos[a].x, y1: pos[a].y, x2: pos[b].x, y2: pos[b].y, stroke: "#9aa6c0", "stroke-width": 0.5 + (2.5 * w) / maxW }));
  for (const id of ids) {
    const { name, matched: isMatched } = names.get(id);
    svg.append(svgEl("circle", { cx: pos[id].x, cy: pos[id].y, r: isMatched ? 9 : 6, fill: isMatched ? "#4f7df3" : "#c9d3ea" }));
    const t = svgEl("text", { x: pos[id].x + 10, y: pos[id].y + 4, "font-size": 11 }); t.textContent = name;
    svg.append(t);
  }
  box.replaceChildren(svg);
}

// ----------------------------------------------------------------------------------------- start

$("ask").addEventListener("submit", run);
$("key").addEventListener("change", () => { sessionStorage.setItem("key", $("key").value); loadNamespaces(); });
function showFlowOptions() {
  document.querySelectorAll(".local-only").forEach((n) => { n.style.display = flow() === "local" ? "" : "none"; });
  document.querySelectorAll(".global-only").forEach((n) => { n.style.display = flow() === "global" ? "" : "none"; });
}
document.querySelectorAll("input[name=flow]").forEach((r) => r.addEventListener("change", showFlowOptions));
showFlowOptions();
$("key").value = sessionStorage.getItem("key") || "";
loadNamespaces(false);
