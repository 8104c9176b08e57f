// The inspector (/inspect, on a server started with --admin or an inspector token): the node's sessions,
// one session's timeline with each display as a diff and its views at any rev the
// event log still holds, and live charts of the node's vital signs. It speaks the
// protocol like any client, over this origin's /ws, with the admin commands
// `inspect` and `info`. Every server string is set as text, never as markup.

import { $, text as element } from "./dom.js";
import { originSocketURL, Requests } from "./socket.js";

const status = $("status");

// --- The connection: replies matched to what sent them by id. -------------------
let socket;
const pending = new Requests();

function connect() {
  socket = new WebSocket(originSocketURL());
  socket.addEventListener("open", async () => {
    status.textContent = "connected";
    status.dataset.state = "connected";
    // A new connection gives the token again (it opens the inspector per connection).
    const token = sessionStorage.getItem(tokenKey);
    if (token) await giveToken(token);
  });
  socket.addEventListener("close", () => {
    status.textContent = "disconnected; reconnecting…";
    status.dataset.state = "disconnected";
    for (const resolve of pending.takeAll()) resolve(null);
    setTimeout(connect, 1000);
  });
  socket.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    if (message.type !== "reply") return;
    pending.take(message.re)?.(message);
  });
}

function command(line) {
  return socketCommand({ line });
}

// A JSON command (`{cmd, args}` or `{line}`), its reply matched by id.
function socketCommand(body) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return Promise.resolve(null);
  return new Promise((resolve) => {
    const id = pending.add(resolve);
    socket.send(JSON.stringify({ id, ...body }));
  });
}

// --- The inspector token: on a server started with one rather than --admin. -------
// Kept for this tab only (sessionStorage), so a reconnect gives it again.
const tokenKey = "viewline-inspector-token";

async function giveToken(token) {
  const reply = await socketCommand({ cmd: "inspector", args: { token } });
  if (!reply) return false;
  if (!reply.ok) {
    sessionStorage.removeItem(tokenKey);
    askForToken(reply.error?.message ?? "the token was refused");
    return false;
  }
  sessionStorage.setItem(tokenKey, token);
  $("token-form").hidden = true;
  return true;
}

function askForToken(why) {
  if (why !== undefined) $("token-error").textContent = why;
  const form = $("token-form");
  if (form.hidden) {
    form.hidden = false;
    $("token").focus();
  }
}

// Whether a reply says the inspector needs the token on this connection.
function needsToken(reply) {
  return reply && !reply.ok && reply.error?.code === "admin_disabled" && /inspector token/.test(reply.error?.message ?? "");
}

$("token-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("token");
  const token = input.value;
  input.value = "";
  if (await giveToken(token)) await sessions();
});

// --- Vital signs: figures from `info`, drawn over the last minutes. -----------
const history = { sessions: [], connections: [], backlog: [], commandsPerSecond: [], slowCommands: [], p50: [], p99: [], recordLag: [] };
const maximumPoints = 60;  // a minute, one point a second
let lastCommands = null;
let lastLatency = null;

// The `quantile` of the commands counted between two readings of `info.latency`
// (cumulative bucket counts), in milliseconds: linear within its bucket, as
// Prometheus's histogram_quantile estimates it; a quantile past the last bound is
// that bound. `null` when no command ran between them.
function quantile(q, bounds, before, after) {
  const counts = after.map((count, index) => count - (before?.[index] ?? 0));
  const total = counts[counts.length - 1];
  if (!(total > 0)) return null;
  const rank = q * total;
  for (let index = 0; index < bounds.length; index++) {
    if (counts[index] >= rank) {
      const lower = index === 0 ? 0 : bounds[index - 1];
      const below = index === 0 ? 0 : counts[index - 1];
      const inBucket = counts[index] - below;
      const fraction = inBucket > 0 ? (rank - below) / inBucket : 1;
      return (lower + (bounds[index] - lower) * fraction) * 1000;
    }
  }
  return bounds[bounds.length - 1] * 1000;
}

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
  const peak = Math.max(0, ...values);
  const text = `${label}: ${figure2(now)}${unit} (peak ${figure2(peak)}${unit} over ${values.length} s)`;
  svg.setAttribute("aria-label", text);
  figure.querySelector("figcaption").textContent = text;
}

