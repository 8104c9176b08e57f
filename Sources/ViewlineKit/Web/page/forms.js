// `help` to forms: each command a form in the card of the view-model that declares
// it (the server's own in the session menu, admin commands in their own section),
// each argument an input as declared (its kind, bounds, whether required or secret),
// sent as JSON with typed values.
import { $, text } from "./dom.js";
import { card } from "./draw.js";
import { isSecret, learnCommands, log } from "./log.js";

// A live command (`help`'s `live: true`, a search box) goes out as the person types,
// 150 ms after the last keystroke; the view-model lets the latest win, so results
// older than the last query never follow it. Enter still sends at once.
const LIVE_DELAY_MS = 150;

function followTyping(form, command, arg, send) {
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
    // The view shows what it did: the log stays quiet about its reply.
    send({ cmd: command.name, args }, { label: command.name, quiet: true });
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(sendNow, LIVE_DELAY_MS);
  });
  form.addEventListener("submit", () => { clearTimeout(timer); lastSent = null; });
}

// Draws `commands` as forms; they go out through `connection.send`, and `attach`'s
// through `connection.attach` (the page follows the session it joins).
export function renderCommands(commands, connection) {
  const { send, attach } = connection;
  learnCommands(commands);
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
    inputs.forEach((arg, index) => {
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
      if (isSecret(command, declared.indexOf(arg))) {
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
    });
    const button = text("button", command.paging ? "Load more" : command.name);
    button.type = "submit";
    if (command.primary) button.classList.add("primary");
    else if (withPrimary.has(command.view) && !command.paging && !command.admin) button.classList.add("secondary");
    form.append(button);
    if (command.live && inputs.length === 1) followTyping(form, command, inputs[0], send);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;  // required and bounds, checked before sending
      // Sent as JSON with typed values: nothing is split on spaces or quotes again,
      // and an empty optional is left out by name (it never shifts the next one).
      const args = {};
      const shown = [command.name];
      for (const arg of inputs) {
        const input = form.elements[arg.name];
        const secret = input.type === "password";
        const raw = secret || arg.kind === "text" ? input.value : input.value.trim();
        if (raw === "" && !(arg.required && arg.allowsEmpty)) continue;
        args[arg.name] = arg.kind === "integer" ? Number(raw) : raw;
        shown.push(secret ? "••••" : raw);
      }
      log(`> ${shown.join(" ")}`, "sent");
      // Joining a session from its form: the page follows that session from now on.
      if (command.name === "attach") attach(args);
      else send({ cmd: command.name, args }, { label: command.name });
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
