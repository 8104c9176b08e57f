// Several nodes over one PostgreSQL: attach follows `moved`, and a reconnect carries
// on on another node when the session's node is killed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import { Client, parseAddress } from '../src/viewline.mjs';
import { freePort, startPostgres, startServer } from './helpers.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a cluster of nodes', () => {
  let postgres;
  const servers = [];
  before(async () => { postgres = await startPostgres(); });
  after(async () => {
    for (const server of servers) await server.stop();
    postgres?.stop();
  });

  async function startCluster(count = 2) {
    const url = postgres.newDatabase();
    const nodes = [];
    for (let i = 0; i < count; i++) nodes.push(await startServer(['--postgres', url, '--node-timeout', '1']));
    servers.push(...nodes);
    return nodes;
  }

  test('addresses parse as moved and --nodes give them', () => {
    assert.deepEqual(parseAddress('127.0.0.1:7879'), { host: '127.0.0.1', port: 7879 });
    assert.deepEqual(parseAddress('[::1]:7879'), { host: '::1', port: 7879 });
    assert.equal(parseAddress('no-port'), null);
  });

  test('attach follows moved to the node that owns the session', async (t) => {
    if (!postgres) return t.skip('PostgreSQL is not installed');
    const [a, b] = await startCluster();
    const owner = await Client.connect({ port: a.port });
    await owner.command('login alice wonderland');
    await sleep(300);  // the record is written in the next batch
    const other = await Client.connect({ port: b.port });
    const result = await other.attach(owner.token);
    assert.equal(result.snapshot, true);
    assert.equal((await other.waitForDisplay('session')).user, 'alice');
    await other.command('search pizza');  // on node A now, in alice's session
    await owner.waitForDisplay('search', (s) => s.query === 'pizza');
    owner.close();
    other.close();
  });

  test('a reconnect carries on on another node when the session\'s node is killed', async (t) => {
    if (!postgres) return t.skip('PostgreSQL is not installed');
    const [a, b] = await startCluster();
    const vl = await Client.connect({ port: a.port, reconnect: true, nodes: [`127.0.0.1:${b.port}`] });
    await vl.command('login bob builder');
    await vl.command('draft written on node A');
    await sleep(300);
    const resumed = once(vl, 'resumed');
    await a.kill();
    await resumed;
    const alert = await vl.waitForAlert({ timeout: 20000 });
    assert.equal(alert.message, 'You have unsaved data from last time. Do you want to save it?');
    assert.equal(vl.views.session.user, 'bob');
    assert.equal(vl.views.draft.text, 'written on node A');
    assert.deepEqual(await vl.command('ping'), { pong: true });
    vl.close();
  });
});

describe('a rolling restart', () => {
  let postgres;
  const servers = [];
  before(async () => { postgres = await startPostgres(); });
  after(async () => {
    for (const server of servers) await server.stop();
    postgres?.stop();
  });

  test('a reconnecting client carries on in its session while each node in turn stops and comes back', async (t) => {
    if (!postgres) return t.skip('PostgreSQL is not installed');
    const url = postgres.newDatabase();
    const ports = [await freePort(), await freePort()];
    const start = (port) => startServer(['--postgres', url, '--node-timeout', '1', '--drain-seconds', '1', '--port', String(port)]);
    const nodes = [await start(ports[0]), await start(ports[1])];
    const vl = await Client.connect({ port: ports[0], reconnect: true, nodes: [`127.0.0.1:${ports[1]}`], timeout: 20_000 });
    await vl.command('login alice wonderland');
    await vl.command('search golden');
    await vl.waitForDisplay('search', (s) => !s.loading);
    const { token, session } = vl;
    for (const index of [0, 1]) {  // the client is on this node now
      const bye = vl.waitFor((m) => m.type === 'bye', { timeout: 20_000 });
      await nodes[index].stop();  // SIGTERM: hand the sessions over, `bye` code shutdown, exit
      assert.equal((await bye).code, 'shutdown');
      assert.deepEqual((await vl.command('state session')).state, { user: 'alice', loggedIn: true });  // on the other node
      assert.equal((await vl.command('state search')).state.query, 'golden');
      assert.equal(vl.resumed, index + 1);
      assert.equal(vl.token, token);
      assert.equal(vl.session, session);
      nodes[index] = await start(ports[index]);
    }
    await vl.close();
    servers.push(...nodes);
  });

  test('a command a shutdown left unanswered never ran, and goes again to the next node', async (t) => {
    if (!postgres) return t.skip('PostgreSQL is not installed');
    // Node A's drain (1 s) runs out while `saved` waits 3 s on the remote store: `saved` is
    // answered (`unavailable`) before the `bye`; `state session`, sent behind it, never ran
    // on A, so the client sends it again on node B (PROTOCOL §4).
    const url = postgres.newDatabase();
    const ports = [await freePort(), await freePort()];
    const start = (port) => startServer(['--postgres', url, '--node-timeout', '1', '--drain-seconds', '1', '--backend-latency', '3000', '--port', String(port)]);
    const nodes = [await start(ports[0]), await start(ports[1])];
    servers.push(...nodes);
    const vl = await Client.connect({ port: ports[0], reconnect: true, nodes: [`127.0.0.1:${ports[1]}`], timeout: 20_000 });
    await vl.command('login alice wonderland');
    const saved = vl.command('saved').then(() => null, (error) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const state = vl.command('state session');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await nodes[0].stop();
    assert.equal((await saved)?.code, 'unavailable');
    assert.deepEqual((await state).state, { user: 'alice', loggedIn: true });
    assert.equal(vl.resumed, 1);
    await vl.close();
  });
});
