// Client for Viewline, the remote view-model server (wire protocol v1).
// Node 18+, no dependencies: `net`, `tls`, `events`.
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import {
  AbortedError, ClientTimeoutError, ConnectError, ConnectionClosedError, MovedError, ProtocolError, RetryLaterError,
  ServerBusyError, ThrottledError, ViewlineError, byeIsFinal, errorFromReply, parseAddress, printable,
} from './errors.mjs';
import { quote, split } from './inline.mjs';
import { LineSplitter, MAX_LINE_BYTES, MAX_QUEUED_EVENTS, checkMessage, isObject, positive, whole } from './wire.mjs';

export {
  AbortedError, ClientTimeoutError, ConnectError, ConnectionClosedError, MovedError, ProtocolError, RetryLaterError,
  ServerBusyError, ThrottledError, ViewlineError, parseAddress, printable, quote, split,
};

/** Attach failures worth trying again elsewhere or a little later. */
const RETRYABLE_ATTACH = new Set(['moved', 'unavailable', 'server_busy', 'attach_throttled', 'connection_closed', 'connect_failed', 'client_timeout']);

/** `base * 2**attempt` ms, at most `cap`, with full jitter: redis's `ExponentialWithJitterBackoff`. */
export function exponentialBackoff({ base = 50, cap = 2000, jitter = true } = {}) {
  return (attempt) => {
    const delay = Math.min(cap, base * 2 ** Math.min(attempt, 30));
    return jitter ? Math.random() * delay : delay;
  };
}

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');

/**
 * One connection to a session. Replies are matched to commands by id; events are
 * queued for the waits and for each `events()` reader; `views` keeps each view's
 * latest state.
 *
 *   await using vl = await Client.connect({ port: 7878 });   // or: const vl = …; … await vl.close()
 *   await vl.command('search thai food');
 *   const state = await vl.waitForDisplay('search', (s) => !s.loading);
 *
 * Nothing a program waits for is missed: the events received that no wait has taken
 * stay queued (those that came between a command's reply and the next call
 * included). `waitForAlert()` gives the presented alert at once, else the next to
 * arrive; `waitForDisplay()` a state the view already shows at once, else the first
 * matching display queued, else the next to arrive. A wait takes the events up to
 * what it returns, so successive waits move forward; events it passes by, or that
 * arrive while it waits without matching it, stay queued for later waits.
 *
 * Closing the client (`close()`, `destroy()`, the end of an `await using` block)
 * closes the connection; the session lives on on the server until it expires, and
 * `attach(token)` resumes it from anywhere. `quit()` ends it.
 *
 * Backpressure (`maxQueuedEvents`, 1,024): events wait for the waits (`waitFor()`,
 * `waitForDisplay()`, `waitForAlert()`) in one queue, `waitFor`'s, and for each
 * `events()` loop in its own, each of at most that many. The client
 * stops reading the socket (`socket.pause()`) while a queue that holds it back is
 * full, and goes on once an event is taken (TCP holds the rest; the server
 * disconnects a client that leaves more than 1 MiB unread, and `reconnect` resumes
 * from the last `rev` read). The queues that hold it back are those of the
 * `events()` loops when there are any; otherwise `waitFor`'s, unless an `onMessage`
 * callback or an `'event'` listener sees every event (that queue then keeps the
 * newest). While a command waits for its reply or a wait waits, the client
 * reads on whatever is full, and an event that finds a queue full pushes out its
 * oldest (counted in `droppedEvents`): a command never waits on events nobody reads.
 * An `events()` loop that stops reading without ending (`break` ends it) holds the
 * client back. `views`, `alert` and `rev` reflect every message read.
 */
export class Client extends EventEmitter {
  #socket = null;
  #reader = null;  // the current socket's lines: { socket, lines, closed, done }
  #pumping = false;
  #paused = false;  // the socket is paused: a full queue waits to be read
  #welcoming = 0;  // welcomes awaited (read on for them)
  #failure = null;  // the ProtocolError the client closed the connection for
  #nextId = 0;
  #pending = new Map();
  #queue = [];
  #waiters = [];
  #subscribers = new Set();
  #options;
  #ended = false;
  #resumeTask = null;  // the resume under way
  #gate = null;  // resolves once a `bye` that leaves the session alive is followed by a resumed connection
  #heard = 0;
  #finished = false;
  #pinger = null;
  #serverLineLimit = null;  // the longest line this connection's server takes (its welcome's `maxLineBytes`), or null

