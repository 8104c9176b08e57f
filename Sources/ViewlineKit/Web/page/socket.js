// What every page of the server shares about its socket: where this origin's /ws
// is, and the commands sent on it waiting for their replies, each matched to its
// command by id (PROTOCOL §3). No side effect on import.

// This origin's WebSocket endpoint (wss: on a page served over TLS).
export function originSocketURL() {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
}

// The commands sent and not answered yet: what `add` is given comes back from
// `take` with the reply's `re`.
export class Requests {
  #next = 1;
  #waiting = new Map();

  // Keeps `entry` under the next id, which the command is sent with.
  add(entry) {
    const id = this.#next++;
    this.#waiting.set(id, entry);
    return id;
  }

  // The entry waiting for the reply to `id` (no longer waiting), or undefined.
  take(id) {
    const entry = this.#waiting.get(id);
    this.#waiting.delete(id);
    return entry;
  }

  // Every entry still waiting, in the order sent; none waits afterwards (the
  // connection closed).
  takeAll() {
    const entries = [...this.#waiting.values()];
    this.#waiting.clear();
    return entries;
  }
}
