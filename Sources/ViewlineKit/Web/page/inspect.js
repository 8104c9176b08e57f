// The inspector (/inspect, on a server started with --admin): the node's sessions,
// one session's timeline with each display as a diff and its views at any rev the
// event log still holds, and live charts of the node's vital signs. It speaks the
// protocol like any client, over this origin's /ws, with the admin commands
// `inspect` and `info`. Every server string is set as text, never as markup.

const status = document.getElementById("status");
const $ = (id) => document.getElementById(id);
const element = (tag, text, className) => {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = String(text);
  if (className) node.className = className;
  return node;
};

// --- The connection: replies matched to what sent them by id. -------------------
let socket;
let nextId = 1;
const pending = new Map();

function connect() {
  socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
  socket.addEventListener("open", () => {
    status.textContent = "connected";
    status.dataset.state = "connected";
  });
  socket.addEventListener("close", () => {
    status.textContent = "disconnected; reconnecting…";
    status.dataset.state = "disconnected";
    for (const [, resolve] of pending) resolve(null);
    pending.clear();
    setTimeout(connect, 1000);
  });
  socket.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    if (message.type !== "reply" || !pending.has(message.re)) return;
    const resolve = pending.get(message.re);
    pending.delete(message.re);
    resolve(message);
  });
}

function command(line) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return Promise.resolve(null);
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    socket.send(JSON.stringify({ id, line }));
  });
}

// --- Vital signs: figures from `info`, drawn over the last minutes. -----------
const history = { sessions: [], connections: [], commandsPerSecond: [], slowCommands: [] };
const maximumPoints = 60;  // a minute, one point a second
let lastCommands = null;

function chart(name, label, values, unit) {
  let figure = document.getElementById(`chart-${name}`);
  if (!figure) {
    figure = element("figure", undefined, "chart");
    figure.id = `chart-${name}`;
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 180 40");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.append(document.createElementNS("http://www.w3.org/2000/svg", "polyline"));
    figure.append(svg, element("figcaption"));
    $("charts").append(figure);
  }
  const svg = figure.querySelector("svg");
  // The newest point at the right edge, one step per second; room above the peak.
  const top = Math.max(1, ...values);
  const step = 180 / (maximumPoints - 1);
  const points = values
    .map((value, index) => `${(180 - (values.length - 1 - index) * step).toFixed(1)},${(38 - (value / (top * 1.25)) * 36).toFixed(1)}`)
    .join(" ");
  svg.querySelector("polyline").setAttribute("points", points);
  const now = values.length ? values[values.length - 1] : 0;
  const text = `${label}: ${Math.round(now * 10) / 10}${unit} (peak ${Math.round(top * 10) / 10}${unit} over ${values.length} s)`;
  svg.setAttribute("aria-label", text);
  figure.querySelector("figcaption").textContent = text;
}

async function vitals() {
  const reply = await command("info");
  if (!reply || !reply.ok) return;
  const info = reply.result;
  const push = (series, value) => {
    series.push(value);
    if (series.length > maximumPoints) series.shift();
  };
  push(history.sessions, info.sessions?.live ?? 0);
  push(history.connections, info.clients?.connected ?? 0);
  push(history.slowCommands, info.sessions?.slowCommands ?? 0);
  if (info.commands) {
    let total = 0;
    for (const outcomes of Object.values(info.commands)) for (const count of Object.values(outcomes)) total += Number(count) || 0;
    if (lastCommands !== null) push(history.commandsPerSecond, Math.max(0, total - lastCommands));
    lastCommands = total;
  }
  chart("sessions", "sessions", history.sessions, "");
  chart("connections", "connections", history.connections, "");
  chart("slow", "slow commands", history.slowCommands, "");
  if (info.commands) chart("rate", "commands/s", history.commandsPerSecond, "");
  if (info.cluster) $("node").textContent = `node ${info.cluster.node} · lease ${info.cluster.leaseValid ? "valid" : "not valid"} · ${info.cluster.liveNodes ?? "?"} live nodes`;
}

// --- Sessions. -------------------------------------------------------------------
let selected = null;
let following = true;

async function sessions() {
  const reply = await command("inspect");
  if (!reply) return;
  if (!reply.ok) {
    $("sessions-count").textContent = reply.error?.message ?? "inspect failed";
    return;
  }
  const filter = $("filter").value.trim().toLowerCase();
  const rows = reply.result.sessions.filter((row) => !filter || JSON.stringify(row).toLowerCase().includes(filter));
  const sort = $("sort").value;
  const key = {
    recent: (row) => row.lastCommandAt ?? "",
    rev: (row) => row.rev,
    age: (row) => row.ageSeconds ?? 0,
    session: (row) => row.session,
  }[sort];
  rows.sort((a, b) => (sort === "session" ? String(key(a)).localeCompare(String(key(b)), undefined, { numeric: true }) : key(b) > key(a) ? 1 : key(b) < key(a) ? -1 : 0));
  $("sessions-count").textContent = `${reply.result.count} sessions on this node${reply.result.recording ? "" : " (no timelines)"}; ${rows.length} shown`;
  const body = $("sessions");
  body.replaceChildren(
    ...rows.map((row) => {
      const tr = element("tr");
      const open = element("button", row.session, "secondary");
      open.type = "button";
      open.setAttribute("aria-label", `inspect session ${row.session}`);
      open.addEventListener("click", () => select(row.session));
      const first = element("td");
      first.append(open);
      tr.append(
        first,
        element("td", row.rev, "number"),
        element("td", row.connections, "number"),
        element("td", row.address ?? ""),
        element("td", (row.views ?? []).join(", ")),
        element("td", row.alerts, "number"),
        element("td", (row.tasks ?? []).join(", ")),
        element("td", row.lastCommand ?? ""),
        element("td", row.ageSeconds === undefined ? "" : `${row.ageSeconds} s`, "number"),
      );
      if (row.session === selected) tr.setAttribute("aria-selected", "true");
      return tr;
    }),
  );
}

