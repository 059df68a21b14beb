// The oamd inspector's page logic: polls /api/ once a second (and at once when a live event says
// something changed), renders with textContent only (no HTML from data), and keeps the live event
// stream of /api/events. The token comes from the address: #token=… (kept out of server logs) or
// ?token=…; the selection lives in the hash too, so a reload or a link shows the same thing.
"use strict";

const POLL_MS = 1000;
const REFRESH_DEBOUNCE_MS = 250;  // at most four refreshes a second however fast events come
const EVENTS_SHOWN = 200;

const hash = new URLSearchParams(location.hash.slice(1));
const query = new URLSearchParams(location.search);
const token = hash.get("token") || query.get("token") || "";
const view = {
  connection: hash.get("connection") || "",
  kind: hash.get("kind") || "",
  id: hash.get("id") || "",
};
const openKeys = new Set();
const shown = {};
const fullTurns = {};  // id → the turn with its steps' messages, fetched once it is opened
let refreshTimer = null;
let refreshDue = 0;
let refreshing = false;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function api(path) {
  const sep = path.includes("?") ? "&" : "?";
  return fetch(`/api/${path}${sep}token=${encodeURIComponent(token)}`).then((r) => {
    if (!r.ok) throw new Error(`${r.status} ${path}`);
    return r.json();
  });
}

function saveHash() {
  const p = new URLSearchParams();
  if (token) p.set("token", token);
  for (const k of ["connection", "kind", "id"]) if (view[k]) p.set(k, view[k]);
  history.replaceState(null, "", "#" + p.toString());
}

function select(kind, id) {
  view.kind = kind;
  view.id = id;
  saveHash();
  refresh();
}

function count(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }
function ms(v) { return v === undefined || v === null ? "–" : `${v} ms`; }
function pct(v) { return v === undefined || v === null ? "–" : `${Math.round(v * 100)} %`; }
function json(v) { return JSON.stringify(v, null, 1); }
function clock(at) { return new Date(at).toLocaleTimeString(); }
function cutNote(n) { return n ? h("div", { class: "note" }, `(${n} more characters not kept)`) : null; }

function tokens(u) {
  if (!u) return "";
  return `in ${u.promptTokens} · cached ${u.cachedTokens} (${pct(u.cacheShare)}) · out ${u.outputTokens}`;
}

function kv(rows) {
  return h("table", { class: "kv" },
    rows.filter(([, v]) => v !== undefined).map(([k, v]) =>
      h("tr", {}, h("td", {}, k), h("td", {}, v instanceof Node ? v : String(v ?? "–")))));
}

function isOpen(key, openByDefault) {
  return openKeys.has(key) || (openByDefault && !openKeys.has("closed:" + key));
}

// <details> that stay open across re-renders, keyed by what they show
function fold(key, cls, summary, body, openByDefault) {
  const el = h("details", { class: cls, "data-key": key, open: isOpen(key, openByDefault) },
    h("summary", {}, summary), h("div", { class: "body" }, body));
  el.addEventListener("toggle", () => {
    if (el.open === isOpen(key, openByDefault)) return;
    if (el.open) { openKeys.add(key); openKeys.delete("closed:" + key); }
    else { openKeys.delete(key); openKeys.add("closed:" + key); }
    soon();  // an opened turn's steps are fetched
  });
  return el;
}

function renderPick(list, items, kind, label) {
  const el = document.getElementById(list);
  el.replaceChildren(...(items.length ? items.map((item) =>
    h("li", {
      "data-id": item.id,
      class: view.kind === kind && view.id === item.id ? "selected" : "",
      onclick: () => select(kind, item.id),
    }, label(item))) : [h("li", { class: "empty" }, "none")]));
}

function badge(text, cls) { return h("span", { class: "badge " + (cls || "") }, text); }

function renderConnections(daemon) {
  document.getElementById("daemon").textContent =
    `oamd ${daemon.version} · pid ${daemon.pid} · pages ${daemon.pages}` +
    (daemon.droppedPages ? ` · ${daemon.droppedPages} slow pages dropped` : "");
  if (!view.connection || !daemon.connections.some((c) => c.id === view.connection)) {
    view.connection = daemon.connections.length ? daemon.connections[daemon.connections.length - 1].id : "";
    saveHash();
  }
  const el = document.getElementById("connections");
  el.replaceChildren(...(daemon.connections.length ? daemon.connections.map((c) =>
    h("li", {
      "data-id": c.id,
      class: c.id === view.connection ? "selected" : "",
      onclick: () => { view.connection = c.id; select("", ""); },
    }, `${c.id} (${c.transport})`, badge(c.lifecycle), badge(count(c.turns, "turn")),
      c.inFlight ? badge(`${c.inFlight} in flight`, "busy") : null))
    : [h("li", { class: "empty" }, "no connection")]));
}