// Two significant digits below 10 (a latency of 0.043 ms stays readable), whole above.
function figure2(value) {
  return value >= 10 ? Math.round(value) : Number(value.toPrecision(2));
}

async function vitals() {
  const reply = await command("info");
  if (needsToken(reply)) return askForToken();
  if (!reply || !reply.ok) return;
  const info = reply.result;
  const push = (series, value) => {
    series.push(value);
    if (series.length > maximumPoints) series.shift();
  };
  push(history.sessions, info.sessions?.live ?? 0);
  push(history.connections, info.clients?.connected ?? 0);
  push(history.slowCommands, info.sessions?.slowCommands ?? 0);
  push(history.backlog, (Number(info.clients?.outputBacklog?.bytes) || 0) / 1024);
  if (info.commands) {
    let total = 0;
    for (const outcomes of Object.values(info.commands)) for (const count of Object.values(outcomes)) total += Number(count) || 0;
    if (lastCommands !== null) push(history.commandsPerSecond, Math.max(0, total - lastCommands));
    lastCommands = total;
  }
  const latency = info.latency;
  if (latency && Array.isArray(latency.bucketsSeconds) && Array.isArray(latency.cumulative)) {
    if (lastLatency) {
      // A second with no command keeps the line flat at zero rather than breaking it.
      push(history.p50, quantile(0.5, latency.bucketsSeconds, lastLatency, latency.cumulative) ?? 0);
      push(history.p99, quantile(0.99, latency.bucketsSeconds, lastLatency, latency.cumulative) ?? 0);
    }
    lastLatency = latency.cumulative;
  }
  if (info.cluster) push(history.recordLag, Number(info.cluster.recordLagSeconds) || 0);
  chart("sessions", "sessions", history.sessions, "");
  chart("connections", "connections", history.connections, "");
  chart("slow", "slow commands", history.slowCommands, "");
  chart("backlog", "output backlog", history.backlog, " KiB");
  if (info.commands) chart("rate", "commands/s", history.commandsPerSecond, "");
  if (latency) {
    chart("p50", "p50 command latency", history.p50, " ms");
    chart("p99", "p99 command latency", history.p99, " ms");
  }
  if (info.cluster) {
    chart("lag", "record lag", history.recordLag, " s");
    nodes(info.cluster);
  }
}

// In a cluster: this node, and a link to each other live node's inspector.
function nodes(cluster) {
  const line = $("node");
  const others = (Array.isArray(cluster.nodes) ? cluster.nodes : []).filter((node) => node.node !== cluster.node);
  line.replaceChildren(
    element(
      "span",
      `node ${cluster.node}${cluster.release ? ` (${cluster.release})` : ""} · lease ${cluster.leaseValid ? "valid" : "not valid"} · ${cluster.liveNodes ?? "?"} live nodes`,
    ),
  );
  if (!others.length) return;
  line.append(element("span", " · other nodes: "));
  others.forEach((node, index) => {
    if (index > 0) line.append(element("span", ", "));
    const href = inspectorOf(node.web);
    if (href) {
      const link = element("a", node.node);
      link.href = href;
      link.title = `${node.node}'s inspector (${node.address})`;
      line.append(link);
    } else {
      line.append(element("span", `${node.node} (${node.address}, no web listener)`));
    }
    // A rolling deploy shows as nodes of two releases.
    if (node.release && node.release !== cluster.release) line.append(element("span", ` (${node.release})`));
  });
}

