// The socket and the session it carries: connecting and reconnecting (backoff),
// resuming this page's session after a reload or a drop, following `moved` to the
// node that owns it, and every reply matched to what sent it by its id.
import { $ } from "./dom.js";
import { originSocketURL, Requests } from "./socket.js";
import { log, masked } from "./log.js";
import { busyFields, clearViews, show, views } from "./draw.js";
import { askToJoin, dismissAlert, showAlert } from "./dialogs.js";
import { renderCommands } from "./forms.js";

const store = window.sessionStorage;
// Which `bye` ends the session for this page (PROTOCOL §4; bye.schema.json's lists,
// which a test compares with these).
const FINAL_BYE_CODES = ["quit", "ended", "expired", "evicted", "revoked"];
const FINAL_BYE_REASONS = ["client quit", "session ended", "session expired", "session evicted"];

let socket = null;
let helpLoaded = false;
let final = false;              // quit or session ended: no reconnecting
let backoff = 250;
let endpoint = null;            // another node's /ws, after `moved` named its page
let hops = 0;                   // `moved` followed in a row (at most 3)
let snapshotNext = false;       // attach without a rev next (the rev kept is another session's)
let offered = takeOffer();      // a token from an `#attach=` link, until the person answers
// Each command sent and not answered yet, by its id: its label for the log, what was
// sent, what handles its reply (`onReply`), whether the page sent it for itself
// (`internal`: never sent again) and whether its reply stays out of the log (`quiet`).
const pending = new Requests();
let unanswered = [];            // commands a `bye` came before the reply of: they never ran, and go again once attached
let saidBye = false;            // the server said `bye` on this connection

function status(text, state) {
  $("status").textContent = text;
  $("status").dataset.state = state;
}

export function connect() {
  const current = new WebSocket(endpoint ?? originSocketURL());
  socket = current;
  let opened = false;
  current.addEventListener("open", () => { opened = true; });
  // A node the page was sent to that does not answer: back to this page's own node
  // (which restores the session once that node's lease has run out).
  current.addEventListener("close", () => { if (!opened) endpoint = null; });
  socket.onmessage = (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch { return log(`unreadable: ${event.data}`, "error"); }
    receive(message);
  };
  socket.onclose = () => {
    socket = null;
    // Every command the server began was answered before its `bye` (PROTOCOL §4): one
    // still pending then never ran, and goes again on the resumed connection. Without
    // a `bye`, a lost reply leaves the command's fate unknown.
    for (const entry of pending.takeAll()) {
      if (entry.internal) continue;
      if (saidBye && !final) unanswered.push(entry);
      else log(`${entry.label}: the connection dropped before the reply; it may or may not have run`, "error");
    }
    saidBye = false;
    if (final) return status("disconnected", "disconnected");
    status("reconnecting…", "reconnecting");
    setTimeout(connect, backoff + Math.random() * backoff);
    backoff = Math.min(backoff * 2, 5000);
  };
}

// Sends `object` (a JSON command) with the next id; `options.label` names it in the
// log, `options.onReply` takes its reply instead of the log.
export function send(object, options) {
  const entry = { internal: false, quiet: false, ...options, object };
  if (!socket || socket.readyState !== WebSocket.OPEN) return log(`not connected: ${entry.label}`, "error");
  const id = pending.add(entry);
  socket.send(JSON.stringify({ id, ...object }));
  return id;
}

// A line typed in the console, sent in the JSON line form (`{"id", "line"}`) so its
// reply is matched to it by id like any other.
export function sendLine(line) {
  const shown = masked(line);
  if (!socket || socket.readyState !== WebSocket.OPEN) return log(`not connected: ${shown}`, "error");
  log(`> ${shown}`, "sent");
  let object = { line };
  if (line.startsWith("{")) {
    // A JSON command typed as it is: sent with this page's id in place of its own;
    // one that is not a JSON object goes as typed (the server says what is wrong).
    let parsed = null;
    try { parsed = JSON.parse(line); } catch { parsed = null; }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return socket.send(line);
    delete parsed.id;
    object = parsed;
  }
  const name = String(object.cmd ?? line.split(" ")[0]).toLowerCase();
  send(object, { label: shown, onReply: name === "end-others" ? endOthersReply : undefined });
}

export function endOthers() {
  log("> end-others", "sent");
  send({ cmd: "end-others" }, { label: "end-others", onReply: endOthersReply });
}

// Joining a session from the attach form: the page follows it once joined.
export function attachFromForm(args) {
  send({ cmd: "attach", args }, { label: "attach", internal: true, onReply: (message) => attachReply(message, args.token) });
}

function receive(message) {
  if ("rev" in message && message.type !== "reply") {
    store.setItem("viewline.rev", String(message.rev));
  }
  switch (message.type) {
    case "welcome": return welcome(message);
    case "reply": return reply(message);
    case "display":
      if (message.view === "connections") return showConnections(message.state.count);
      return show(message.view, message.state);
    case "alert": return showAlert(message, send);
    case "dismiss": return dismissAlert(message.id);
    case "bye":
      saidBye = true;
      log(`bye: ${message.reason}`, "error");
      // quit, ended, expired, evicted and revoked end the session for this page; after
      // shutdown or moved it lives on and the page reconnects and attaches (PROTOCOL §4).
      if (FINAL_BYE_CODES.includes(message.code) || (!message.code && FINAL_BYE_REASONS.includes(message.reason))) {
        final = true;
        forget();
      }
      return;
    default:
      log(JSON.stringify(message));
  }
}