function renderConnection(conn) {
  renderPick("sessions", conn.sessions, "session", (s) => [s.id, badge(s.model),
    s.busy ? badge(`busy · ${s.queued} queued`, "busy") : null, badge(count(s.turnCount, "turn"))]);
  renderPick("npcs", conn.npcs, "npc", (n) => [`${n.id} (${n.name})`, badge(`rel ${n.relationship}`),
    badge(count(n.facts.length, "fact")), n.busy ? badge(`busy · ${n.queued} queued`, "busy") : null]);
  renderPick("worlds", conn.worlds, "world", (w) => [w.id, badge(`v${w.version}`), badge(`${w.bytes} B`)]);
  renderPick("others", conn.otherTurns ? [{ id: "turns" }] : [], "turns", () => count(conn.otherTurns, "turn"));
}

function renderMessage(m) {
  return h("div", { class: "msg" },
    h("span", { class: "role" }, m.role), m.toolName ? ` ${m.toolName}` : "",
    m.toolCallId ? h("span", { class: "note" }, ` (${m.toolCallId})`) : "",
    h("pre", { class: "content" }, m.content), cutNote(m.cut),
    m.toolCalls ? h("pre", { class: "calls" }, json(m.toolCalls)) : null);
}

function renderStep(turn, s) {
  const summary = `step ${s.index} · ${s.kind} · ${s.backend} · tools ${s.toolMode}` +
    `${s.tools.length ? " [" + s.tools.join(", ") + "]" : ""} · in ${s.promptTokens} · cached ` +
    `${s.cachedTokens} (${pct(s.cacheShare)}) · out ${s.outputTokens} · first ${ms(s.firstTokenMs)}` +
    ` · decode ${ms(s.decodeMs)} · total ${ms(s.totalMs)} · ${s.outcome}`;
  if (!s.messages) return h("div", { class: "note step" }, summary);
  return fold(`${turn.id}/${s.index}`, "step", summary, [
    h("h2", {}, `Prompt: ${s.messages.length + s.messagesOmitted} messages`),
    s.messages.length ? renderMessage(s.messages[0]) : null,
    s.messagesOmitted ? h("div", { class: "note" }, `… ${s.messagesOmitted} messages not kept …`) : null,
    s.messages.slice(1).map(renderMessage),
    s.replyPrefix ? [h("div", { class: "note" }, "reply starts with"), h("pre", {}, s.replyPrefix)] : null,
    s.constrained ? h("div", { class: "note" }, "JSON constrained by a schema") : null,
    h("h2", {}, "Raw output"),
    h("pre", { class: "raw" }, s.output || "(no text)"), cutNote(s.outputCut),
    s.toolCalls.length ? [h("h2", {}, "Tool calls requested"), h("pre", {}, json(s.toolCalls))] : null,
  ], false);
}

function renderTurn(summary, latest) {
  const turn = fullTurns[summary.id] || summary;
  const u = turn.usage;
  const line = [turn.id, badge(turn.status, turn.status), ` ${turn.method} · ${ms(turn.durationMs)}` +
    ` · ${count(turn.stepCount, "step")} · ${count(turn.toolCount, "tool call")}` + (u ? ` · ${tokens(u)}` : "")];
  return fold(turn.id, "turn", line, [
    kv([["request", `${turn.method} #${turn.requestId}`], ["started", clock(turn.startedAt)],
      ["backend", turn.backend], ["tokens", u ? tokens(u) : "–"]]),
    h("h2", {}, "Prompt"), h("pre", { class: "prompt" }, turn.prompt), cutNote(turn.promptCut),
    turn.text !== undefined ? [h("h2", {}, "Answer"), h("pre", { class: "answer" }, turn.text), cutNote(turn.textCut)] : null,
    turn.error ? [h("h2", {}, "Error"), h("pre", { class: "error" }, `${turn.error.name}: ${turn.error.message}`)] : null,
    turn.tools && turn.tools.length ? [h("h2", {}, "Tool calls"), h("table", { class: "kv tools" },
      turn.tools.map((t) => h("tr", {}, h("td", {}, t.name), h("td", {}, h("pre", {}, json(t.arguments))),
        h("td", {}, h("pre", {}, `${t.outputKind}: ${typeof t.output === "string" ? t.output : json(t.output)}`)),
        h("td", {}, ms(t.durationMs)))))] : null,
    h("h2", {}, "Steps"), turn.steps.map((s) => renderStep(turn, s)),
    turn.stepsOmitted ? h("div", { class: "note" }, `${turn.stepsOmitted} later steps not kept`) : null,
  ], latest);
}

