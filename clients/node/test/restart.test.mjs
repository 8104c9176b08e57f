// A single node restarted on the same database file (a deploy, a crash): a
// reconnecting client carries on in the same session.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '../src/viewline.mjs';
import { freePort, startServer } from './helpers.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a single node restarted', () => {
  const servers = [];
  after(async () => { for (const server of servers) await server.stop(); });

  async function node() {
    const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-restart-')), 'viewline.sqlite');
    const port = await freePort();
    const args = ['--db', db, '--port', String(port), '--drain-seconds', '1'];
    const start = async () => { const server = await startServer(args); servers.push(server); return server; };
    return { port, start, server: await start() };
  }

  // Retries every 200 ms for up to 10 s: enough to wait out a restart.
  const retry = { reconnect: true, reconnectAttempts: 50, backoff: () => 200 };

  for (const [how, stop] of [['SIGTERM', (s) => s.stop()], ['SIGKILL', (s) => s.kill()]]) {
    test(`a reconnecting client keeps its session through a restart after ${how}`, async () => {
      const n = await node();
      const vl = await Client.connect({ port: n.port, ...retry });
      await vl.command('login alice wonderland');
      await vl.command('search golden');
      await vl.waitForDisplay('search', (s) => !s.loading);
      const { session, token } = vl;
      await sleep(300);  // past the record lag (a tenth of a second)
      const resumed = once(vl, 'resumed');
      await stop(n.server);
      n.server = await n.start();
      await resumed;
      assert.deepEqual((await vl.command('state session')).state, { user: 'alice', loggedIn: true });
      assert.equal((await vl.command('state search')).state.query, 'golden');
      assert.equal(vl.session, session);
      assert.equal(vl.token, token);
      vl.close();
    });
  }
});
