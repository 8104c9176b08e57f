// Viewline in the browser: renders any server's view-models from `help` and the
// events it sends; no per-app code. Every server string is inserted as text
// (textContent only: never parsed as markup). Modules along the page's seams:
// connection.js (the socket, resuming the session, replies matched by id),
// forms.js (`help` to forms), draw.js (drawing by shape), dialogs.js (alerts and the
// join question), log.js (the console's log, secrets from `help`'s `secure`).
import { $ } from "./dom.js";
import { connect, endOthers, offerFromLink, sendLine } from "./connection.js";

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

$("end-others").addEventListener("click", endOthers);

const history = [];
let historyIndex = 0;

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

window.addEventListener("hashchange", offerFromLink);

connect();