// the open turns' steps (prompt messages, raw output) and tool calls: a finished turn once
async function loadOpenTurns(turns) {
  const latest = turns.length ? turns[turns.length - 1].id : null;
  for (const t of turns) {
    if (!isOpen(t.id, t.id === latest)) continue;
    const cached = fullTurns[t.id];
    if (cached && cached.status !== "running" && cached.status === t.status) continue;
    const c = encodeURIComponent(view.connection);
    fullTurns[t.id] = await api(`connections/${c}/turns/${encodeURIComponent(t.id)}`).catch(() => cached);
  }
}

function renderTurns(turns) {
  if (!turns.length) return h("p", { class: "empty" }, "no turn yet");
  return turns.slice().reverse().map((t, i) => renderTurn(t, i === 0));
}

function renderValue(v, key) {
  if (v !== null && typeof v === "object") {
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    return h("li", {}, key !== undefined ? h("span", { class: "key" }, `${key}: `) : null,
      Array.isArray(v) ? `[${v.length}]` : `{${entries.length}}`,
      h("ul", {}, entries.map(([k, x]) => renderValue(x, k))));
  }
  const cls = typeof v === "string" ? "str" : "num";
  return h("li", {}, key !== undefined ? h("span", { class: "key" }, `${key}: `) : null,
    h("span", { class: cls }, JSON.stringify(v)));
}

function changeText(c) {
  const old = "old" in c ? JSON.stringify(c.old) : "∅";
  const neu = "new" in c ? JSON.stringify(c.new) : "∅";
  return `${c.world} ${c.path || "(root)"}: ${old} → ${neu}`;
}

function renderDetail(data) {
  const el = document.getElementById("detail");
  if (view.kind === "session") {
    const s = data.session;
    el.replaceChildren(h("h2", {}, `Session ${s.id}`), s.deleted ? h("p", { class: "note" }, "deleted") :
      kv([["model", s.model], ["busy", s.busy], ["queued operations", s.queued], ["turns", s.turnCount],
        ["entries", s.entries], ["tools", s.tools.join(", ") || "none"], ["held", `${s.heldBytes} bytes`],
        ["created", s.createdAt], ["instructions", h("pre", {}, s.instructions || "(none)")],
        ["context note", s.contextNote || "–"]]),
    h("h2", {}, "Turns"), h("div", { class: "turns" }, renderTurns(data.turns)));
  } else if (view.kind === "npc") {
    const n = data.npc;
    el.replaceChildren(h("h2", {}, `NPC ${n.id}`), n.deleted ? h("p", { class: "note" }, "deleted") :
      kv([["name", n.name], ["role", n.role], ["model", n.model], ["busy", n.busy],
        ["queued operations", n.queued], ["turns", n.turnCount], ["relationship", n.relationship],
        ["secrets", n.secrets], ["world", n.world || "–"], ["tools", n.tools.join(", ") || "none"],
        ["memory facts", h("ul", { class: "facts" }, n.facts.map((f) => h("li", {}, f)))],
        ["summary", n.summary || "–"], ["held", `${n.heldBytes} bytes`]]),
    h("h2", {}, "Turns"), h("div", { class: "turns" }, renderTurns(data.turns)));
  } else if (view.kind === "world") {
    const w = data.world;
    el.replaceChildren(h("h2", {}, `World ${w.id}`),
      kv([["version", w.version], ["bytes", w.bytes], ["NPCs", w.npcs], ["subscriptions", w.subscriptions],
        ["created", w.createdAt]]),
      h("div", { class: "tree" }, h("ul", {}, renderValue(data.tree))),
      h("h2", {}, "Recent changes"),
      h("ol", { class: "changes" }, data.changes.slice().reverse().map((c) =>
        h("li", {}, h("span", { class: "note" }, clock(c.at) + " "), changeText(c)))));
  } else if (view.kind === "turns") {
    el.replaceChildren(h("h2", {}, "Other turns"), h("div", { class: "turns" }, renderTurns(data.turns)));
  } else {
    el.replaceChildren(h("p", { class: "empty" }, "Pick a session, an NPC or a world."));
  }
}

