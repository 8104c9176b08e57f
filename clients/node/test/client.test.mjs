// The client driving every flow against a real server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client, ViewlineError } from '../src/viewline.mjs';
import { startServer } from './helpers.mjs';

describe('Client', () => {
  let server;
  before(async () => { server = await startServer(); });
  after(async () => { await server.stop(); });

  test('search, inline and object forms', async () => {
    const vl = await Client.connect({ port: server.port });
    assert.equal(vl.welcome.protocol, 1);
    assert.ok(vl.token.length >= 32);
    assert.deepEqual(await vl.command('search thai food'), { accepted: true, query: 'thai food' });
    const state = await vl.waitForDisplay('search', (s) => !s.loading);
    assert.ok(state.results.length > 0 && state.results.every((r) => r.cuisine === 'thai'));
    await vl.command('search', { query: 'korean' });
    await vl.waitForDisplay('search', (s) => s.query === 'korean' && !s.loading);
    assert.equal(vl.views.search.query, 'korean');
    vl.close();
  });

  test('errors reject with the protocol code', async () => {
    const vl = await Client.connect({ port: server.port });
    await assert.rejects(vl.command('confirm'), (e) => e instanceof ViewlineError && e.code === 'no_alert');
    await assert.rejects(vl.command('teleport', { to: 'mars' }), (e) => e.code === 'unknown_command');
    vl.close();
  });

  test('a failing save answered until it succeeds', async () => {
    const vl = await Client.connect({ port: server.port });
    await vl.command('login alice wonderland');
    await vl.command('draft', { text: 'node note' });
    await vl.command('fault save 2 disk full');
    await vl.command('save');
    for (let i = 0; i < 2; i++) {
      const alert = await vl.waitForAlert();
      assert.match(alert.message, /disk full/);
      await vl.confirm();
    }
    await vl.waitForDisplay('draft', (s) => !s.pending);
    assert.equal(vl.alert, null);
    const { drafts } = await vl.command('saved');
    assert.equal(drafts[0].text, 'node note');
    vl.close();
  });

  test('playlist: login alert with fields, then every page', async () => {
    const vl = await Client.connect({ port: server.port });
    await vl.command('playlist');
    const alert = await vl.waitForAlert();
    assert.deepEqual(alert.fields.map((f) => f.name), ['user', 'password']);
    await vl.confirm({ user: 'bob', password: 'builder' });
    const state = await vl.waitForDisplay('playlist', (s) => s.step === 'complete');
    assert.deepEqual(state.items.map((i) => i.position), [1, 2, 3, 4, 5, 6, 7]);
    await assert.rejects(vl.command('more'), (e) => e.code === 'nothing_pending');
    vl.close();
  });

  test('events as an async iterator, and quit', async () => {
    const vl = await Client.connect({ port: server.port });
    await vl.command('search golden');
    const seen = [];
    for await (const event of vl.events()) {
      seen.push(event);
      if (event.type === 'display' && !event.state.loading) break;
    }
    assert.deepEqual(seen.map((e) => e.state.loading), [true, false]);
    await vl.command('quit');
    const bye = await vl.waitFor((m) => m.type === 'bye');
    assert.equal(bye.reason, 'client quit');
  });

  test('contacts with a failing sync keep their items', async () => {
    const vl = await Client.connect({ port: server.port });
    await vl.command('contacts');
    const before = await vl.waitForDisplay('contacts', (s) => !s.syncing);
    await vl.command('fault sync 1 remote unreachable');
    await vl.command('sync');
    const alert = await vl.waitForAlert();
    assert.match(alert.message, /remote unreachable/);
    await vl.confirm();
    await vl.settle();
    assert.deepEqual(vl.views.contacts.items, before.items);
    vl.close();
  });
});
