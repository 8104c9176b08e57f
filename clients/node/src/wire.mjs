// What comes off the wire, checked before the client acts on it: lines no longer
// than a limit, and the fields a client relies on of the types the protocol gives
// them (PROTOCOL §1, §4).
import { ProtocolError } from './errors.mjs';

/** The longest server line taken by default: 1 MiB, the most a server holds for one
 * connection by default (`--max-output-bytes`, PROTOCOL §8), so no longer line is
 * ever delivered; not counting the line ending. */
export const MAX_LINE_BYTES = 1024 * 1024;
/** Events kept for the application by default, per queue, before the client stops reading. */
export const MAX_QUEUED_EVENTS = 1024;

/** Whether `value` is a plain JSON object (not null, not an array). */
export const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

/** `value` if it is a whole number from 0 to 2^53 − 1 (exact in every JSON implementation), else null. */
export const whole = (value) => (Number.isSafeInteger(value) && value >= 0 ? value : null);

/** `value` if it is a whole number of at least 1; else a `RangeError` naming the option. */
export function positive(name, value) {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a whole number of at least 1, not ${value}`);
  return value;
}

/**
 * Splits a byte stream into lines, holding at most `limit` bytes (plus a `\r`) of a
 * line whose `\n` has not come yet. A line longer than `limit` bytes, finished or not,
 * throws `ProtocolError` (`message_too_long`) as soon as it is seen, without
 * buffering the rest of it. Lines are split as chunks come and taken with `shift()`.
 */
export class LineSplitter {
  #limit;
  // The unfinished line: one buffer that doubles as it fills (a line trickled a byte
  // per chunk costs its bytes, not an object per chunk), and how much of it is used.
  #partial = null;
  #size = 0;
  #lines = [];
  #head = 0;

  constructor(limit) {
    this.#limit = limit;
  }

  /** How many whole lines wait to be taken. */
  get length() {
    return this.#lines.length - this.#head;
  }

  /** How many bytes of an unfinished line are held (never more than the limit and a `\r`). */
  get held() {
    return this.#size;
  }

  /** Takes a chunk read from the socket; throws `ProtocolError` for a line too long. */
  push(chunk) {
    let start = 0;
    for (let end = chunk.indexOf(10, start); end !== -1; end = chunk.indexOf(10, start)) {
      let line = chunk.subarray(start, end);
      if (this.#size) {
        line = Buffer.concat([this.#partial.subarray(0, this.#size), line], this.#size + line.length);
        this.#size = 0;
        if (this.#partial.length > 65536) this.#partial = null;  // a long line's buffer is let go
      }
      if (line.length - (line[line.length - 1] === 13 ? 1 : 0) > this.#limit) throw this.#tooLong();
      this.#lines.push(line.toString('utf8'));
      start = end + 1;
    }
    const rest = chunk.length - start;
    if (this.#size + rest > this.#limit + 1) throw this.#tooLong();
    if (rest) {
      const needed = this.#size + rest;
      if (!this.#partial || this.#partial.length < needed) {
        const grown = Buffer.allocUnsafe(Math.min(Math.max(256, needed * 2), this.#limit + 1));
        if (this.#size) this.#partial.copy(grown, 0, 0, this.#size);
        this.#partial = grown;
      }
      chunk.copy(this.#partial, this.#size, start);  // a copy: the chunk is not kept
      this.#size = needed;
    }
  }

  /** The next whole line (without its `\n`), or undefined. */
  shift() {
    if (this.#head >= this.#lines.length) return undefined;
    const line = this.#lines[this.#head];
    this.#lines[this.#head++] = undefined;
    if (this.#head === this.#lines.length) {
      this.#lines = [];
      this.#head = 0;
    }
    return line;
  }

  #tooLong() {
    this.#lines = [];
    this.#head = 0;
    this.#partial = null;
    this.#size = 0;
    return new ProtocolError('message_too_long', `the server sent a line longer than ${this.#limit} bytes (maxLineBytes); the connection was closed`);
  }
}

function bad(what, value) {
  let shown;
  try {
    shown = JSON.stringify(value) ?? String(value);
  } catch {
    shown = typeof value;
  }
  if (shown.length > 60) shown = `${shown.slice(0, 57)}...`;
  return new ProtocolError('bad_message', `the server sent ${what} (${shown}); the connection was closed`);
}

const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

/**
 * Throws `ProtocolError` (`bad_message`) unless every field the client acts on has
 * the protocol's type: a `rev` (an event's, an `attach` reply's) a whole number from 0
 * to 2^53 − 1, a reply's `re` a string, finite number or null and `ok` a boolean,
 * its `result`/`error` an object, a `display`'s `view` a string and `state` an object,
 * an alert's or dismiss's `id` a string, a welcome's `session` and `token` strings,
 * a bye's `reason` and `code` strings. Keys it does not know are left alone (PROTOCOL §9).
 */
export function checkMessage(message) {
  const kind = message.type;
  if (kind === 'reply') {
    const { re, ok } = message;
    if (!(re === null || re === undefined || typeof re === 'string' || (typeof re === 'number' && Number.isFinite(re)))) {
      throw bad('a reply whose re is not a string, a number or null', re);
    }
    if (typeof ok !== 'boolean') throw bad('a reply whose ok is not true or false', ok);
    for (const key of ['result', 'error']) {
      if (message[key] !== undefined && message[key] !== null && !isObject(message[key])) throw bad(`a reply whose ${key} is not an object`, message[key]);
    }
    const { result } = message;
    if (isObject(result) && has(result, 'replayed') && has(result, 'rev') && whole(result.rev) === null) {
      throw bad('an attach reply whose rev is not a whole number from 0 to 2^53 − 1', result.rev);
    }
    return;
  }
  if (has(message, 'rev') && whole(message.rev) === null) {
    const label = ['display', 'alert', 'dismiss'].includes(kind) ? kind : 'message';
    throw bad(`${label === 'alert' ? 'an' : 'a'} ${label} whose rev is not a whole number from 0 to 2^53 − 1`, message.rev);
  }
  if (kind === 'welcome') {
    for (const key of ['session', 'token']) {
      if (typeof message[key] !== 'string' || !message[key]) throw bad(`a welcome whose ${key} is not a string`, message[key]);
    }
  } else if (kind === 'display') {
    if (typeof message.view !== 'string') throw bad('a display whose view is not a string', message.view);
    if (!isObject(message.state)) throw bad('a display whose state is not an object', message.state);
  } else if (kind === 'alert' || kind === 'dismiss') {
    if (typeof message.id !== 'string') throw bad(`${kind === 'alert' ? 'an' : 'a'} ${kind} whose id is not a string`, message.id);
  } else if (kind === 'bye') {
    for (const key of ['reason', 'code']) {
      if (has(message, key) && typeof message[key] !== 'string') throw bad(`a bye whose ${key} is not a string`, message[key]);
    }
  }
}
