// Through Debian's HAProxy, run with the shipped deploy/haproxy.cfg: a client that
// knows only the proxy resumes its session through it when the node behind restarts.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { once } from 'node:events';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '../src/viewline.mjs';
import { ROOT, freePort, startServer } from './helpers.mjs';

const haproxy = spawnSync('haproxy', ['-v']).status === 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('behind HAProxy', { skip: !haproxy && 'haproxy is not installed (./dev setup installs it)' }, () => {
  const stops = [];
  after(async () => { for (const stop of stops.reverse()) await stop(); });

  test('a client resumes through the proxy after its node restarts', async () => {
    const port = {};
    for (const name of ['lines', 'web', 'n0', 'n1', 'n2', 'lines0', 'web0', 'ops0', 'x1', 'x2', 'x3', 'x4', 'x5', 'x6']) port[name] = await freePort();
    const env = { ...process.env, VIEWLINE_LB_LINES: `127.0.0.1:${port.lines}`, VIEWLINE_LB_WEB: `127.0.0.1:${port.web}` };
    const others = [[port.x1, port.x2, port.x3], [port.x4, port.x5, port.x6]];
    for (const i of [0, 1, 2]) {
      const [lines, web, ops] = i === 0 ? [port.lines0, port.web0, port.ops0] : others[i - 1];
      Object.assign(env, {
        [`VIEWLINE_LB_NODE${i}`]: `127.0.0.1:${port[`n${i}`]}`, [`VIEWLINE_NODE${i}_LINES`]: `127.0.0.1:${lines}`,
        [`VIEWLINE_NODE${i}_WEB`]: `127.0.0.1:${web}`, [`VIEWLINE_NODE${i}_OPS_HOST`]: '127.0.0.1', [`VIEWLINE_NODE${i}_OPS_PORT`]: String(ops),
      });
    }
    const proxy = spawn('haproxy', ['-db', '-f', path.join(ROOT, 'deploy', 'haproxy.cfg')], { env, stdio: 'ignore' });
    stops.push(async () => { proxy.kill(); await once(proxy, 'exit'); });
    const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-lb-')), 'viewline.sqlite');
    const args = ['--db', db, '--drain-seconds', '1', '--port', String(port.lines0), '--web-port', String(port.web0),
      '--metrics-port', String(port.ops0), '--trusted-proxy', '127.0.0.1', '--advertise', `127.0.0.1:${port.n0}`];
    let node = await startServer(args);
    stops.push(async () => node.stop());

    // The proxy serves once the node's health check has passed twice.
    const retry = { reconnect: true, reconnectAttempts: 50, backoff: () => 200 };
    let vl;
    for (let tries = 0; !vl; tries++) {
      try { vl = await Client.connect({ port: port.lines, ...retry }); } catch (error) { if (tries > 75) throw error; await sleep(200); }
    }
    await vl.command('login alice wonderland');
    await vl.command('search golden');
    await vl.waitForDisplay('search', (s) => !s.loading);
    const { session, token } = vl;
    const resumed = once(vl, 'resumed');
    await node.stop();
    node = await startServer(args);
    await resumed;
    assert.equal((await vl.command('state search')).state.query, 'golden');
    assert.deepEqual((await vl.command('state session')).state, { user: 'alice', loggedIn: true });
    assert.equal(vl.session, session);
    assert.equal(vl.token, token);
    vl.close();
  });
});