  /** Use `Client.connect(options)`. */
  constructor(options = {}) {
    super();
    const {
      host = '127.0.0.1', port = 7878, onMessage, reconnect = false, reconnectAttempts = 8, backoff = exponentialBackoff(),
      tls: secure = null, nodes = [], timeout = 10_000, connectTimeout = 10_000, pingInterval = 0, keepAlive = true,
      maxQueuedEvents = MAX_QUEUED_EVENTS, maxLineBytes = MAX_LINE_BYTES,
    } = options;
    const others = nodes.map(parseAddress).filter((node) => node && !(node.host === host && node.port === port));
    this.#options = {
      host, port, onMessage, reconnect, reconnectAttempts, backoff, tls: secure === true ? {} : secure,
      nodes: [{ host, port }, ...others], timeout, connectTimeout, pingInterval, keepAlive,
      maxQueuedEvents: positive('maxQueuedEvents', maxQueuedEvents), maxLineBytes: positive('maxLineBytes', maxLineBytes),
    };
    // A new 'event' listener sees every event: waitFor's queue no longer holds the client back.
    this.on('newListener', (name) => { if (name === 'event') queueMicrotask(() => this.#pump()); });
    /** The highest `rev` seen: where a resumed session picks up. */
    this.rev = 0;
    /** How many times the connection dropped and the session was resumed. */
    this.resumed = 0;
    /** The latest state of each view displayed so far. */
    this.views = {};
    /** The presented alert, or null. */
    this.alert = null;
    /** The last `bye` the server sent, or null. */
    this.bye = null;
    /** Events pushed out of a full queue that holds the client back (its oldest) while
     * a command or a `waitFor` waited: see the class's note on backpressure. */
    this.droppedEvents = 0;
    this.closed = true;
    this.welcome = null;
    this.session = null;
    this.token = null;
  }

  /**
   * Connects and reads the welcome; rejects with `ConnectError` if that fails.
   *
   * Options: `host`, `port`; `timeout` (10,000 ms): every call's default wait, each
   * call takes `{ timeout, signal }`; `connectTimeout` (10,000 ms): connect, TLS and
   * the welcome. `reconnect: true` reopens a dropped connection, or one the server
   * closed with a `bye` that leaves the session alive (a node shutting down in a
   * rolling restart: code `shutdown`; `moved`), and resumes the session with
   * `attach` from the last `rev` seen: missed events arrive again, nothing twice.
   * Commands whose replies were lost reject with `connection_closed` (they may or
   * may not have run). `nodes` (`['host:port', …]`) lists a cluster's other nodes
   * to try; `reconnectAttempts` (8) rounds, `backoff(round)` ms between them
   * (exponential with jitter). `pingInterval` (ms): a `ping` after that much
   * silence, and a resume when it gets no reply in `timeout`; `keepAlive` (on): TCP
   * keepalive. `tls: true` (or `{ ca }`) for TLS, verified. `onMessage` sees every
   * message. `maxQueuedEvents` (1,024) bounds each event queue; a full one stops the
   * client reading (see the class's note on backpressure). `maxLineBytes` (1 MiB,
   * the most a server holds for one connection) is the longest line taken from the server,
   * not counting its line ending: a longer one is never buffered, the client closes
   * the connection with `ProtocolError` (`message_too_long`) and does not resume.
   * A message the client cannot act on (a `rev` that is not a whole number from 0 to
   * 2^53 − 1, a `display` without a `view` name or `state` object, …) closes it the
   * same way (`bad_message`); a line that is not a JSON object is reported as an
   * `'error'` (or a process warning) and skipped.
   */
  static async connect(options = {}) {
    const client = new Client(options);
    const { host, port } = client.#options;
    const socket = await client.#open(host, port);
    await client.#start(socket);
    client.#pingWhenQuiet();
    return client;
  }

  async #open(host, port) {
    const { tls: secure, connectTimeout, keepAlive } = this.#options;
    let socket;
    try {
      socket = secure
        ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ...secure })
        : net.createConnection({ host, port });
    } catch (error) {  // an argument Node refuses at once (a port out of range)
      throw new ConnectError(`cannot connect to ${host}:${port}: ${error.message}`, { cause: error });
    }
    socket.setNoDelay(true);
    if (keepAlive) socket.setKeepAlive(true, 30_000);
    const timer = setTimeout(() => socket.destroy(new Error(`timed out after ${connectTimeout} ms`)), connectTimeout);
    try {
      await once(socket, secure ? 'secureConnect' : 'connect');
    } catch (error) {
      socket.destroy();
      throw new ConnectError(`cannot connect to ${host}:${port}: ${error.message}`, { cause: error });
    } finally {
      clearTimeout(timer);
    }
    return socket;
  }

  /** Listens on `socket` and resolves once its welcome arrived (within `connectTimeout`). */
  #start(socket) {
    const welcome = new Promise((resolve, reject) => {
      const fail = (error) => { cleanup(); socket.destroy(); reject(error); };
      const onWelcome = (message) => { cleanup(); resolve(message); };
      const onBye = (message) => fail(new ConnectError(`the server refused the connection: ${message.reason}`, { bye: message }));
      const onClose = () => fail(this.#failure
        ? new ConnectError(`the server broke the protocol before its welcome: ${this.#failure.message}`, { cause: this.#failure })
        : new ConnectError('the server closed the connection before its welcome'));
      const timer = setTimeout(() => fail(new ConnectError(`no welcome from the server in ${this.#options.connectTimeout} ms`)), this.#options.connectTimeout);
      const cleanup = () => {
        clearTimeout(timer);
        this.off('#welcome', onWelcome);
        this.off('#bye', onBye);
        socket.off('close', onClose);
        this.#welcoming -= 1;
      };
      this.on('#welcome', onWelcome);
      this.on('#bye', onBye);
      socket.once('close', onClose);
    });
    this.#welcoming += 1;  // read on to the welcome, whatever is full
    this.#socket = socket;
    this.#listen(socket);
    return welcome.then((message) => {
      this.closed = false;
      this.#serverLineLimit = Number.isSafeInteger(message.maxLineBytes) && message.maxLineBytes > 0 ? message.maxLineBytes : null;
      if (!this.welcome) {
        this.welcome = message;
        this.session = message.session;
        this.token = message.token;
      }
      return message;
    });
  }

  #listen(socket) {
    const reader = { socket, lines: new LineSplitter(this.#options.maxLineBytes), closed: false, done: false };
    this.#reader = reader;
    this.#paused = false;
    socket.on('data', (chunk) => {
      if (reader !== this.#reader) return;
      try {
        reader.lines.push(chunk);
      } catch (error) {
        this.#fail(error);
        return;
      }
      this.#pump();
    });
    socket.on('error', (error) => this.emit('socketError', error));
    socket.on('close', () => {
      reader.closed = true;  // handled once the lines read before it are
      if (reader === this.#reader) this.#pump();
    });
  }

  /**
   * Hands the lines read to `#receiveLine` while nothing holds the client back; at a
   * full queue it pauses the socket (backpressure) and keeps what it read for later.
   * Called when a chunk arrives and whenever something may let it go on: an event
   * taken, a command sent, a `waitFor` begun.
   */
  #pump() {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      for (;;) {
        const reader = this.#reader;
        if (!reader || this.#failure || this.#finished) return;
        if (reader.lines.length) {
          if (this.#mustPause()) {
            if (!this.#paused) {
              this.#paused = true;
              reader.socket.pause();
            }
            return;
          }
          this.#receiveLine(reader.lines.shift());
          continue;
        }
        if (reader.closed) {
          if (!reader.done) {
            reader.done = true;
            this.#closed(reader.socket);
          }
          return;
        }
        if (this.#paused) {
          this.#paused = false;
          this.#heard = Date.now();  // not quiet: it was us not reading
          reader.socket.resume();
        }
        return;
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Whether `queue` (`#queue`, or an `events()` reader's items) stops the client reading when full. */
  #holdsBack(queue) {
    if (this.#subscribers.size) return queue !== this.#queue;
    return !this.#options.onMessage && this.listenerCount('event') === 0;
  }

  /** Whether the next line waits (backpressure): a queue that holds the client back is full and nobody waits. */
  #mustPause() {
    if (this.#pending.size || this.#waiters.length || this.#welcoming) return false;
    const limit = this.#options.maxQueuedEvents;
    for (const subscriber of this.#subscribers) if (subscriber.items.length >= limit) return true;
    return this.#queue.length >= limit && this.#holdsBack(this.#queue);
  }

  /** The server broke the protocol: close for good (no resume) and tell everyone waiting. */
  #fail(error) {
    if (this.#failure || this.#finished) return;
    this.#failure = error;
    this.#ended = true;
    if (this.welcome) this.#report(error);  // before it, connect() rejects with a ConnectError caused by it
    this.#socket?.destroy();
    this.#end();
  }

  #closed(socket) {
    if (socket !== this.#socket || this.welcome === null) return;  // an old connection, or the first never started
    // A server answers every command it began before it says `bye` (PROTOCOL §4): after
    // one that leaves the session alive, a command still pending never ran and goes
    // out again on the resumed connection. Without a `bye`, it may or may not have run.
    const resend = this.bye !== null && !this.#ended && this.#options.reconnect;
    for (const pending of [...this.#pending.values()]) {
      if (resend && !pending.internal) {
        pending.resend = true;
        continue;
      }
      pending.reject(new ConnectionClosedError('the connection closed before the reply; the command may or may not have run', { bye: this.bye, sessionEnded: this.#ended && this.bye !== null }));
    }
    if (this.#options.reconnect && !this.#ended) {
      this.#resumeTask ??= this.#resume().finally(() => { this.#resumeTask = null; });
      return;
    }
    this.#end();
  }

  /** A line from the server: never throws (a bad line or a throwing callback is reported, not fatal). */
  #receiveLine(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      message = null;
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      this.#report(new ViewlineError('bad_message', `a line from the server that is not a JSON object: ${line.slice(0, 200)}`));
      return;
    }
    try {
      checkMessage(message);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#heard = Date.now();
    try {
      this.#receive(message);
    } catch (error) {
      this.#report(error);
    }
  }

  /** Emits `'error'` when someone listens; otherwise a process warning (never an uncaught throw). */
  #report(error) {
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else process.emitWarning(`viewline: ${printable(error?.message ?? error)}`, { code: 'VIEWLINE_CLIENT' });
  }

  #end() {
    if (this.#finished) return;
    this.#finished = true;
    this.closed = true;
    clearTimeout(this.#pinger);
    const error = this.#failure ?? new ConnectionClosedError('connection closed', { bye: this.bye, sessionEnded: this.#ended && this.bye !== null });
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
    for (const subscriber of this.#subscribers) subscriber.wake();
    this.emit('close');
  }

  /**
   * Reopens the connection with backoff and attaches to this session from `rev`:
   * the same node first, then the cluster's other nodes; `moved` is followed, and a
   * node that cannot take the session yet is tried again.
   */
  async #resume() {
    const current = { host: this.#options.host, port: this.#options.port };
    const candidates = [current, ...this.#options.nodes.filter((n) => !(n.host === current.host && n.port === current.port))];
    for (let attempt = 0; attempt < this.#options.reconnectAttempts * candidates.length; attempt++) {
      if ((this.#ended && this.bye === null) || this.#failure) break;  // closed by us meanwhile, or for good
      try {
        await this.#moveTo(candidates[attempt % candidates.length]);
        // Counted as the attach's reply is read, before the lines after it: an event
        // the resumed connection brings never ends a wait before the resume is counted.
        await this.#attachFollowingMoved({ token: this.token, lastRev: this.rev }, { internal: true, onResult: () => this.#resumed() });
        if (this.#finished) {  // destroyed while resuming: stay closed
          this.closed = true;
          this.#socket?.destroy();
        }
        return;
      } catch (error) {
        if (this.#failure || !RETRYABLE_ATTACH.has(error.code)) {
          this.#ended = true;
          break;
        }
        if (attempt % candidates.length === candidates.length - 1) {
          await new Promise((resolve) => setTimeout(resolve, this.#options.backoff(Math.floor(attempt / candidates.length))));
        }
      }
    }
    this.#ended = true;
    this.#gate = null;
    this.#socket?.destroy();
    this.#end();
  }

  /** The session is attached on the new connection: counted, and what waited for it goes on. */
  #resumed() {
    if (this.#finished) return;
    this.resumed += 1;
    this.bye = null;
    this.#gate = null;
    for (const pending of this.#pending.values()) {
      if (!pending.resend) continue;
      pending.resend = false;
      this.#socket.write(pending.text);  // never ran: sent again, in the order first sent
    }
    this.emit('resumed');
  }

  /** Replaces the connection with one to `address` and reads its welcome. */
  async #moveTo({ host, port }) {
    const old = this.#socket;
    const socket = await this.#open(host, port);
    await this.#start(socket);
    if (old && old !== socket) old.destroy();
    this.#options.host = host;
    this.#options.port = port;
  }

  /** `attach`, going to the node a `moved` reply names (at most three hops). */
  async #attachFollowingMoved(args, options = {}) {
    for (let hops = 0; ; hops++) {
      try {
        return await this.#request('attach', args, options);
      } catch (error) {
        if (!(error instanceof MovedError) || !error.address || hops >= 2) throw error;
        await this.#moveTo(error.address);
      }
    }
  }

  #receive(message) {
    if (message.type === 'welcome') return this.emit('#welcome', message);
    if (message.type === 'bye') {
      this.bye = message;
      if (byeIsFinal(message)) this.#ended = true;
      else if (this.#options.reconnect && !this.#gate && this.welcome) {
        // The server closes this connection next: commands from now on wait for the
        // resumed one instead of going out on this one.
        this.#gate = new Promise((resolve) => {
          this.once('resumed', resolve);
          this.once('close', resolve);
        });
      }
      if (!this.welcome) return this.emit('#bye', message);
    }
    this.#observe(message);
    try {
      this.#options.onMessage?.(message);
    } catch (error) {
      this.#report(error);
    }
    if (message.type === 'reply') {
      const pending = this.#pending.get(message.re);
      if (pending) {
        this.#pending.delete(message.re);
        if (!message.ok) pending.reject(errorFromReply(message));
        else {
          try {
            pending.onResult?.();  // before the next line is read (a resume is counted)
          } finally {
            pending.resolve(message.result);
          }
        }
      }
      return;
    }
    this.emit('event', message);
    for (const subscriber of this.#subscribers) subscriber.push(message);
    // The oldest wait it matches takes it, with every event queued before it; kept otherwise.
    for (const waiter of [...this.#waiters]) {
      let matched;
      try {
        matched = waiter.predicate(message);
      } catch (error) {
        waiter.reject(error);  // the waiter's own predicate failed: its caller hears about it
        continue;
      }
      if (matched) {
        this.#queue.length = 0;
        this.#overtaken();
        waiter.resolve(message);
        return;
      }
    }
    if (this.#queue.length >= this.#options.maxQueuedEvents) {
      this.#queue.shift();
      if (this.#holdsBack(this.#queue)) this.droppedEvents += 1;
    }
    this.#queue.push(message);
  }

  /** Takes what a message says (checked by `checkMessage` first; anything else is ignored). */
  #observe(message) {
    if (message.type !== 'reply' && whole(message.rev) !== null) this.rev = Math.max(this.rev, message.rev);
    if (message.type === 'display') {
      if (typeof message.view === 'string' && isObject(message.state)) {
        // Defined, not assigned: a view named `__proto__` is a view, not this object's prototype.
        Object.defineProperty(this.views, message.view, { value: message.state, enumerable: true, writable: true, configurable: true });
      }
    } else if (message.type === 'alert') {
      if (typeof message.id === 'string') this.alert = message;
    } else if (message.type === 'dismiss' && this.alert?.id === message.id) this.alert = null;
    else if (message.type === 'reply' && message.ok) {
      const result = isObject(message.result) ? message.result : {};
      if (result.snapshot === true && 'replayed' in result) {
        // An attach answered with a snapshot (another session, or one restored from
        // its record): every view and the alert arrive again; nothing old lingers.
        this.views = {};
        this.alert = null;
        this.rev = whole(result.rev) ?? 0;
      } else if (result.answer && result.alert === this.alert?.id) {
        this.alert = null;
      }
    }
  }

  /**
   * Runs a command and resolves with its `result` (rejects with `ViewlineError`, a
   * subclass for the codes callers act on). `command('add buy milk')` sends the
   * line as typed and the server parses it, so any view-model's commands work;
   * `command('add', { title: 'buy milk' })` sends a name with JSON args. The last
   * argument may be `{ timeout, signal }`. A command whose line is longer than the
   * server's welcome says it takes (`maxLineBytes`) is not sent: it rejects with
   * `line_too_long` at once.
   */
  async command(cmd, args = undefined, options = {}) {
    if (typeof cmd !== 'string') throw new TypeError('command: a string line or command name');
    return this.#request(cmd, args ?? null, options);
  }

  async #request(cmd, args, { timeout = this.#options.timeout, signal, internal = false, onResult } = {}) {
    signal?.throwIfAborted?.();
    if (!internal && (this.#resumeTask || this.#gate)) await (this.#resumeTask ?? this.#gate);
    if (this.#failure) throw this.#failure;
    if (this.closed && !internal) throw new ConnectionClosedError('the client is closed', { bye: this.bye, sessionEnded: this.#ended && this.bye !== null });
    const id = ++this.#nextId;
    const line = args === null ? { id, line: cmd } : { id, cmd, ...(Object.keys(args).length ? { args } : {}) };
    const text = JSON.stringify(line) + '\n';
    const bytes = Buffer.byteLength(text) - 1;
    if (this.#serverLineLimit !== null && bytes > this.#serverLineLimit) {
      // The server would answer it `line_too_long` with `re: null` (it cannot read the id): refused here instead.
      throw new ViewlineError('line_too_long', `the command's line is ${bytes} bytes, longer than the ${this.#serverLineLimit} the server takes (its welcome's maxLineBytes); it was not sent`);
    }
    return new Promise((resolve, reject) => {
      let timer = null;
      const onAbort = () => finish(reject, new AbortedError(signal.reason));
      const finish = (settle, value) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#pending.delete(id);
        settle(value);
      };
      this.#pending.set(id, { resolve: (v) => finish(resolve, v), reject: (e) => finish(reject, e), text, internal, resend: false, onResult });
      if (timeout !== Infinity && timeout != null) {
        timer = setTimeout(() => finish(reject, new ClientTimeoutError(`the reply to ${cmd.split(' ')[0]}`)), timeout);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#socket.write(text);
      this.#pump();  // read on to the reply, whatever is full
    }).then((result) => {
      // `end-others` gives the session a new token: the one to resume with from now on.
      const name = args === null ? cmd.trim().split(' ')[0] : cmd;
      if (name === 'end-others' && typeof result?.token === 'string') this.token = result.token;
      return result;
    });
  }

  /** Sends one raw line (inline or JSON) as is; its reply is not tracked. */
  sendLine(line) {
    this.#socket.write(line + '\n');
  }

  /** Answers the presented alert (or `options.alert`) with its confirm action and input `fields`. */
  async confirm(fields = undefined, { alert, ...options } = {}) {
    const args = { alert: alert ?? this.#presented() };
    if (fields && Object.keys(fields).length) args.fields = fields;
    return this.#request('confirm', args, options);
  }

  /** Answers the presented alert (or `options.alert`) with its cancel action. */
  async cancel({ alert, ...options } = {}) {
    return this.#request('cancel', { alert: alert ?? this.#presented() }, options);
  }

  /**
   * Ends every other connection to this session (they get `bye` `revoked`) and gives
   * it a new token, kept here for resuming: a token or link someone else holds no
   * longer joins it. Resolves to `{ended, token}`.
   */
  async endOthers(options = {}) {
    return this.#request('end-others', {}, options);
  }

  /**
   * Moves this connection to the session that owns `token`. With `lastRev`, every
   * event after it arrives again; otherwise a snapshot (`views`, `alert` and `rev`
   * start over). Resolves with `{session, rev, replayed, snapshot}`; rejects with
   * `bad_token` for a token that is not a live session's. Follows `moved`.
   */
  async attach(token, lastRev = undefined, options = {}) {
    const args = { token };
    if (lastRev !== undefined && lastRev !== null) args.lastRev = lastRev;
    const result = await this.#attachFollowingMoved(args, options);
    this.token = token;
    if (typeof result.session === 'string') this.session = result.session;
    return result;
  }

  /**
   * The server's declarations (`help`): every command with its typed arguments
   * (kind, bounds, required, secure), its view and whether it is live, paging or its
   * view's primary action; every view, backend and error code.
   */
  help(options = {}) {
    return this.#request('help', {}, options);
  }

  /** Resolves once the session runs no background work (the `wait` command). */
  settle(timeoutMs = 10_000) {
    return this.#request('wait', { timeout: timeoutMs }, { timeout: timeoutMs + 5000 });
  }

  /** Ends the session for good (`quit`), then closes the connection. */
  async quit(options = {}) {
    try {
      await this.#request('quit', {}, options);
    } catch (error) {
      if (!(error instanceof ConnectionClosedError)) throw error;
    } finally {
      this.destroy();
    }
  }

  #presented() {
    if (!this.alert) throw new ViewlineError('no_alert', 'no alert is presented');
    return this.alert.id;
  }

  /**
   * Resolves with the first event matching `predicate` among the events received that
   * no wait has taken yet (those that came between a command's reply and this call
   * included), else the next one to arrive. A wait takes the events up to the one it
   * returns, so successive waits move forward through the session's history; the
   * events after it stay queued for later waits, and so do events that arrive while
   * it waits without matching it. A wait that rejects takes nothing. Rejects with
   * `client_timeout`, `connection_closed` once the client is closed, `aborted`, or
   * what `predicate` threw.
   */
  waitFor(predicate, options = {}) {
    try {
      options.signal?.throwIfAborted?.();
      const index = this.#queue.findIndex((event) => predicate(event));
      if (index >= 0) return Promise.resolve(this.#takeThrough(index));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#next(predicate, options);
  }

  /**
   * The next event to arrive matching `predicate` (the queue is not read): when it
   * comes, it is taken with every event queued before it.
   */
  #next(predicate, { timeout = this.#options.timeout, what = 'event', signal } = {}) {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.closed) return Promise.reject(new ConnectionClosedError('connection closed', { bye: this.bye, sessionEnded: this.#ended && this.bye !== null }));
    return new Promise((resolve, reject) => {
      const waiter = { predicate };
      const timer = timeout === Infinity ? null : setTimeout(() => settle(reject, new ClientTimeoutError(what)), timeout);
      const onAbort = () => settle(reject, new AbortedError(signal.reason));
      const settle = (fn, value) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = this.#waiters.indexOf(waiter);
        if (index >= 0) this.#waiters.splice(index, 1);
        fn(value);
      };
      waiter.resolve = (m) => settle(resolve, m);
      waiter.reject = (e) => settle(reject, e);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#pump();  // read on while someone waits
    });
  }

  /** Takes the queued events up to and including the one at `index`; returns that one. */
  #takeThrough(index) {
    const [event] = this.#queue.splice(0, index + 1).slice(-1);
    this.#overtaken();
    this.#pump();  // events were taken: the client may read on
    return event;
  }

  /** Takes the queued events up to and including the last one matching `match` (none: nothing). */
  #takeThroughLast(match) {
    for (let index = this.#queue.length - 1; index >= 0; index--) {
      if (match(this.#queue[index])) {
        this.#takeThrough(index);
        return;
      }
    }
  }

  /** A wait took events: what an `events()` loop took from the queue before them is older than what it returned. */
  #overtaken() {
    for (const subscriber of this.#subscribers) subscriber.overtaken = true;
  }

  /**
   * The state of `view` once it matches `predicate`: at once when its latest state
   * (`views[view]`) does, taking the queued events up to and including the last
   * display of `view` queued; else the first matching display received and not
   * taken yet; else the next one to arrive (taking the events up to it, as
   * `waitFor` does). So a state the view already shows is found however many waits
   * went past its display, and waiting for `loading: true` then `loading: false`
   * never returns a state from before the first.
   */
  async waitForDisplay(view, predicate = () => true, options = {}) {
    options.signal?.throwIfAborted?.();
    const latest = Object.hasOwn(this.views, view) ? this.views[view] : undefined;
    if (latest !== undefined && predicate(latest)) {
      this.#takeThroughLast((m) => m.type === 'display' && m.view === view);
      return latest;
    }
    const event = await this.waitFor((m) => m.type === 'display' && m.view === view && predicate(m.state), { what: `a display of ${view}`, ...options });
    return event.state;
  }

  /**
   * The alert to answer: the presented one (`alert`) at once, even when an earlier
   * wait went past its event (the queued events up to it are taken); else the next
   * alert to arrive. An alert received earlier that is no longer presented (answered
   * from this or another connection, dismissed) is never returned: after `confirm`
   * resolves, this waits for the next one.
   */
  async waitForAlert(options = {}) {
    options.signal?.throwIfAborted?.();
    const presented = this.alert;
    if (presented) {
      this.#takeThroughLast((m) => m.type === 'alert' && m.id === presented.id);
      return presented;
    }
    return this.#next((m) => m.type === 'alert', { what: 'an alert', ...options });
  }

  /**
   * Every event in order, as an async iterator, until the client closes for good
   * (rejecting with `ProtocolError` if the client closed the connection because the
   * server broke the protocol), or `signal` aborts. Each call is its own reader with
   * its own queue of at most `maxQueuedEvents`: it starts with the events no wait has
   * taken yet (taking them), then gets every event that arrives (which also stays
   * queued for the waits unless one takes it). While it is full the client stops
   * reading (see the class's note); leave the loop (`break`) to let the client go on
   * without it. Leaving it puts the events it took from the queue but did not yield
   * back at the front of the queue, for the waits and the next loop, unless a wait
   * meanwhile returned a later event.
   */
  async *events({ signal } = {}) {
    const limit = this.#options.maxQueuedEvents;
    const items = this.#queue.splice(0);
    let wake = null;
    const subscriber = {
      items,
      fromQueue: items.length,  // how many of `items`, at its front, were taken from the queue
      overtaken: false,  // a wait took events since: those are older than what it returned
      push: (message) => {
        if (items.length >= limit) {
          items.shift();
          if (subscriber.fromQueue > 0) subscriber.fromQueue -= 1;
          this.droppedEvents += 1;
        }
        items.push(message);
        wake?.();
      },
      wake: () => wake?.(),
    };
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    this.#subscribers.add(subscriber);
    this.#pump();
    try {
      while (true) {
        if (items.length) {
          const event = items.shift();
          if (subscriber.fromQueue > 0) subscriber.fromQueue -= 1;
          this.#pump();
          yield event;
          continue;
        }
        if (signal?.aborted) return;
        if (this.closed) {
          if (this.#failure) throw this.#failure;
          return;
        }
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
    } finally {
      this.#subscribers.delete(subscriber);
      signal?.removeEventListener('abort', onAbort);
      if (subscriber.fromQueue > 0 && !subscriber.overtaken) {
        // Not yielded: back where they were taken from (the events that arrived since are queued already).
        this.#queue.unshift(...items.splice(0, subscriber.fromQueue));
        const excess = this.#queue.length - limit;
        if (excess > 0) {
          this.#queue.splice(0, excess);
          if (this.#holdsBack(this.#queue)) this.droppedEvents += excess;
        }
      }
      this.#pump();
    }
  }

  /** How many events wait in the fullest queue (`waitFor`'s or an `events()` loop's): at most `maxQueuedEvents`. */
  get queuedEvents() {
    return Math.max(this.#queue.length, ...[...this.#subscribers].map((subscriber) => subscriber.items.length));
  }

  #pingWhenQuiet() {
    const interval = this.#options.pingInterval;
    if (!interval) return;
    const tick = async () => {
      if (this.closed) return;
      const quiet = Date.now() - this.#heard;
      if (quiet >= interval && !this.#resumeTask && !this.#gate && !this.#paused) {  // paused: not quiet, unread
        try {
          await this.#request('ping', {}, {});
        } catch (error) {
          if (this.#ended) return;
          if (error instanceof ClientTimeoutError) this.#socket?.destroy();  // half-open: resume
        }
      }
      this.#pinger = setTimeout(tick, Math.max(10, interval - (Date.now() - this.#heard)));
      this.#pinger.unref?.();
    };
    this.#pinger = setTimeout(tick, interval);
    this.#pinger.unref?.();
  }

  /**
   * Closes the connection once every command sent has its reply (the session lives
   * on on the server until it expires). Resolves when the connection is closed.
   */
  async close() {
    this.#ended = true;
    await Promise.allSettled([...this.#pending.values()].map((pending) => new Promise((resolve) => {
      const { resolve: ok, reject: fail } = pending;
      pending.resolve = (v) => { ok(v); resolve(); };
      pending.reject = (e) => { fail(e); resolve(); };
    })));
    this.destroy();
  }

  /** Closes the connection at once; pending commands reject with `connection_closed`. */
  destroy() {
    this.#ended = true;
    clearTimeout(this.#pinger);
    const socket = this.#socket;
    if (socket) {
      socket.end();
      socket.destroy();
    }
    this.#end();
  }

  /** `await using vl = await Client.connect(…)` closes it at the end of the block. */
  [asyncDispose]() {
    return this.close();
  }

  /** Cuts the connection as a network failure would (no `quit`): for tests and demos of resuming. */
  drop() {
    this.#socket?.destroy();
  }
}
