// Sessions outlive connections: attach by token, and opt-in automatic resume.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import { Client } from '../src/viewline.mjs';
import { startServer } from './helpers.mjs';

describe('resuming a session', () => {
  let server;
  before(async () => { server = await startServer(['--admin', '--backend-latency', '200']); });
  after(async () => { await server.stop(); });

  test('attach moves a connection to another session and replays from a rev', async () => {
    const first = await Client.connect({ port: server.port });
    await first.command('search golden');
    await first.waitForDisplay('search', (s) => !s.loading);
    const second = await Client.connect({ port: server.port });
    const result = await second.attach(first.token, 0);
    assert.deepEqual(result, { session: first.session, rev: 2, replayed: 2, snapshot: false });
    assert.equal((await second.waitForDisplay('search', (s) => !s.loading)).query, 'golden');
    await assert.rejects(second.attach('0'.repeat(48)), (e) => e.code === 'bad_token');
    first.close();
    second.close();
  });

  test('a search survives a dropped connection', async () => {
    const vl = await Client.connect({ port: server.port, reconnect: true });
    await vl.command('search golden');
    await vl.waitForDisplay('search', (s) => s.loading);
    const resumed = once(vl, 'resumed');
    vl.drop();  // the results arrive while the client is away
    const state = await vl.waitForDisplay('search', (s) => !s.loading);
    await resumed;
    assert.equal(state.query, 'golden');
    assert.ok(state.results.length > 0);
    assert.equal(vl.resumed, 1);
    assert.deepEqual(await vl.command('ping'), { pong: true });
    vl.close();
  });

  test('a save retry loop survives a dropped connection', async () => {
    const vl = await Client.connect({ port: server.port, reconnect: true });
    await vl.command('login alice wonderland');
    await vl.command('draft', { text: 'written before the drop' });
    await vl.command('fault save 2 disk full');
    await vl.command('save');
    await vl.waitForAlert();
    const resumed = once(vl, 'resumed');
    vl.drop();
    await resumed;
    await vl.confirm();  // the alert is still up on the server
    await vl.waitForAlert();
    await vl.confirm();
    await vl.waitForDisplay('draft', (s) => !s.pending);
    const saved = await vl.command('saved');
    assert.equal(saved.drafts[0].text, 'written before the drop');
    vl.close();
  });

  test('endOthers takes the session back and keeps the new token', async () => {
    const owner = await Client.connect({ port: server.port, reconnect: true });
    const other = await Client.connect({ port: server.port, reconnect: true });
    const old = owner.token;
    const otherClosed = once(other, 'close');
    await other.attach(old);
    await owner.waitForDisplay('connections', (s) => s.count === 2);
    const result = await owner.endOthers();
    assert.equal(result.ended, 1);
    assert.equal(owner.token, result.token);
    assert.notEqual(owner.token, old);
    await otherClosed;
    assert.equal(other.bye.code, 'revoked');
    assert.equal(other.resumed, 0);
    const intruder = await Client.connect({ port: server.port });
    await assert.rejects(intruder.attach(old), (e) => e.code === 'bad_token');
    intruder.close();
    const resumed = once(owner, 'resumed');
    owner.drop();
    await resumed;
    assert.deepEqual(await owner.command('ping'), { pong: true });
    owner.close();
  });

  test('no resume after quit', async () => {
    const vl = await Client.connect({ port: server.port, reconnect: true });
    const closed = once(vl, 'close');
    await vl.command('quit');
    await closed;
    assert.equal(vl.resumed, 0);
    assert.ok(vl.closed);
  });
});
