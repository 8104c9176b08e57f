// Viewline in the browser: renders any server's view-models from `help` and the
// events it sends; no per-app code. Every server string is inserted as text
// (textContent only: never parsed as markup).

const $ = (id) => document.getElementById(id);
const store = window.sessionStorage;
// A view that declares its busy flags (help's `busy`) shows progress for those alone;
// one that declares none gets this guess from the names.
const BUSY = /^(loading|syncing|saving|busy|pending|refreshing|fetching|working)$|ing$/i;
const busyFields = new Map();   // view name → Set of its declared busy flags
// Which `bye` ends the session for this page (PROTOCOL §4; bye.schema.json's lists,
// which a test compares with these).
const FINAL_BYE_CODES = ["quit", "ended", "expired", "evicted", "revoked"];
const FINAL_BYE_REASONS = ["client quit", "session ended", "session expired", "session evicted"];

let socket = null;
let nextId = 1;
let helpLoaded = false;
let final = false;              // quit or session ended: no reconnecting
let backoff = 250;
let attaching = false;
let endpoint = null;            // another node's /ws, after `moved` named its page
let hops = 0;                   // `moved` followed in a row (at most 3)
let snapshotNext = false;       // attach without a rev next (the rev kept is another session's)
let offered = takeOffer();      // a token from an `#attach=` link, until the person answers
let formAttachToken = null;     // the token the attach form sent last
const views = new Map();        // view name → latest state
const dirty = new Set();        // views to redraw on the next animation frame
const pending = new Map();      // command id → {label, object}: the log's label, and what was sent
let unanswered = [];            // commands a `bye` came before the reply of: they never ran, and go again once attached
let saidBye = false;            // the server said `bye` on this connection
const history = [];
let historyIndex = 0;

// ---------------------------------------------------------------- connection

function status(text, state) {
  $("status").textContent = text;
  $("status").dataset.state = state;
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const current = new WebSocket(endpoint ?? `${scheme}://${location.host}/ws`);
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
    for (const { label, object } of pending.values()) {
      if (INTERNAL.has(label)) continue;
      if (saidBye && !final) unanswered.push({ label, object });
      else log(`${label}: the connection dropped before the reply; it may or may not have run`, "error");
    }
    pending.clear();
    saidBye = false;
    if (final) return status("disconnected", "disconnected");
    status("reconnecting…", "reconnecting");
    setTimeout(connect, backoff + Math.random() * backoff);
    backoff = Math.min(backoff * 2, 5000);
  };
}

function send(object, label) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return log(`not connected: ${label}`, "error");
  const id = nextId++;
  pending.set(id, { label, object });
  socket.send(JSON.stringify({ id, ...object }));
  return id;
}

// What the page sends for itself (not a person's command): never sent again.
const INTERNAL = new Set(["help", "state", "attach", "attach (form)"]);

const SECRET = /password|secret/i;
let commandTable = new Map();   // name → declaration from help

// The line as the log shows it: secret arguments (a password) as dots.
function masked(line) {
  const words = line.split(" ");
  const command = commandTable.get(words[0]);
  if (!command) return line;
  command.args.forEach((arg, index) => {
    if (SECRET.test(arg) && words[index + 1]) words[index + 1] = "••••";
  });
  return words.join(" ");
}

function sendLine(line) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return log(`not connected: ${masked(line)}`, "error");
  log(`> ${masked(line)}`, "sent");
  socket.send(line);
}

// ---------------------------------------------------------------- messages

