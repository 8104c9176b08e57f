// Client for Viewline, the remote view-model server (wire protocol v1).
// Node 18+, no dependencies: `net`, `events`, `readline`.
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import readline from 'node:readline';
import { ViewlineError } from './errors.mjs';
import { parseInline, quote, split, COMMANDS } from './inline.mjs';

export { ViewlineError, parseInline, quote, split, COMMANDS };

/**
 * One connection, one session. Replies are matched to commands by id; events are
 * queued for `events()` and `waitFor()`; `views` keeps each view's latest state.
 *
 *   const vl = await Client.connect({ port: 7878 });
 *   await vl.command('search thai food');
 *   const state = await vl.waitForDisplay('search', (s) => !s.loading);
 */
export class Client extends EventEmitter {
  #socket;
  #nextId = 0;
  #pending = new Map();
  #queue = [];
  #waiters = [];
  #onMessage;

  constructor(socket, { onMessage } = {}) {
    super();
    this.#socket = socket;
    this.#onMessage = onMessage;
    /** The latest state of each view displayed so far. */
    this.views = {};
    /** The presented alert, or null. */
    this.alert = null;
    this.closed = false;
    this.welcome = null;
  }

  static async connect({ host = '127.0.0.1', port = 7878, onMessage } = {}) {
    const socket = net.createConnection({ host, port });
    socket.setNoDelay(true);
    await once(socket, 'connect');
    const client = new Client(socket, { onMessage });
    const welcome = new Promise((resolve, reject) => {
      client.once('welcome', resolve);
      socket.once('error', reject);
    });
    client.#listen();
    client.welcome = await welcome;
    client.session = client.welcome.session;
    client.token = client.welcome.token;
    return client;
  }

  #listen() {
    const lines = readline.createInterface({ input: this.#socket, crlfDelay: Infinity });
    lines.on('line', (line) => this.#receive(JSON.parse(line)));
    this.#socket.on('close', () => {
      this.closed = true;
      for (const { reject } of this.#pending.values()) reject(new ViewlineError('connection_closed', 'connection closed'));
      this.#pending.clear();
      for (const waiter of this.#waiters.splice(0)) waiter.reject(new ViewlineError('connection_closed', 'connection closed'));
      this.emit('close');
    });
    this.#socket.on('error', (error) => this.emit('socketError', error));
  }

  #receive(message) {
    this.#observe(message);
    this.#onMessage?.(message);
    if (message.type === 'welcome') return this.emit('welcome', message);
    if (message.type === 'reply') {
      const pending = this.#pending.get(message.re);
      if (pending) {
        this.#pending.delete(message.re);
        if (message.ok) pending.resolve(message.result);
        else pending.reject(new ViewlineError(message.error.code, message.error.message, message));
      }
      return;
    }
    this.emit('event', message);
    if (this.#waiters.length) {
      // A waiter is active: the event is either its match or passes it by.
      const index = this.#waiters.findIndex((w) => w.predicate(message));
      if (index >= 0) this.#waiters.splice(index, 1)[0].resolve(message);
    } else {
      this.#queue.push(message);
    }
  }

  #observe(message) {
    if (message.type === 'display') this.views[message.view] = message.state;
    else if (message.type === 'alert') this.alert = message;
    else if (message.type === 'dismiss' && this.alert?.id === message.id) this.alert = null;
    else if (message.type === 'reply' && message.ok && message.result?.answer && message.result.alert === this.alert?.id) this.alert = null;
  }

  /**
   * Runs a command and resolves with its `result` (rejects with `ViewlineError`).
   * `command('search thai food')` or `command('search', { query: 'thai food' })`;
   * either way it is sent in the JSON form with a fresh id.
   */
  command(cmd, args) {
    let name = cmd.trim();
    if (args === undefined && name.includes(' ')) ({ cmd: name, args } = parseInline(name));
    return this.#request(name, args ?? {});
  }

  #request(cmd, args) {
    if (this.closed) return Promise.reject(new ViewlineError('connection_closed', 'connection closed'));
    const id = ++this.#nextId;
    const line = { id, cmd };
    if (Object.keys(args).length) line.args = args;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#socket.write(JSON.stringify(line) + '\n');
    });
  }

  /** Sends one raw line (inline or JSON); its reply is not tracked. */
  sendLine(line) {
    this.#socket.write(line + '\n');
  }

  /** Answers the presented alert (or `alert`) with its confirm action and fields. */
  confirm(fields = undefined, alert = undefined) {
    const args = { alert: alert ?? this.#presented() };
    if (fields && Object.keys(fields).length) args.fields = fields;
    return this.#request('confirm', args);
  }

  /** Answers the presented alert (or `alert`) with its cancel action. */
  cancel(alert = undefined) {
    return this.#request('cancel', { alert: alert ?? this.#presented() });
  }

  /** Resolves once the session runs no background work (the `wait` command). */
  settle(timeoutMs = 10000) {
    return this.#request('wait', { timeout: timeoutMs });
  }

  #presented() {
    if (!this.alert) throw new ViewlineError('no_alert', 'no alert is presented');
    return this.alert.id;
  }

  /**
   * Resolves with the next event (queued or arriving) matching `predicate`. Events
   * are consumed in order: those before the match are dropped, so successive waits
   * move forward through the session's history.
   */
  waitFor(predicate, { timeout = 10000, what = 'event' } = {}) {
    while (this.#queue.length) {
      const event = this.#queue.shift();
      if (predicate(event)) return Promise.resolve(event);
    }
    if (this.closed) return Promise.reject(new ViewlineError('connection_closed', 'connection closed'));
    return new Promise((resolve, reject) => {
      const waiter = { predicate, resolve, reject };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new ViewlineError('client_timeout', `timed out waiting for ${what}`));
      }, timeout);
      waiter.resolve = (m) => { clearTimeout(timer); resolve(m); };
      waiter.reject = (e) => { clearTimeout(timer); reject(e); };
      this.#waiters.push(waiter);
    });
  }

  /** Resolves with the state of the next display of `view` matching `predicate`. */
  async waitForDisplay(view, predicate = () => true, options = {}) {
    const event = await this.waitFor((m) => m.type === 'display' && m.view === view && predicate(m.state), { what: `a display of ${view}`, ...options });
    return event.state;
  }

  waitForAlert(options = {}) {
    return this.waitFor((m) => m.type === 'alert', { what: 'an alert', ...options });
  }

  /** Every event in order, as an async iterator, until the connection closes. */
  async *events() {
    while (true) {
      try {
        yield await this.waitFor(() => true, { timeout: 2 ** 31 - 1 });
      } catch (error) {
        if (error.code === 'connection_closed') return;
        throw error;
      }
    }
  }

  close() {
    this.#socket.end();
    this.#socket.destroy();
  }
}
