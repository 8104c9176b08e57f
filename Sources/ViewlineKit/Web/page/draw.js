// Drawing by shape: each view's card and its state, whatever the view-model (no
// per-app code): a list of records as a table, an object as a description list, a
// busy flag as progress.
import { $, text } from "./dom.js";

// A view that declares its busy flags (help's `busy`) shows progress for those alone;
// one that declares none gets this guess from the names.
const BUSY = /^(loading|syncing|saving|busy|pending|refreshing|fetching|working)$|ing$/i;
export const busyFields = new Map();   // view name → Set of its declared busy flags
export const views = new Map();        // view name → latest state
const dirty = new Set();               // views to redraw on the next animation frame

// A view's new state, drawn on the next animation frame.
export function show(name, state) {
  views.set(name, state);
  dirty.add(name);
  scheduleRender();
}

// Every view's state comes again (a snapshot): the cards (and their commands) stay.
export function clearViews() {
  views.clear();
  for (const content of document.querySelectorAll("section.view .content")) content.replaceChildren();
}

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
export function card(name) {
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
    const indicator = document.createElement("span");
    indicator.className = "busy";
    const bar = document.createElement("progress");
    bar.setAttribute("aria-label", key);
    indicator.append(bar, text("span", key));
    return indicator;
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
