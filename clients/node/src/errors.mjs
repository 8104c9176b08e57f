// Errors carrying the protocol's stable error code. Every error the client rejects
// with is a `ViewlineError`; subclasses carry what a caller acts on.

// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * `text` without C0 and C1 control characters (tab and newline stay): what a server
 * sent, safe to print to a terminal (no escape sequences that move the cursor,
 * retitle the window or hide what came before). Error messages are already
 * printable; use it for alert titles, view states and the like.
 */
export function printable(text) {
  return String(text).replace(CONTROL, '');
}

/** A command failed: `code` is the protocol's stable snake_case code (PROTOCOL §7),
 * `message` the server's words (as in the Python client; `printable`, without
 * control characters), `reply` the whole reply as it came. */
export class ViewlineError extends Error {
  constructor(code, message, reply = undefined) {
    super(printable(message));
    this.name = 'ViewlineError';
    this.code = printable(code);
    this.reply = reply;
  }

  /** @deprecated the same as `message` */
  get detail() { return this.message; }

  toString() { return `${this.name} [${this.code}]: ${this.message}`; }
}

/** `moved`: another node serves the session; `address` is `{host, port}` or null. */
export class MovedError extends ViewlineError {
  constructor(message, reply, address) {
    super('moved', message, reply);
    this.name = 'MovedError';
    this.address = address;
  }
}

/** The server asks to try again later: `retryAfter` seconds (null from a server that sends none). */
export class RetryLaterError extends ViewlineError {
  constructor(code, message, reply, retryAfter) {
    super(code, message, reply);
    this.name = 'RetryLaterError';
    this.retryAfter = retryAfter;
  }
}

/** `login_throttled` or `attach_throttled`: too many failures. */
export class ThrottledError extends RetryLaterError {
  constructor(...args) { super(...args); this.name = 'ThrottledError'; }
}

/** `server_busy`: the node is full or too many log-ins are being checked. */
export class ServerBusyError extends RetryLaterError {
  constructor(...args) { super(...args); this.name = 'ServerBusyError'; }
}

/** The connection closed (`connection_closed`): `bye` is the server's `bye` when it
 * sent one; `sessionEnded` says whether the session is gone for good. */
export class ConnectionClosedError extends ViewlineError {
  constructor(message = 'connection closed', { bye = null, sessionEnded = false, cause } = {}) {
    super('connection_closed', message);
    this.name = 'ConnectionClosedError';
    this.bye = bye;
    this.sessionEnded = sessionEnded;
    if (cause) this.cause = cause;
  }
}

/** The server could not be reached, refused the connection or sent no welcome in time (`connect_failed`). */
export class ConnectError extends ConnectionClosedError {
  constructor(message, { bye = null, cause } = {}) {
    super(message, { bye, cause });
    this.name = 'ConnectError';
    this.code = 'connect_failed';
  }
}

/**
 * The server broke the protocol, so the client closed the connection and will not
 * resume it (`sessionEnded` is false: the session may live on). `code` is
 * `message_too_long` (a line longer than `maxLineBytes`) or `bad_message` (a message
 * the client cannot use: a `rev` that is not a whole number from 0 to 2^53 − 1, a
 * `display` without a `view` name or a `state` object, a reply whose `ok` is not a
 * boolean, …). Every pending command, `waitFor` and `events()` loop rejects with it.
 */
export class ProtocolError extends ConnectionClosedError {
  constructor(code, message) {
    super(message);
    this.name = 'ProtocolError';
    this.code = code;
  }
}

/** Nothing matching arrived in time (`client_timeout`). */
export class ClientTimeoutError extends ViewlineError {
  constructor(what) {
    super('client_timeout', `timed out waiting for ${what}`);
    this.name = 'ClientTimeoutError';
  }
}

/** The wait was aborted through its `AbortSignal` (`aborted`). */
export class AbortedError extends ViewlineError {
  constructor(reason) {
    super('aborted', `aborted${reason && reason.message ? `: ${reason.message}` : ''}`);
    this.name = 'AbortError';
    this.cause = reason;
  }
}

/** The longest `retryAfter` taken from a server (a day); a longer one, or one that is
 * not a whole number of seconds, counts as none. */
export const MAX_RETRY_AFTER = 86_400;

/** A string or number as text; anything else (an object a hostile server made up) is `fallback`. */
const text = (value, fallback) => (typeof value === 'string' || typeof value === 'number' ? String(value) : fallback);

/** The error a failed reply stands for. */
export function errorFromReply(reply) {
  const error = reply?.error !== null && typeof reply?.error === 'object' ? reply.error : {};
  const code = text(error.code, 'internal_error');
  const message = text(error.message, '');
  if (code === 'moved') return new MovedError(message, reply, typeof error.address === 'string' ? parseAddress(error.address) : null);
  const retryAfter = Number.isInteger(error.retryAfter) && error.retryAfter >= 0 && error.retryAfter <= MAX_RETRY_AFTER ? error.retryAfter : null;
  if (code === 'login_throttled' || code === 'attach_throttled') return new ThrottledError(code, message, reply, retryAfter);
  if (code === 'server_busy') return new ServerBusyError(code, message, reply, retryAfter);
  return new ViewlineError(code, message, reply);
}

// eslint-disable-next-line no-control-regex
const HOST = /^[^\s\x00-\x1f\x7f-\x9f/@]{1,253}$/;
const isPort = (port) => Number.isInteger(port) && port >= 1 && port <= 65535;

/**
 * `'host:port'` (or `'[v6]:port'`, or `{host, port}`) as `{host, port}`; null if it is
 * not one (a port that is not 1–65535 in ASCII digits, a host with spaces or control
 * characters).
 */
export function parseAddress(address) {
  if (address && typeof address === 'object') {
    const host = address.host ?? '127.0.0.1';
    return typeof host === 'string' && HOST.test(host) && isPort(address.port) ? { host, port: address.port } : null;
  }
  if (typeof address !== 'string') return null;
  const colon = address.lastIndexOf(':');
  let host = address.slice(0, colon);
  const digits = address.slice(colon + 1);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (colon <= 0 || !HOST.test(host) || !/^[0-9]{1,5}$/.test(digits) || !isPort(Number(digits))) return null;
  return { host, port: Number(digits) };
}

/** `bye` codes after which the session is gone for good (PROTOCOL §4). */
export const FINAL_BYE_CODES = new Set(['quit', 'ended', 'expired', 'evicted', 'revoked']);
export const FINAL_BYE_REASONS = new Set(['client quit', 'session ended', 'session expired', 'session evicted']);

/** Whether a `bye` ends the session (servers before 1.1 sent only a `reason`). */
export function byeIsFinal(bye) {
  return typeof bye.code === 'string' ? FINAL_BYE_CODES.has(bye.code) : FINAL_BYE_REASONS.has(bye.reason);
}
