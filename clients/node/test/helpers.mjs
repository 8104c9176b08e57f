import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const PROTOCOL = path.join(ROOT, 'protocol');
const SERVER = process.env.VIEWLINE_SERVER ?? path.join(ROOT, '.build/debug/viewline-server');

/** A TCP port on 127.0.0.1 free a moment ago: for a server that must come back on it. */
export async function freePort() {
  const probe = net.createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address();
  probe.close();
  await once(probe, 'close');
  return port;
}

/** Starts a real viewline-server on port 0; resolves with `{port, stop}`. */
export async function startServer(args = ['--admin']) {
  const child = spawn(SERVER, ['--port', '0', '--db', ':memory:', '--log-level', 'error', '--demo', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const [first] = await once(lines, 'line');
  if (!first.startsWith('listening on ')) throw new Error(`server did not start: ${first}`);
  const port = Number(first.split(':').pop());
  return {
    port,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
    /** Kills the server at once, as a crash would. */
    async kill() {
      child.kill('SIGKILL');
      await once(child, 'exit');
    },
  };
}

/**
 * The Node side of the one PostgreSQL starter (`Tests/support/postgres`): the server
 * `VIEWLINE_TEST_POSTGRES` names (`dev test` starts one for every suite), or one of its own
 * when there is none. Resolves with `{newDatabase(), stop()}`, or `null` when
 * PostgreSQL is not installed; `newDatabase()` returns a fresh database's URL.
 */
export async function startPostgres() {
  const { execFileSync } = await import('node:child_process');
  const fs = await import('node:fs');
  const os = await import('node:os');
  if (!fs.existsSync('/usr/lib/postgresql')) return null;
  const script = path.join(ROOT, 'Tests/support/postgres');
  const run = (...args) => execFileSync(script, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  let dir = null;
  let url = process.env.VIEWLINE_TEST_POSTGRES;
  if (!url) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-node-pg-'));
    fs.chmodSync(dir, 0o755);  // the server runs as `postgres` when we are root
    url = run('start', dir);
  }
  return {
    newDatabase: () => run('createdb', url),
    stop() { if (dir) run('remove', dir); },
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