function select(id) {
  selected = id;
  following = true;
  $("rev").value = "";
  $("session-section").hidden = false;
  $("session-heading").textContent = `Session ${id}`;
  updateFollow();
  session();
}

function updateFollow() {
  const button = $("follow");
  button.setAttribute("aria-pressed", String(following));
  button.textContent = following ? "Following live" : "Follow live";
}

// --- One session: states at a rev, then the timeline with diffs. -----------------
function diff(before, after) {
  if (!before || typeof before !== "object" || !after || typeof after !== "object" || Array.isArray(after)) return [JSON.stringify(after)];
  const changes = [];
  for (const [key, value] of Object.entries(after)) {
    const was = before[key];
    if (JSON.stringify(was) === JSON.stringify(value)) continue;
    if (Array.isArray(value) && Array.isArray(was)) changes.push(`${key}: ${was.length} → ${value.length} items`);
    else changes.push(`${key}: ${short(was)} → ${short(value)}`);
  }
  return changes.length ? changes : ["no change"];
}

function short(value) {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

async function session() {
  if (!selected) return;
  const rev = $("rev").value;
  const reply = await command(`inspect ${selected}${!following && rev !== "" ? ` ${Number(rev)}` : ""}`);
  if (!reply) return;
  if (!reply.ok) {
    $("timeline").replaceChildren(element("li", reply.error?.message ?? "inspect failed", "failed"));
    return;
  }
  const result = reply.result;
  if (following) $("rev").value = String(result.from);
  $("rev").min = String(result.oldestRev);
  $("rev").max = String(result.session.rev);
  const states = $("states");
  states.replaceChildren(
    ...Object.entries(result.states).flatMap(([view, state]) => [
      element("h4", view),
      element("pre", state === null ? "(older than the event log reaches)" : JSON.stringify(state, null, 2), "state"),
    ]),
  );
  const items = [];
  result.timeline.forEach((entry, index) => items.push({ rev: entry.rev, order: index, node: timelineEntry(entry) }));
  const previous = { ...result.states };
  result.events.forEach((event, index) => {
    let text;
    if (event.type === "display") {
      text = `rev ${event.rev} display ${event.view}: ${diff(previous[event.view], event.state).join("; ")}`;
      previous[event.view] = event.state;
    } else if (event.type === "alert") text = `rev ${event.rev} alert ${event.id}: ${event.title ?? ""}`;
    else if (event.type === "dismiss") text = `rev ${event.rev} dismiss ${event.id}`;
    else text = JSON.stringify(event);
    items.push({ rev: event.rev - 1, order: result.timeline.length + index, node: element("li", text, "event") });
  });
  items.sort((a, b) => a.rev - b.rev || a.order - b.order);
  $("timeline").replaceChildren(...(items.length ? items.map((item) => item.node) : [element("li", "nothing after this rev", "event")]));
}

function timelineEntry(entry) {
  const time = entry.durationMs === undefined ? "" : ` · ${entry.durationMs < 10 ? entry.durationMs.toFixed(1) : Math.round(entry.durationMs)} ms`;
  const failed = entry.error !== null && entry.error !== undefined;
  let text;
  if (entry.kind === "command") {
    const args = Object.entries(entry.arguments ?? {}).map(([name, value]) => `${name}=${typeof value === "string" ? value : JSON.stringify(value)}`).join(" ");
    text = `rev ${entry.rev} ${entry.command} ${args} → ${failed ? entry.error : "ok"}${time} (connection ${entry.connection})`;
  } else if (entry.kind === "call") {
    text = `rev ${entry.rev} call ${entry.backend} → ${failed ? entry.error : "ok"}${time}`;
  } else if (entry.kind === "connection") {
    text = `rev ${entry.rev} connection ${entry.connection}: ${entry.event}`;
  } else text = JSON.stringify(entry);
  return element("li", text, failed ? "failed" : undefined);
}

$("rev").addEventListener("change", () => {
  following = false;
  updateFollow();
  session();
});
$("follow").addEventListener("click", () => {
  following = !following;
  updateFollow();
  session();
});
$("filter").addEventListener("input", sessions);
$("sort").addEventListener("change", sessions);

// One refresh at a time: a slow server never piles requests up behind it.
let refreshing = false;
connect();
setInterval(async () => {
  if (refreshing) return;
  refreshing = true;
  try {
    await vitals();
    await sessions();
    if (following) await session();
  } finally {
    refreshing = false;
  }
}, 1000);
