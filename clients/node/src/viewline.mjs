// Client for Viewline, the remote view-model server (wire protocol v1).
// Node 18+, no dependencies: `net`, `events`, `readline`.
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
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
  #options;
  #ended = false;
  #resuming = null;

  constructor(socket, { onMessage, host = '127.0.0.1', port = 7878, reconnect = false, reconnectAttempts = 8, tls: secure = null, nodes = [] } = {}) {
    super();
    this.#socket = socket;
    this.#onMessage = onMessage;
    const others = nodes.map(parseAddress).filter((node) => node && !(node.host === host && node.port === port));
    this.#options = { host, port, reconnect, reconnectAttempts, tls: secure, nodes: [{ host, port }, ...others] };
    /** The highest `rev` seen: where a resumed session picks up. */
    this.rev = 0;
    /** How many times the connection dropped and the session was resumed. */
    this.resumed = 0;
    /** The latest state of each view displayed so far. */
    this.views = {};
    /** The presented alert, or null. */
    this.alert = null;
    this.closed = false;
    this.welcome = null;
  }

  /**
   * Connects and reads the welcome. With `reconnect: true`, a dropped connection is
   * reopened (with backoff) and the session resumed with `attach` from the last
   * `rev` seen: missed events arrive again, nothing twice. Commands whose replies
   * were lost in the drop reject with `connection_closed` (they may or may not
   * have run); waits for events carry on.
   *
   * `tls: true` (or `tls: { ca }` with a PEM string or Buffer to trust) connects over
   * TLS; the server's certificate is verified.
   *
   * In a cluster, `attach` follows `moved` to the node that owns the session, and
   * `nodes` (`['host:port', …]`) lists the other nodes a reconnect tries when this
   * one is gone (one of them restores the session).
   */
  static async connect({ host = '127.0.0.1', port = 7878, onMessage, reconnect = false, reconnectAttempts = 8, tls: secure = null, nodes = [] } = {}) {
    const options = secure === true ? {} : secure;
    const socket = await Client.#open(host, port, options);
    const client = new Client(socket, { onMessage, host, port, reconnect, reconnectAttempts, tls: options, nodes });
    client.welcome = await client.#start(socket);
    client.session = client.welcome.session;
    client.token = client.welcome.token;
    return client;
  }

  static async #open(host, port, secure = null) {
    if (secure) {
      const socket = tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ...secure });
      socket.setNoDelay(true);
      await once(socket, 'secureConnect');
      return socket;
    }
    const socket = net.createConnection({ host, port });
    socket.setNoDelay(true);
    await once(socket, 'connect');
    return socket;
  }

  /** Listens on `socket` and resolves with its first line (the welcome). */
  #start(socket) {
    const welcome = new Promise((resolve, reject) => {
      this.once('welcome', resolve);
      socket.once('error', reject);
      socket.once('close', () => reject(new ViewlineError('connection_closed', 'connection closed before the welcome')));
    });
    this.#socket = socket;
    this.#listen(socket);
    return welcome;
  }

  #listen(socket) {
    const lines = readline.createInterface({ input: socket, crlfDelay: Infinity });
    lines.on('line', (line) => this.#receive(JSON.parse(line)));
    // readline re-emits its input's errors (ECONNRESET when a node dies); the socket's
    // own 'error' handler below reports them, and 'close' resumes or ends.
    lines.on('error', () => {});
    socket.on('close', () => {
      if (socket !== this.#socket) return;  // an old connection, already replaced
      for (const { reject } of this.#pending.values()) reject(new ViewlineError('connection_closed', 'connection closed'));
      this.#pending.clear();
      if (this.#options.reconnect && !this.#ended) {
        this.#resuming ??= this.#resume();  // a failed attempt's close is the loop's business
        return;
      }
      this.#end();
    });
    socket.on('error', (error) => this.emit('socketError', error));
  }

  #end() {
    this.closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new ViewlineError('connection_closed', 'connection closed'));
    this.emit('close');
  }

  /**
   * Reopens the connection with backoff and attaches to this session from `rev`:
   * the same node first, then the cluster's other nodes; `moved` is followed, and a
   * node that cannot take the session yet (`moved` to a dead node, `unavailable`) is
   * tried again.
   */
  async #resume() {
    let delay = 50;
    const current = { host: this.#options.host, port: this.#options.port };
    const candidates = [current, ...this.#options.nodes.filter((n) => !(n.host === current.host && n.port === current.port))];
    for (let attempt = 0; attempt < this.#options.reconnectAttempts * candidates.length && !this.#ended; attempt++) {
      try {
        await this.#moveTo(candidates[attempt % candidates.length]);
        await this.#attachFollowingMoved({ token: this.token, lastRev: this.rev }, true);
        this.resumed += 1;
        this.#resuming = null;
        this.emit('resumed');
        return;
      } catch (error) {
        if (error.code === 'bad_token') break;
        if (attempt % candidates.length === candidates.length - 1) {
          await new Promise((resolve) => setTimeout(resolve, delay));
          delay = Math.min(delay * 2, 2000);
        }
      }
    }
    this.#resuming = null;
    this.#end();
  }

  /** Replaces the connection with one to `address` and reads its welcome. */
  async #moveTo({ host, port }) {
    const old = this.#socket;
    const socket = await Client.#open(host, port, this.#options.tls);
    await this.#start(socket);
    if (old !== socket) old.destroy();
    this.#options.host = host;
    this.#options.port = port;
  }

  /** `attach`, going to the node a `moved` reply names (at most three hops). */
  async #attachFollowingMoved(args, internal = false) {
    for (let hops = 0; ; hops++) {
      try {
        return await this.#request('attach', args, internal);
      } catch (error) {
        const address = error.code === 'moved' ? parseAddress(error.reply?.error?.address) : null;
        if (!address || hops >= 2) throw error;
        await this.#moveTo(address);
      }
    }
  }

  #receive(message) {
    if (typeof message.rev === 'number') this.rev = Math.max(this.rev, message.rev);
    if (message.type === 'bye') this.#ended = true;
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

  async #request(cmd, args, resuming = false) {
    if (this.#resuming && !resuming) await this.#resuming;
    if (this.closed) throw new ViewlineError('connection_closed', 'connection closed');
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

  /**
   * Moves this connection to the session that owns `token`. With `lastRev`, every
   * event after it arrives again; otherwise a snapshot (every view and the presented
   * alert). Resolves with `{session, rev, replayed, snapshot}`; rejects with
   * `bad_token` for a token that is not a live session's.
   */
  async attach(token, lastRev = undefined) {
    const args = { token };
    if (lastRev !== undefined) args.lastRev = lastRev;
    const result = await this.#attachFollowingMoved(args);
    this.token = token;
    this.session = result.session;
    return result;
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
    this.#ended = true;
    this.#socket.end();
    this.#socket.destroy();
  }

  /** Cuts the connection as a network failure would (no `quit`): for tests and demos of resuming. */
  drop() {
    this.#socket.destroy();
  }
}

/** `'host:port'` (or `'[v6]:port'`, or `{host, port}`) as `{host, port}`; null if it is not one. */
export function parseAddress(address) {
  if (address && typeof address === 'object' && typeof address.port === 'number') return { host: address.host ?? '127.0.0.1', port: address.port };
  if (typeof address !== 'string') return null;
  const colon = address.lastIndexOf(':');
  let host = address.slice(0, colon);
  const port = Number(address.slice(colon + 1));
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (colon <= 0 || !host || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  return { host, port };
}
