// Several nodes over one PostgreSQL: attach follows `moved`, and a reconnect carries
// on on another node when the session's node is killed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import { Client, parseAddress } from '../src/viewline.mjs';
import { startPostgres, startServer } from './helpers.mjs';

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
