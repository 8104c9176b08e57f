// What the waits return and what they take (the Swift client's semantics, shared by
// the three clients and checked by clients/conformance): waitForAlert gives the
// presented alert, waitForDisplay a state already shown, a wait takes the events up to
// what it returns and keeps the rest, and an `events()` loop left with `break` puts
// back what it took and did not yield.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client, ClientTimeoutError } from '../src/viewline.mjs';
import { fakeServer } from './fake-server.mjs';

/** Welcome; then for each command, the events its `args.events` lists, then its reply
 * (an `answer` reply to `confirm`, as a server's: the alert is no longer presented). */
async function emitter(peer) {
  peer.welcome();
  for (let message; (message = await peer.receive()) !== null;) {
    for (const event of message.args?.events ?? []) peer.send(event);
    peer.reply(message, message.cmd === 'confirm' ? { answer: 'confirm', alert: message.args.alert } : {});
  }
}

let rev = 0;
const display = (view, state) => ({ type: 'display', rev: ++rev, view, state });
const alert = (id, title = 'Error') => ({ type: 'alert', rev: ++rev, id, title, message: '…', actions: [{ role: 'confirm', label: 'OK' }] });
const dismiss = (id) => ({ type: 'dismiss', rev: ++rev, id });
const timedOut = (error) => error instanceof ClientTimeoutError;

