// The console's log, and how a typed line shows in it: each argument `help` declares
// `secure` (a password) as dots.
import { $ } from "./dom.js";

let commandTable = new Map();   // name → declaration from help

// A server before protocol 1.2 names its arguments only: a name like this is a secret.
const SECRET_BEFORE_1_2 = /password|secret/i;

export function learnCommands(commands) {
  commandTable = new Map(commands.map((command) => [command.name, command]));
}

// Whether argument `index` of `command` (a declaration from help) is a secret.
export function isSecret(command, index) {
  if (command.arguments) return Boolean(command.arguments[index]?.secure);
  return SECRET_BEFORE_1_2.test(command.args[index] ?? "");
}

// The line as the log shows it: secret arguments as dots.
export function masked(line) {
  const words = line.split(" ");
  const command = commandTable.get(words[0]?.toLowerCase());
  if (!command) return line;
  for (let index = 1; index < words.length; index += 1) {
    if (isSecret(command, index - 1) && words[index]) words[index] = "••••";
  }
  return words.join(" ");
}

export function log(text, kind = "") {
  const item = document.createElement("li");
  item.textContent = text;
  if (kind) item.className = kind;
  const list = $("log");
  list.append(item);
  while (list.childElementCount > 500) list.firstElementChild.remove();
  list.scrollTop = list.scrollHeight;
}
