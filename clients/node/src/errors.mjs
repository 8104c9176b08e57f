// Errors carrying the protocol's stable error code. Every error the client rejects
// with is a `ViewlineError`; subclasses carry what a caller acts on.

/** A command failed: `code` is the protocol's stable snake_case code (PROTOCOL §7),
 * `message` the server's words (as in the Python client), `reply` the whole reply. */
export class ViewlineError extends Error {
  constructor(code, message, reply = undefined) {
    super(message);
    this.name = 'ViewlineError';
    this.code = code;
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

/** The error a failed reply stands for. */
export function errorFromReply(reply) {
  const error = reply?.error ?? {};
  const code = String(error.code ?? 'internal_error');
  const message = String(error.message ?? '');
  if (code === 'moved') return new MovedError(message, reply, parseAddress(error.address));
  const retryAfter = Number.isInteger(error.retryAfter) ? error.retryAfter : null;
  if (code === 'login_throttled' || code === 'attach_throttled') return new ThrottledError(code, message, reply, retryAfter);
  if (code === 'server_busy') return new ServerBusyError(code, message, reply, retryAfter);
  return new ViewlineError(code, message, reply);
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

/** `bye` codes after which the session is gone for good (PROTOCOL §4). */
export const FINAL_BYE_CODES = new Set(['quit', 'ended', 'expired', 'evicted', 'revoked']);
export const FINAL_BYE_REASONS = new Set(['client quit', 'session ended', 'session expired', 'session evicted']);

/** Whether a `bye` ends the session (servers before 1.1 sent only a `reason`). */
export function byeIsFinal(bye) {
  return typeof bye.code === 'string' ? FINAL_BYE_CODES.has(bye.code) : FINAL_BYE_REASONS.has(bye.reason);
}