// A link's `#attach=TOKEN`, taken out of the address bar at once (the fragment never
// reaches the server; it must not stay in history either).
function takeOffer() {
  const token = new URLSearchParams(location.hash.slice(1)).get("attach");
  if (token) window.history.replaceState(null, "", location.pathname);
  return token;
}

// A link followed in this tab: asked on the next welcome, like one opened afresh.
export function offerFromLink() {
  const token = takeOffer();
  if (token) { offered = token; socket?.close(); }
}

function welcome(message) {
  showConnections(1);  // a new connection: a `connections` display follows if it is not alone
  backoff = 250;
  if (offered && offered !== message.token && offered !== store.getItem("viewline.token")) {
    const token = offered;
    offered = null;
    askToJoin(token, (join) => join ? attach(token, undefined) : resume(message));
  } else {
    offered = null;
    resume(message);
  }
  if (!helpLoaded) send({ cmd: "help" }, { label: "help", internal: true, onReply: helpReply });
}

// This page's own session: the one it had (reload, reconnect) or the new one.
function resume(message) {
  const token = store.getItem("viewline.token");
  if (token && token !== message.token) {
    const lastRev = snapshotNext ? undefined : Number(store.getItem("viewline.rev") || 0);
    snapshotNext = false;
    attach(token, lastRev);
  } else {
    setToken(message.token);
    status("connected", "connected");
  }
}

function attach(token, lastRev) {
  const args = lastRev === undefined ? { token } : { token, lastRev };
  send({ cmd: "attach", args }, { label: "attach", internal: true, onReply: (message) => attachReply(message, null) });
  setToken(token);
}

function setToken(token) {
  store.setItem("viewline.token", token);
  $("token").textContent = token;
  $("share").href = `${location.pathname}#attach=${encodeURIComponent(token)}`;
}

// The `connections` view: how many places this session is open in, and a way to end
// the others (someone who got the token or a link drops out, and it stops working).
function showConnections(count) {
  const others = count - 1;
  $("connections").hidden = others < 1;
  $("connections-count").textContent = others < 1 ? "" : `Also open in ${others} other place${others === 1 ? "" : "s"}.`;
}

function forget() {
  store.removeItem("viewline.token");
  store.removeItem("viewline.rev");
}

function reply(message) {
  const entry = pending.take(message.re);
  if (entry?.onReply) return entry.onReply(message);
  if (message.ok && entry?.quiet) return;  // the view shows it; the log stays quiet
  const label = entry ? `${entry.label}: ` : "";
  if (message.ok) log(`${label}${JSON.stringify(message.result)}`);
  else log(`${label}${message.error.code}: ${message.error.message}`, "error");
}

function helpReply(message) {
  if (!message.ok) return log(`help: ${message.error.code}: ${message.error.message}`, "error");
  helpLoaded = true;
  renderCommands(message.result.commands || [], { send, attach: attachFromForm });
  for (const view of message.result.views || []) {
    if (Array.isArray(view.busy)) busyFields.set(view.name, new Set(view.busy));
    if (view.builtin) continue;  // the server's own (connections): shown in the header
    if (!views.has(view.name)) show(view.name, null);
  }
  send({ cmd: "state" }, { label: "state", internal: true, onReply: stateReply });  // every view as it is now
}

function stateReply(message) {
  if (!message.ok) return log(`state: ${message.error.code}: ${message.error.message}`, "error");
  if (!message.result.views) return;
  for (const [name, state] of Object.entries(message.result.views)) show(name, state);
}

// `end-others`' reply (its button or a typed line): the session has a new token, the
// one this page resumes with and shares now.
function endOthersReply(message) {
  if (!message.ok) return log(`end-others: ${message.error.code}: ${message.error.message}`, "error");
  setToken(message.result.token);
  log(`ended ${message.result.ended} other connection${message.result.ended === 1 ? "" : "s"}; the session has a new token`);
}

// An `attach`'s reply: this page's own session resumed (`fromForm` null), or the
// session the person chose in the attach form (its token).
function attachReply(message, fromForm) {
  if (fromForm !== null && !message.ok) return log(`attach: ${message.error.code}: ${message.error.message}`, "error");
  if (message.ok) {
    if (fromForm !== null) setToken(fromForm);  // the page follows the session it joined
    hops = 0;
    showConnections(1);
    if (message.result.snapshot) clearViews();
    status("connected", "connected");
    log(`attached (rev ${message.result.rev}, ${message.result.replayed} replayed)`);
    for (const entry of unanswered.splice(0)) {
      log(`${entry.label}: had not run; sent again`);
      send(entry.object, entry);
    }
    return;
  }
  // The session lives on another node that serves a page: follow it there over
  // WebSocket (that node must allow this page's origin: --web-origin).
  if (message.error.code === "moved" && message.error.web && hops < 3) {
    hops += 1;
    const target = new URL("ws", message.error.web);
    target.protocol = target.protocol === "https:" ? "wss:" : "ws:";
    endpoint = target.href;
    snapshotNext = true;
    log(`moved: the session lives on ${message.error.web}; following it`);
    status("reconnecting…", "reconnecting");
    backoff = 0;
    socket.close();  // reconnects to `endpoint` and attaches with the same token
    return;
  }
  // The session is gone (or lives on another node): carry on with this connection's own.
  log(`attach: ${message.error.code}: ${message.error.message}`, "error");
  for (const entry of unanswered.splice(0)) log(`${entry.label}: not sent again: the session is gone`, "error");
  forget();
  final = false;
  status("connected", "connected");
  socket.close();  // reconnects with a fresh session
}