function receive(message) {
  if ("rev" in message && message.type !== "reply") {
    store.setItem("viewline.rev", String(message.rev));
  }
  switch (message.type) {
    case "welcome": return welcome(message);
    case "reply": return reply(message);
    case "display":
      if (message.view === "connections") return showConnections(message.state.count);
      views.set(message.view, message.state);
      dirty.add(message.view);
      return scheduleRender();
    case "alert": return showAlert(message);
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

function welcome(message) {
  showConnections(1);  // a new connection: a `connections` display follows if it is not alone
  backoff = 250;
  if (offered && offered !== message.token && offered !== store.getItem("viewline.token")) {
    // Never joined silently: whoever made the link can see and drive the session it
    // names (session fixation), so the person decides, and staying is the default.
    const token = offered;
    offered = null;
    askToJoin(token, (join) => join ? attach(token, undefined) : resume(message));
  } else {
    offered = null;
    resume(message);
  }
  if (!helpLoaded) send({ cmd: "help" }, "help");
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
  attaching = true;
  const args = lastRev === undefined ? { token } : { token, lastRev };
  send({ cmd: "attach", args }, "attach");
  setToken(token);
}

function askToJoin(token, answered) {
  const dialog = $("join");
  $("join-session").textContent = `${token.slice(0, 8)}…`;
  const done = (join) => {
    dialog.close();
    answered(join);
  };
  $("join-yes").onclick = () => done(true);
  $("join-no").onclick = () => done(false);
  dialog.oncancel = (event) => { event.preventDefault(); done(false); };  // Escape stays
  dialog.showModal();
  $("join-no").focus();
}

function setToken(token) {
  store.setItem("viewline.token", token);
  $("token").textContent = token;
  $("share").href = `${location.pathname}#attach=${encodeURIComponent(token)}`;
}

// `end-others`' reply, however it was sent (its button, its form, a typed line).
function isEndOthersResult(result) {
  return result && typeof result.token === "string" && typeof result.ended === "number" && Object.keys(result).length === 2;
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
  const label = pending.get(message.re)?.label;
  pending.delete(message.re);
  if (label === "help" && message.ok) {
    helpLoaded = true;
    renderCommands(message.result.commands || []);
    for (const view of message.result.views || []) {
      if (Array.isArray(view.busy)) busyFields.set(view.name, new Set(view.busy));
      if (view.builtin) continue;  // the server's own (connections): shown in the header
      if (!views.has(view.name)) { views.set(view.name, null); dirty.add(view.name); }
    }
    scheduleRender();
    send({ cmd: "state" }, "state");  // every view as it is now
    return;
  }
  if (label === "state" && message.ok && message.result.views) {
    for (const [name, state] of Object.entries(message.result.views)) {
      views.set(name, state);
      dirty.add(name);
    }
    scheduleRender();
    return;
  }
  if (label === "attach (form)" && message.ok) {
    // The person chose to join this session: the page follows it from now on.
    if (formAttachToken) setToken(formAttachToken);
  }
  if (label === "attach (form)" && !message.ok) {
    return log(`attach: ${message.error.code}: ${message.error.message}`, "error");
  }
  if (label === "attach" || label === "attach (form)") {
    attaching = false;
    if (message.ok) {
      hops = 0;
      showConnections(1);
      if (message.result.snapshot) {
        // Every view's state comes again; the cards (and their commands) stay.
        views.clear();
        for (const content of document.querySelectorAll("section.view .content")) content.replaceChildren();
      }
      status("connected", "connected");
      log(`attached (rev ${message.result.rev}, ${message.result.replayed} replayed)`);
      for (const { label: again, object } of unanswered.splice(0)) {
        log(`${again}: had not run; sent again`);
        send(object, again);
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
    for (const { label: dropped } of unanswered.splice(0)) log(`${dropped}: not sent again: the session is gone`, "error");
    forget();
    final = false;
    status("connected", "connected");
    socket.close();  // reconnects with a fresh session
    return;
  }
  if (message.ok && label && label.endsWith("(live)")) return;  // the view shows it; the log stays quiet
  if (message.ok && isEndOthersResult(message.result)) {
    // The session has a new token: the one this page resumes with and shares now.
    setToken(message.result.token);
    return log(`ended ${message.result.ended} other connection${message.result.ended === 1 ? "" : "s"}; the session has a new token`);
  }
  if (message.ok) {
    log(`${label ? label + ": " : ""}${JSON.stringify(message.result)}`);
  } else {
    log(`${label ? label + ": " : ""}${message.error.code}: ${message.error.message}`, "error");
  }
}

// ---------------------------------------------------------------- the log

function log(text, kind = "") {
  const item = document.createElement("li");
  item.textContent = text;
  if (kind) item.className = kind;
  const list = $("log");
  list.append(item);
  while (list.childElementCount > 500) list.firstElementChild.remove();
  list.scrollTop = list.scrollHeight;
}

// ---------------------------------------------------------------- views

let frameRequested = false;
function scheduleRender() {
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(() => {
    frameRequested = false;
    for (const name of dirty) renderView(name);
    dirty.clear();
  });
}

// A view's card: its heading, its commands (drawn from `help`: each command sits in
// the card of the view-model that declares it), its state, and a paging command under
// the list. Made on first use: `help` may name a view before it is displayed.
function card(name) {
  const id = `view-${name.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  let section = $(id);
  if (!section) {
    section = document.createElement("section");
    section.id = id;
    section.className = "view";
    const heading = document.createElement("h2");
    heading.id = `${id}-heading`;
    heading.textContent = name;
    section.setAttribute("aria-labelledby", heading.id);
    const controls = document.createElement("div");
    controls.className = "controls";
    const content = document.createElement("div");
    content.className = "content";
    const paging = document.createElement("div");
    paging.className = "paging";
    section.append(heading, controls, content, paging);
    $("views").append(section);
  }
  return section;
}

function renderView(name) {
  const section = card(name);
  const state = views.get(name);
  section.querySelector(".content").replaceChildren(renderValue(state, "", busyFields.get(name)));
  // "Load more" only while there is more (a state without `hasMore` always shows it).
  section.querySelector(".paging").hidden = Boolean(state && state.hasMore === false);
}

function renderValue(value, key = "", busy = null) {
  if (Array.isArray(value)) {
    if (value.length === 0) return text("span", "none", "empty");
    if (value.every((item) => item && typeof item === "object" && !Array.isArray(item))) return table(value);
    const list = document.createElement("ul");
    for (const item of value) {
      const entry = document.createElement("li");
      entry.append(renderValue(item));
      list.append(entry);
    }
    return list;
  }
  if (value && typeof value === "object") {
    const list = document.createElement("dl");
    for (const [name, item] of Object.entries(value)) {
      list.append(text("dt", name));
      const cell = document.createElement("dd");
      cell.append(renderValue(item, name, busy));
      list.append(cell);
    }
    return list;
  }
  if (typeof value === "boolean" && (busy ? busy.has(key) : BUSY.test(key))) {
    if (!value) return text("span", "no");
    const busy = document.createElement("span");
    busy.className = "busy";
    const bar = document.createElement("progress");
    bar.setAttribute("aria-label", key);
    busy.append(bar, text("span", key));
    return busy;
  }
  if (value === null || value === undefined) return text("span", "—", "empty");
  if (typeof value === "boolean") return text("span", value ? "yes" : "no");
  return text("span", String(value));
}

function table(rows) {
  const keys = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const element = document.createElement("table");
  const head = element.createTHead().insertRow();
  for (const key of keys) {
    const cell = document.createElement("th");
    cell.scope = "col";
    cell.textContent = key;
    head.append(cell);
  }
  const body = element.createTBody();
  for (const row of rows) {
    const line = body.insertRow();
    for (const key of keys) {
      const value = row[key];
      const cell = line.insertCell();
      if (typeof value === "number") cell.className = "number";
      cell.append(value && typeof value === "object" ? renderValue(value, key) : text("span", value ?? ""));
    }
  }
  return element;
}

function text(tag, content, className = "") {
  const element = document.createElement(tag);
  element.textContent = String(content);
  if (className) element.className = className;
  return element;
}

// ---------------------------------------------------------------- commands

// A live command (`help`'s `live: true`, a search box) goes out as the person types,
// 150 ms after the last keystroke; the view-model lets the latest win, so results
// older than the last query never follow it. Enter still sends at once.
const LIVE_DELAY_MS = 150;

function followTyping(form, command, arg) {
  const input = form.elements[arg.name];
  let timer = null;
  let lastSent = null;
  const sendNow = () => {
    clearTimeout(timer);
    const value = arg.kind === "text" ? input.value : input.value.trim();
    // An empty box sends nothing for a required argument (a search for nothing), and
    // the command without it for an optional one (a filter cleared: show everything).
    if (value === lastSent || (value === "" && arg.required && !arg.allowsEmpty) || !input.checkValidity()) return;
    lastSent = value;
    const args = value === "" && !arg.required ? {} : { [arg.name]: value };
    send({ cmd: command.name, args }, `${command.name} (live)`);
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(sendNow, LIVE_DELAY_MS);
  });
  form.addEventListener("submit", () => { clearTimeout(timer); lastSent = null; });
}

function renderCommands(commands) {
  commandTable = new Map(commands.map((command) => [command.name, command]));
  const plain = $("commands");
  const admin = $("admin");
  plain.replaceChildren();
  admin.replaceChildren();
  for (const section of document.querySelectorAll("section.view")) {
    section.querySelector(".controls").replaceChildren();
    section.querySelector(".paging").replaceChildren();
  }
  // A view's main action (help's `primary`, 1.3) comes first in its card, as the one
  // filled button; the view's other commands are outlined beside it.
  const withPrimary = new Set(commands.filter((command) => command.primary && command.view).map((command) => command.view));
  for (const command of commands) {
    if (["confirm", "cancel"].includes(command.name)) continue;  // the alert dialog answers
    const form = document.createElement("form");
    form.className = "command";
    form.setAttribute("aria-label", command.name);
    form.title = command.summary;
    // Each argument as `help` declares it (protocol 1.2): its kind, bounds, whether it
    // is required or secret. A server before 1.2 lists names only: words, then.
    const declared = command.arguments || command.args.map((name) => ({ name, kind: "word", required: false }));
    const inputs = declared.filter((arg) => arg.kind !== "fields");
    for (const arg of inputs) {
      const label = document.createElement("label");
      label.textContent = arg.name;
      const input = document.createElement("input");
      input.name = arg.name;
      input.spellcheck = false;
      // Unique on the page, as a screen reader lists controls: "search query", "slowlog
      // count", "help command" (the command line alone is "command").
      input.setAttribute("aria-label", `${command.name} ${arg.name}`);
      if (arg.summary) {
        // What the argument is (help's `summary`): a hint in the box, its description to a screen reader.
        input.placeholder = arg.summary;
        input.title = arg.summary;
      }
      if (arg.secure || (!command.arguments && SECRET.test(arg.name))) {
        input.type = "password";
        input.autocomplete = "current-password";
      } else if (arg.kind === "integer") {
        input.type = "number";
        input.step = "1";
        input.min = String(arg.minimum);
        if (arg.maximum !== undefined) input.max = String(arg.maximum);
      }
      if (arg.required && !arg.allowsEmpty) input.required = true;
      label.append(input);
      form.append(label);
    }
    const button = text("button", command.paging ? "Load more" : command.name);
    button.type = "submit";
    if (command.primary) button.classList.add("primary");
    else if (withPrimary.has(command.view) && !command.paging && !command.admin) button.classList.add("secondary");
    form.append(button);
    if (command.live && inputs.length === 1) followTyping(form, command, inputs[0]);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;  // required and bounds, checked before sending
      // Sent as JSON with typed values: nothing is split on spaces or quotes again,
      // and an empty optional is left out by name (it never shifts the next one).
      const args = {};
      const shown = [command.name];
      for (const arg of inputs) {
        const input = form.elements[arg.name];
        const raw = arg.secure || arg.kind === "text" ? input.value : input.value.trim();
        if (raw === "" && !(arg.required && arg.allowsEmpty)) continue;
        args[arg.name] = arg.kind === "integer" ? Number(raw) : raw;
        shown.push(arg.secure || input.type === "password" ? "••••" : raw);
      }
      log(`> ${shown.join(" ")}`, "sent");
      if (command.name === "attach") formAttachToken = args.token;
      send({ cmd: command.name, args }, command.name === "attach" ? "attach (form)" : command.name);
      for (const arg of inputs) if (form.elements[arg.name].type === "password") form.elements[arg.name].value = "";
    });
    // Where it is drawn: in its view's card (a paging command under the list), the
    // server's own commands in the session menu, admin commands in their own section.
    const place = command.admin ? admin
      : command.view ? card(command.view).querySelector(command.paging ? ".paging" : ".controls")
      : plain;
    if (command.primary && place !== plain && place !== admin) place.prepend(form);
    else place.append(form);
  }
  $("admin-section").hidden = admin.childElementCount === 0;
}

// The console: any line, for what the cards do not offer. Collapsed by default on a
// narrow screen; `/` (outside a text box) opens it and puts the cursor there.
function showConsole(shown) {
  $("console-body").hidden = !shown;
  $("console-toggle").setAttribute("aria-expanded", String(shown));
  $("console-toggle").textContent = shown ? "Hide" : "Show";
}
showConsole(!window.matchMedia("(max-width: 48rem)").matches);
$("console-toggle").addEventListener("click", () => showConsole($("console-body").hidden));
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target.isContentEditable) return;
  if (document.querySelector("dialog[open]")) return;
  event.preventDefault();
  showConsole(true);
  $("line").focus();
});

$("end-others").addEventListener("click", () => {
  log("> end-others", "sent");
  send({ cmd: "end-others" }, "end-others");
});

$("line-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("line");
  const line = input.value.trim();
  if (!line) return;
  history.push(line);
  historyIndex = history.length;
  input.value = "";
  sendLine(line);
});

$("line").addEventListener("keydown", (event) => {
  if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
  event.preventDefault();
  historyIndex = Math.max(0, Math.min(history.length, historyIndex + (event.key === "ArrowUp" ? -1 : 1)));
  $("line").value = history[historyIndex] ?? "";
});

// ---------------------------------------------------------------- alerts

let currentAlert = null;
let focusBeforeAlert = null;     // where the keyboard was: it goes back there after the alert

function showAlert(alert) {
  currentAlert = alert;
  const dialog = $("alert");
  dialog.dataset.alert = alert.id;
  $("alert-title").textContent = alert.title;
  $("alert-message").textContent = alert.message;
  const fields = $("alert-fields");
  fields.replaceChildren();
  for (const field of alert.fields || []) {
    const label = text("label", field.label);
    const input = document.createElement("input");
    input.name = field.name;
    input.type = field.secure ? "password" : "text";
    input.autocomplete = field.secure ? "current-password" : "username";
    label.append(input);
    fields.append(label);
  }
  const actions = $("alert-actions");
  actions.replaceChildren();
  const ordered = [...alert.actions].sort((a, b) => (a.role === "cancel" ? -1 : 0) - (b.role === "cancel" ? -1 : 0));
  for (const action of ordered) {
    const button = text("button", action.label, action.role === "cancel" ? "secondary" : "");
    // The confirm button submits the form, so Enter in a field confirms.
    button.type = action.role === "confirm" ? "submit" : "button";
    if (action.role !== "confirm") button.addEventListener("click", () => answer(action.role));
    actions.append(button);
  }
  if (!dialog.open) {
    focusBeforeAlert = document.activeElement;
    dialog.showModal();
  }
  (fields.querySelector("input") || actions.querySelector("button:not(.secondary)") || actions.querySelector("button"))?.focus();
}

function answer(role) {
  if (!currentAlert) return;
  const alert = currentAlert;
  if (role === "confirm") {
    const fields = {};
    for (const input of $("alert-fields").querySelectorAll("input")) fields[input.name] = input.value;
    send({ cmd: "confirm", args: { alert: alert.id, fields } }, "confirm");
  } else {
    send({ cmd: "cancel", args: { alert: alert.id } }, "cancel");
  }
}

function dismissAlert(id) {
  if (!currentAlert || currentAlert.id !== id) return;
  currentAlert = null;
  $("alert").close();
  if (focusBeforeAlert?.isConnected) focusBeforeAlert.focus();
  focusBeforeAlert = null;
}

$("alert").addEventListener("cancel", (event) => {
  // Escape: cancels when the alert has a cancel action; the dialog stays until `dismiss`.
  event.preventDefault();
  if (currentAlert?.actions.some((action) => action.role === "cancel")) answer("cancel");
});

$("alert-form").addEventListener("submit", (event) => {
  event.preventDefault();  // Enter confirms
  answer("confirm");
});

window.addEventListener("hashchange", () => {
  // A link followed in this tab: asked on the next welcome, like one opened afresh.
  const token = takeOffer();
  if (token) { offered = token; socket?.close(); }
});

connect();
