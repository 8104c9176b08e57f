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
 * A throwaway PostgreSQL from Debian's packages on a free loopback port (as the
 * `postgres` user when we are root: initdb refuses root). Resolves with
 * `{newDatabase(), stop()}`; `newDatabase()` returns a fresh database's URL.
 */
export async function startPostgres() {
  const { execFileSync } = await import('node:child_process');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const versions = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql').map(Number).sort((a, b) => a - b) : [];
  if (!versions.length) return null;
  const bin = `/usr/lib/postgresql/${versions.at(-1)}/bin`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-node-pg-'));
  const root = process.getuid() === 0;
  if (root) execFileSync('chown', ['postgres:postgres', dir]);
  const run = (program, args) => execFileSync(root ? 'runuser' : `${bin}/${program}`,
    root ? ['-u', 'postgres', '--', `${bin}/${program}`, ...args] : args, { stdio: 'ignore' });
  const probe = net.createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const port = probe.address().port;
  probe.close();
  run('initdb', ['-D', `${dir}/data`, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  run('pg_ctl', ['-D', `${dir}/data`, '-l', `${dir}/log`, '-w', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start']);
  let count = 0;
  return {
    newDatabase() {
      const name = `node${process.pid}_${++count}`;
      run('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-qc', `CREATE DATABASE ${name}`]);
      return `postgres://postgres@127.0.0.1:${port}/${name}?sslmode=disable`;
    },
    stop() {
      run('pg_ctl', ['-D', `${dir}/data`, '-m', 'immediate', '-w', 'stop']);
      fs.rmSync(dir, { recursive: true, force: true });
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