function detailPath() {
  const c = encodeURIComponent(view.connection);
  const id = encodeURIComponent(view.id);
  if (view.kind === "session") return `connections/${c}/sessions/${id}`;
  if (view.kind === "npc") return `connections/${c}/npcs/${id}`;
  if (view.kind === "world") return `connections/${c}/worlds/${id}`;
  if (view.kind === "turns") return `connections/${c}/turns`;
  return null;
}

// re-renders a part only when its data changed, so open folds and scroll positions stay
function changed(part, data) {
  const text = JSON.stringify(data);
  if (shown[part] === text) return false;
  shown[part] = text;
  return true;
}

async function refresh() {
  clearTimeout(refreshTimer);
  refreshDue = 0;
  if (refreshing) { schedule(REFRESH_DEBOUNCE_MS); return; }
  refreshing = true;
  try {
    const daemon = await api("daemon");
    if (changed("daemon", daemon)) renderConnections(daemon);
    if (view.connection) {
      const conn = await api(`connections/${encodeURIComponent(view.connection)}`);
      if (changed("connection", [conn, view.kind, view.id])) renderConnection(conn);
      const path = detailPath();
      if (path) {
        const data = await api(path).catch(() => null);
        if (data && data.turns) await loadOpenTurns(data.turns);
        const opened = data && data.turns ? data.turns.map((t) => fullTurns[t.id] ? fullTurns[t.id].status : "") : [];
        if (data && changed("detail", [data, opened, [...openKeys], view.kind, view.id])) renderDetail(data);
      } else if (changed("detail", null)) renderDetail(null);
    }
  } catch (err) {
    setStatus(false, String(err));
  } finally {
    refreshing = false;
  }
  if (!refreshDue) schedule(POLL_MS);
}

function schedule(delay) {
  clearTimeout(refreshTimer);
  refreshDue = Date.now() + delay;
  refreshTimer = setTimeout(refresh, delay);
}

// something changed: refresh within REFRESH_DEBOUNCE_MS (a stream of events never postpones it)
function soon() {
  if (refreshDue && refreshDue - Date.now() <= REFRESH_DEBOUNCE_MS) return;
  schedule(REFRESH_DEBOUNCE_MS);
}

function setStatus(live, text) {
  const el = document.getElementById("status");
  el.className = live ? "live" : "down";
  el.textContent = text;
}

function logEvent(kind, text) {
  const list = document.getElementById("events");
  list.prepend(h("li", { class: `ev ev-${kind}` }, h("span", { class: "t" }, clock(Date.now())), text));
  while (list.children.length > EVENTS_SHOWN) list.lastChild.remove();
}

function listen() {
  const source = new EventSource(`/api/events?token=${encodeURIComponent(token)}`);
  source.addEventListener("hello", () => setStatus(true, "live"));
  source.addEventListener("connection", (e) => {
    const d = JSON.parse(e.data);
    logEvent("connection", `${d.connection} ${d.open ? "opened" : "closed"}`);
    soon();
  });
  source.addEventListener("turn", (e) => {
    const d = JSON.parse(e.data);
    logEvent("turn", `${d.id} ${d.subject.kind} ${d.subject.id}: ${d.status}` +
      (d.usage ? ` · ${tokens(d.usage)} · ${ms(d.durationMs)}` : ` · ${d.method}`));
    soon();
  });
  source.addEventListener("step", (e) => {
    const d = JSON.parse(e.data);
    logEvent("step", `${d.turn} step ${d.index} ${d.kind}: in ${d.promptTokens} · cached ${d.cachedTokens}` +
      ` · out ${d.outputTokens} · ${ms(d.totalMs)}`);
    soon();
  });
  source.addEventListener("world", (e) => {
    logEvent("world", changeText(JSON.parse(e.data)));
    soon();
  });
  source.onerror = () => setStatus(false, "reconnecting…");
}

function login() {
  document.querySelector("main").replaceChildren(h("form", { id: "login", onsubmit: (e) => {
    e.preventDefault();
    location.hash = "token=" + encodeURIComponent(e.target.elements.token.value.trim());
    location.reload();
  } }, h("p", {}, "Paste the token from the file the daemon's \"inspector\" line names (tokenFile):"),
  h("input", { name: "token", size: 50, autofocus: true }), " ", h("button", {}, "Open")));
  setStatus(false, "no token");
}

if (token) { saveHash(); listen(); refresh(); } else { login(); }