// A node's `web` (`http://host:port/`) as its inspector's address; `null` for
// anything but an http(s) URL (a hostile directory row never becomes a script link).
function inspectorOf(web) {
  try {
    const url = new URL("inspect", web);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

// --- Sessions. -------------------------------------------------------------------
let selected = null;
let following = true;

async function sessions() {
  const reply = await command("inspect");
  if (!reply) return;
  if (needsToken(reply)) return askForToken();
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
  unreadable(reply.result.unreadableRecords);
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

// Records a restore could not read (`inspect`'s `unreadableRecords`): which view, its
// recorded and this release's versions, why, and whether the attach was refused.
function unreadable(records) {
  const list = Array.isArray(records) ? records : [];
  $("unreadable-section").hidden = list.length === 0;
  $("unreadable").replaceChildren(
    ...list.map((record) =>
      element(
        "li",
        `session ${record.session}, view ${record.view}: recorded version ${record.recordedVersion}, this release ${record.version}` +
          ` (${record.reason}: ${record.detail}); ${record.refused ? "attach refused, record kept" : "view started afresh"}`,
      ),
    ),
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
    const was = Object.hasOwn(before, key) ? before[key] : undefined;
    if (JSON.stringify(was) === JSON.stringify(value)) continue;
    if (Array.isArray(value) && Array.isArray(was)) {
      if (value.length === was.length) for (const change of itemChanges(key, was, value)) changes.push(change);
      else changes.push(`${key}: ${was.length} → ${value.length} items`);
    } else changes.push(`${key}: ${short(was)} → ${short(value)}`);
  }
  for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) changes.push(`${key} removed`);
  return changes.length ? changes : ["no change"];
}

// The items of a list that changed, its length the same: `todos[0].done: false →
// true` for a field of an object, `tags[2]: "a" → "b"` for any other item; the
// first three of them, then how many more (as the REPL's `inspect`).
function itemChanges(name, before, after) {
  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
  const changes = [];
  let shown = 0;
  let more = 0;
  after.forEach((value, index) => {
    const was = before[index];
    if (JSON.stringify(was) === JSON.stringify(value)) return;
    if (shown >= 3) {
      more += 1;
      return;
    }
    shown += 1;
    if (isObject(was) && isObject(value)) {
      for (const [key, field] of Object.entries(value)) {
        const old = Object.hasOwn(was, key) ? was[key] : undefined;
        if (JSON.stringify(old) !== JSON.stringify(field)) changes.push(`${name}[${index}].${key}: ${short(old)} → ${short(field)}`);
      }
      for (const key of Object.keys(was)) if (!Object.hasOwn(value, key)) changes.push(`${name}[${index}].${key} removed`);
    } else changes.push(`${name}[${index}]: ${short(was)} → ${short(value)}`);
  });
  if (more > 0) changes.push(`${name}: ${more} more items changed`);
  return changes;
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

// --- Download as a test: the session's recording as a transcript file -------------
// (`export <session>`), which ViewlineTesting's Replay plays against a build.
async function exportSession() {
  if (!selected) return;
  const id = selected;
  const status = $("export-status");
  status.textContent = "Exporting…";
  const reply = await socketCommand({ cmd: "export", args: { session: id } });
  if (!reply || !reply.ok || typeof reply.result?.transcript !== "string") {
    status.textContent = `Could not export ${id}: ${reply?.error?.message ?? "no reply"}`;
    return;
  }
  const { transcript, steps, cut } = reply.result;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([transcript], { type: "application/jsonl" }));
  link.download = `${String(id).replace(/[^A-Za-z0-9_-]/g, "_")}.jsonl`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  status.textContent = `Downloaded ${link.download}: ${Number(steps)} steps${cut ? ", cut at the recording's budget" : ""}.`;
}

function timelineEntry(entry) {
  const time = entry.durationMs === undefined ? "" : ` · ${entry.durationMs < 10 ? entry.durationMs.toFixed(1) : Math.round(entry.durationMs)} ms`;
  const failed = entry.error !== null && entry.error !== undefined;
  let text;
  if (entry.kind === "command") {
    const args = Object.entries(entry.arguments ?? {}).map(([name, value]) => `${name}=${typeof value === "string" ? value : JSON.stringify(value)}`).join(" ");
    const repeats = Number.isInteger(entry.repeats) && entry.repeats > 1 ? ` ×${entry.repeats}` : "";
    text = `rev ${entry.rev} ${entry.command}${repeats} ${args} → ${failed ? entry.error : "ok"}${time}${repeats && time ? " longest" : ""} (connection ${entry.connection})`;
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
$("export").addEventListener("click", exportSession);
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
