// The inline command grammar of protocol v1: the same tokenizer the server uses.
// `split` and `quote` build lines from values holding spaces or quotes
// (`'draft ' + quote(text)`); which arguments the words stand for is the server's
// business: `command(line)` sends the line as typed and the server parses it.
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