describe('waits', () => {
  let server;
  let vl;
  before(async () => { server = await fakeServer(emitter); });
  after(() => server.stop());

  const connect = async () => { vl = await Client.connect({ port: server.port, timeout: 2000 }); return vl; };
  /** The server sends `events`, then the command's reply: every one is read when this resolves. */
  const emit = (...events) => vl.command('emit', { events });

  describe('waitForAlert', () => {
    test('an alert that arrives during a display wait is found by the next waitForAlert', async () => {
      await connect();
      const searching = vl.waitForDisplay('search', (s) => !s.loading);
      await emit(display('search', { loading: true }), alert('a1'), display('search', { loading: false }));
      assert.deepEqual(await searching, { loading: false });
      assert.equal((await vl.waitForAlert({ timeout: 300 })).id, 'a1');
      vl.destroy();
    });

    test('a second waitForAlert returns the same presented alert', async () => {
      await connect();
      await emit(alert('a1', 'Log in'));
      const first = await vl.waitForAlert();
      const second = await vl.waitForAlert({ timeout: 300 });
      assert.equal(first.id, 'a1');
      assert.equal(second, first);
      vl.destroy();
    });

    test('an alert no longer presented is not returned: the wait is for the next one', async () => {
      await connect();
      await emit(alert('a1'), dismiss('a1'));  // answered from another connection: dismissed
      await assert.rejects(vl.waitForAlert({ timeout: 200 }), timedOut);
      const waiting = vl.waitForAlert();
      await emit(alert('a2'));
      assert.equal((await waiting).id, 'a2');

      await vl.confirm();  // answered here: the reply says so, before its dismiss comes
      assert.equal(vl.alert, null);
      await assert.rejects(vl.waitForAlert({ timeout: 200 }), timedOut);
      vl.destroy();
    });

    test('the presented alert takes the queued events up to its own, not past it', async () => {
      await connect();
      await emit(display('list', { n: 1 }), alert('a1'), display('list', { n: 2 }));
      assert.equal((await vl.waitForAlert()).id, 'a1');
      const next = await vl.waitFor((m) => m.type === 'display', { timeout: 300 });
      assert.deepEqual(next.state, { n: 2 });
      vl.destroy();
    });
  });

  describe('waitForDisplay', () => {
    test('a state already shown answers at once, however many waits went past its display', async () => {
      await connect();
      await emit(display('session', { user: 'alice' }), display('search', { loading: true }), display('search', { loading: false }));
      assert.deepEqual(await vl.waitForDisplay('search', (s) => !s.loading, { timeout: 300 }), { loading: false });
      assert.deepEqual(await vl.waitForDisplay('search', (s) => !s.loading, { timeout: 300 }), { loading: false });
      assert.deepEqual(await vl.waitForDisplay('session', (s) => s.user === 'alice', { timeout: 300 }), { user: 'alice' });
      vl.destroy();
    });

    test('answered at once, it takes the queued events through the view\'s last display and keeps the later ones', async () => {
      await connect();
      await emit(display('search', { loading: true }), display('search', { loading: false }), display('other', { n: 1 }));
      assert.deepEqual(await vl.waitForDisplay('search', (s) => !s.loading), { loading: false });
      await assert.rejects(vl.waitFor((m) => m.view === 'search', { timeout: 200 }), timedOut);
      assert.deepEqual((await vl.waitFor((m) => m.view === 'other', { timeout: 300 })).state, { n: 1 });
      vl.destroy();
    });

    test('a state shown before the latest is found in the queue, and the waits move forward', async () => {
      await connect();
      await emit(display('search', { loading: true }), display('search', { loading: false }));
      assert.deepEqual(await vl.waitForDisplay('search', (s) => s.loading, { timeout: 300 }), { loading: true });
      assert.deepEqual(await vl.waitForDisplay('search', (s) => !s.loading, { timeout: 300 }), { loading: false });
      await assert.rejects(vl.waitForDisplay('search', (s) => s.loading, { timeout: 200 }), timedOut);
      vl.destroy();
    });
  });

  describe('the queue', () => {
    test('events that arrive during a wait they do not match are kept for later waits', async () => {
      await connect();
      const dismissed = vl.waitFor((m) => m.type === 'dismiss', { timeout: 300 });
      await emit(display('other', { n: 1 }), display('other', { n: 2 }));
      await assert.rejects(dismissed, timedOut);
      assert.deepEqual((await vl.waitFor((m) => m.view === 'other', { timeout: 300 })).state, { n: 1 });
      assert.deepEqual((await vl.waitFor((m) => m.view === 'other', { timeout: 300 })).state, { n: 2 });
      vl.destroy();
    });

    test('a wait that finds nothing queued takes nothing; the one it returns takes what came before it', async () => {
      await connect();
      await emit(display('other', { n: 1 }));
      await assert.rejects(vl.waitFor((m) => m.type === 'dismiss', { timeout: 200 }), timedOut);
      assert.equal(vl.queuedEvents, 1, 'the display it went past is still queued');
      const waiting = vl.waitFor((m) => m.type === 'dismiss');
      await emit(display('other', { n: 2 }), dismiss('a1'), display('other', { n: 3 }));
      assert.equal((await waiting).id, 'a1');
      assert.deepEqual((await vl.waitFor((m) => m.view === 'other', { timeout: 300 })).state, { n: 3 });
      vl.destroy();
    });

    test('two waits at once: each gets its own event, and what neither wants is kept', async () => {
      await connect();
      const alerted = vl.waitForAlert();
      const shown = vl.waitForDisplay('search', (s) => !s.loading);
      await emit(display('other', { n: 1 }), alert('a1'), display('search', { loading: false }), display('other', { n: 2 }));
      assert.equal((await alerted).id, 'a1');
      assert.deepEqual(await shown, { loading: false });
      assert.deepEqual((await vl.waitFor((m) => m.view === 'other', { timeout: 300 })).state, { n: 2 });
      vl.destroy();
    });
  });

  describe('events()', () => {
    test('leaving a loop with break puts back the queued events it took and did not yield', async () => {
      await connect();
      await emit(display('list', { n: 1 }), display('list', { n: 2 }), display('list', { n: 3 }));
      for await (const event of vl.events()) {
        assert.deepEqual(event.state, { n: 1 });
        break;
      }
      assert.equal(vl.queuedEvents, 2);
      const again = [];
      for await (const event of vl.events()) {
        again.push(event.state.n);
        if (again.length === 2) break;
      }
      assert.deepEqual(again, [2, 3]);
      vl.destroy();
    });

    test('nothing is put back before an event a wait returned meanwhile', async () => {
      await connect();
      await emit(display('list', { n: 1 }), display('list', { n: 2 }), display('list', { n: 3 }));
      const loop = vl.events();
      assert.deepEqual((await loop.next()).value.state, { n: 1 });
      const waiting = vl.waitFor((m) => m.view === 'list' && m.state.n === 4);
      await emit(display('list', { n: 4 }));
      await waiting;
      await loop.return();
      await assert.rejects(vl.waitFor((m) => m.view === 'list', { timeout: 200 }), timedOut);
      vl.destroy();
    });
  });
});
