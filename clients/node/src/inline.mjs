// The inline command grammar of protocol v1: the same tokenizer the server uses.
import { ViewlineError } from './errors.mjs';

const ESCAPES = { n: '\n', t: '\t', r: '\r' };

/** Splits an inline line into words (double quotes group; backslash escapes inside). */
export function split(line) {
  const words = [];
  let current = '';
  let inWord = false;
  let inQuotes = false;
  const chars = Array.from(line);
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (inQuotes) {
      if (c === '\\') {
        if (i + 1 >= chars.length) throw new ViewlineError('bad_syntax', 'unbalanced quotes: a backslash ends the line inside quotes');
        const e = chars[++i];
        current += ESCAPES[e] ?? e;
      } else if (c === '"') {
        inQuotes = false;
        if (i + 1 < chars.length && chars[i + 1] !== ' ' && chars[i + 1] !== '\t') {
          throw new ViewlineError('bad_syntax', 'a closing quote must be followed by a space or the end of the line');
        }
      } else {
        current += c;
      }
    } else if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      if (inWord) { words.push(current); current = ''; inWord = false; }
    } else if (c === '"' && !(inWord && current)) {
      inWord = true;
      inQuotes = true;
    } else {
      inWord = true;
      current += c;
    }
  }
  if (inQuotes) throw new ViewlineError('bad_syntax', 'unbalanced quotes');
  if (inWord) words.push(current);
  return words;
}

/** Quotes a word so that `split` gives it back unchanged. */
export function quote(word) {
  if (word && !/[ \t"\\\n\r]/.test(word)) return word;
  return '"' + word.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t').replace(/\r/g, '\\r') + '"';
}

/** Every command and its usage, as the server's `help` lists them. */
export const COMMANDS = {
  help: 'help [command]', ping: 'ping', state: 'state [view]', wait: 'wait [timeout-ms]', quit: 'quit',
  attach: 'attach <token> [last-rev]', sessions: 'sessions', info: 'info', slowlog: 'slowlog [count]',
  search: 'search <query>', confirm: 'confirm [alert-id] [name=value ...]', cancel: 'cancel [alert-id]',
  login: 'login <user> <password>', logout: 'logout', draft: 'draft <text>', save: 'save', saved: 'saved [page]',
  contacts: 'contacts', sync: 'sync', playlist: 'playlist', more: 'more', fault: 'fault <service> [count] [message]',
};

const bad = (message) => new ViewlineError('bad_arguments', message);

/** Maps an inline line to `{cmd, args}`; throws `ViewlineError` as the server would. */
export function parseInline(line) {
  const words = split(line);
  if (words.length === 0) throw new ViewlineError('unknown_command', 'empty command');
  const cmd = words[0].toLowerCase();
  if (!(cmd in COMMANDS)) throw new ViewlineError('unknown_command', `unknown command "${words[0]}"; try help`);
  const rest = words.slice(1);
  const usage = COMMANDS[cmd];
  switch (cmd) {
    case 'search':
    case 'draft': {
      const key = cmd === 'search' ? 'query' : 'text';
      if (rest.length === 0) throw bad(`missing ${key}; usage: ${usage}`);
      const text = rest.join(' ');
      if (text.replace(/[ \t]/g, '') === '') throw bad(`${key} must not be empty; usage: ${usage}`);
      return { cmd, args: { [key]: text } };
    }
    case 'help':
    case 'state':
    case 'cancel': {
      if (rest.length > 1) throw bad(`usage: ${usage}`);
      const key = { help: 'command', state: 'view', cancel: 'alert' }[cmd];
      return { cmd, args: rest.length ? { [key]: rest[0] } : {} };
    }
    case 'attach': {
      if (rest.length === 0) throw bad(`missing token; usage: ${usage}`);
      if (rest.length > 2) throw bad(`usage: ${usage}`);
      if (rest.length === 1) return { cmd, args: { token: rest[0] } };
      if (!/^-?\d+$/.test(rest[1])) throw bad(`lastRev must be a number; usage: ${usage}`);
      return { cmd, args: { token: rest[0], lastRev: Number(rest[1]) } };
    }
    case 'wait': {
      if (rest.length > 1) throw bad(`usage: ${usage}`);
      if (rest.length === 0) return { cmd, args: {} };
      if (!/^\d+$/.test(rest[0])) throw bad(`timeout must be a number of milliseconds; usage: ${usage}`);
      return { cmd, args: { timeout: Number(rest[0]) } };
    }
    case 'saved':
    case 'slowlog': {
      const arg = cmd === 'saved' ? 'page' : 'count';
      if (rest.length > 1) throw bad(`usage: ${usage}`);
      if (rest.length === 0) return { cmd, args: {} };
      if (!/^-?\d+$/.test(rest[0])) throw bad(`${arg} must be a number; usage: ${usage}`);
      return { cmd, args: { [arg]: Number(rest[0]) } };
    }
    case 'confirm': {
      const args = {};
      const fields = {};
      rest.forEach((word, index) => {
        const eq = word.indexOf('=');
        if (eq >= 0) {
          if (eq === 0) throw bad(`a field needs a name; usage: ${usage}`);
          fields[word.slice(0, eq)] = word.slice(eq + 1);
        } else if (index === 0) {
          args.alert = word;
        } else {
          throw bad(`expected name=value, got "${word}"; usage: ${usage}`);
        }
      });
      if (Object.keys(fields).length) args.fields = fields;
      return { cmd, args };
    }
    case 'login':
      if (rest.length !== 2) throw bad(`usage: ${usage}`);
      return { cmd, args: { user: rest[0], password: rest[1] } };
    case 'fault': {
      if (rest.length === 0) throw bad(`usage: ${usage}`);
      const args = { service: rest[0] };
      let more = rest.slice(1);
      if (more.length && /^-?\d+$/.test(more[0])) { args.count = Number(more[0]); more = more.slice(1); }
      if (more.length) args.message = more.join(' ');
      return { cmd, args };
    }
    default:
      if (rest.length) throw bad(`${cmd} takes no arguments; usage: ${usage}`);
      return { cmd, args: {} };
  }
}
