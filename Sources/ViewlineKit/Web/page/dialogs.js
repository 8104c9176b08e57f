// The two dialogs: a server's alert (its fields, its confirm and cancel actions,
// answered with `confirm` or `cancel`) and the question before joining a session a
// link names.
import { $, text } from "./dom.js";

let currentAlert = null;
let sendAnswer = null;           // how the answer goes out (the connection's send)
let focusBeforeAlert = null;     // where the keyboard was: it goes back there after the alert

// Shows `alert`; its answer goes out through `send` (the connection's).
export function showAlert(alert, send) {
  currentAlert = alert;
  sendAnswer = send;
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
    sendAnswer({ cmd: "confirm", args: { alert: alert.id, fields } }, { label: "confirm" });
  } else {
    sendAnswer({ cmd: "cancel", args: { alert: alert.id } }, { label: "cancel" });
  }
}

export function dismissAlert(id) {
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

// Never joined silently: whoever made the link can see and drive the session it names
// (session fixation), so the person decides, and staying is the default.
export function askToJoin(token, answered) {
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
