import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const PROTOCOL = path.join(ROOT, 'protocol');
const SERVER = process.env.VIEWLINE_SERVER ?? path.join(ROOT, '.build/debug/viewline-server');

/** Starts a real viewline-server on port 0; resolves with `{port, stop}`. */
export async function startServer(args = ['--admin']) {
  const child = spawn(SERVER, ['--port', '0', '--db', ':memory:', '--log-level', 'error', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const [first] = await once(lines, 'line');
  if (!first.startsWith('listening on ')) throw new Error(`server did not start: ${first}`);
  const port = Number(first.split(':').pop());
  return {
    port,
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** A raw line connection: `send(line)`, `next()` resolves with the next parsed message. */
export async function rawConnection(port) {
  const socket = net.createConnection({ port, host: '127.0.0.1' });
  await once(socket, 'connect');
  const buffered = [];
  const waiting = [];
  readline.createInterface({ input: socket }).on('line', (line) => {
    const message = JSON.parse(line);
    if (waiting.length) waiting.shift()(message);
    else buffered.push(message);
  });
  return {
    send: (line) => socket.write(line + '\n'),
    next: () => (buffered.length ? Promise.resolve(buffered.shift()) : new Promise((resolve) => waiting.push(resolve))),
    close: () => socket.destroy(),
  };
}

/** Deep equality where the expectation "$any" matches any value. */
export function matches(actual, expected) {
  if (expected === '$any') return true;
  if (Array.isArray(expected)) return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matches(actual[i], e));
  if (expected && typeof expected === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const keys = Object.keys(expected);
    return keys.length === Object.keys(actual).length && keys.every((k) => k in actual && matches(actual[k], expected[k]));
  }
  return actual === expected;
}
