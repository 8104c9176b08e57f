// Time, lifecycle and errors: the client never hangs, never crashes on what the
// server sends, resumes after a `bye` that leaves the session alive and stops after
// one that ends it. Error paths against a scripted server; flows against a real one.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  Client, ClientTimeoutError, ConnectError, ConnectionClosedError, ThrottledError, ViewlineError,
} from '../src/viewline.mjs';
import { acceptResume, echo, fakeServer } from './fake-server.mjs';
import { startServer } from './helpers.mjs';

const silent = () => new Promise(() => {});
const welcomeThenSilent = async (peer) => { peer.welcome(); while (await peer.receive() !== null); };

describe('time', () => {
  test('no welcome in time is a ConnectError', async () => {
    const server = await fakeServer(silent);
    const started = Date.now();
    await assert.rejects(Client.connect({ port: server.port, connectTimeout: 200 }), (e) => e instanceof ConnectError && e.code === 'connect_failed');
    assert.ok(Date.now() - started < 2000);
    server.stop();
  });

  test('nothing listening is a ConnectError with the cause', async () => {
    const server = await fakeServer(silent);
    server.stop();
    await assert.rejects(Client.connect({ port: server.port }), (e) => e instanceof ConnectError && e.cause?.code === 'ECONNREFUSED');
  });

  test('a silent server times a command out, by default and per call, and an AbortSignal stops a wait', async () => {
    const server = await fakeServer(welcomeThenSilent);
    const vl = await Client.connect({ port: server.port, timeout: 200 });
    await assert.rejects(vl.command('ping'), ClientTimeoutError);
    const started = Date.now();
    await assert.rejects(vl.command('ping', null, { timeout: 50 }), ClientTimeoutError);
    assert.ok(Date.now() - started < 180);
    const controller = new AbortController();
    const waiting = vl.waitForAlert({ timeout: 10_000, signal: controller.signal });
    controller.abort();
    await assert.rejects(waiting, (e) => e.code === 'aborted');
    vl.destroy();
    server.stop();
  });

  test('a line goes as typed and a name with args as JSON; options never collide with arguments', async () => {
    const server = await fakeServer(echo);
    const vl = await Client.connect({ port: server.port });
    const { sent: line } = await vl.command('add buy milk');
    assert.deepEqual(line, { id: line.id, line: 'add buy milk' });
    const { sent } = await vl.command('wait', { timeout: 500 }, { timeout: 5000 });
    assert.deepEqual(sent, { id: sent.id, cmd: 'wait', args: { timeout: 500 } });
    await vl.close();
    server.stop();
  });

  test('a command longer than the welcome\'s maxLineBytes is refused at once, not sent, and the connection goes on', async () => {
    const server = await fakeServer(async (peer) => {
      peer.send({ type: 'welcome', protocol: 1, session: 's1', token: 't'.repeat(48), server: 'fake/1.3', maxLineBytes: 64 });
      for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { sent: message });
    });
    const unlimited = await fakeServer(echo);  // a welcome without maxLineBytes: no bound on what the client sends
    const vl = await Client.connect({ port: server.port, timeout: 5000 });
    const other = await Client.connect({ port: unlimited.port });
    try {
      const started = Date.now();
      const tooLong = (e) => e instanceof ViewlineError && e.code === 'line_too_long' && /maxLineBytes/.test(e.message);
      await assert.rejects(vl.command(`search ${'x'.repeat(100)}`), tooLong);
      await assert.rejects(vl.command('search', { query: 'x'.repeat(100) }), tooLong);
      await assert.rejects(vl.command(`search ${'é'.repeat(30)}`), tooLong);  // 55 characters, 85 bytes
      assert.ok(Date.now() - started < 1000, 'refused without waiting for a reply');
      assert.equal((await vl.command('ping')).sent.line, 'ping');
      assert.deepEqual(server.lines.map((line) => line.line), ['ping'], 'only the short command reached the server');
      assert.equal((await other.command(`search ${'x'.repeat(100_000)}`)).sent.line.length, 100_007);
    } finally {
      vl.destroy();
      other.destroy();
      server.stop();
      unlimited.stop();
    }
  });

  test('only a positive whole maxLineBytes bounds the commands (64.0 is 64); anything else is ignored', async () => {
    const long = `search ${'x'.repeat(100)}`;
    for (const [said, bounds] of [['64', true], ['64.0', true], ['0', false], ['-64', false], ['"64"', false], ['true', false], ['null', false], ['64.5', false], ['[64]', false]]) {
      const server = await fakeServer(async (peer) => {
        peer.send(`{"type":"welcome","protocol":1,"session":"s1","token":"${'t'.repeat(48)}","server":"fake/1.3","maxLineBytes":${said}}`);
        for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { sent: message });
      });
      const vl = await Client.connect({ port: server.port, timeout: 5000 });
      try {
        if (bounds) await assert.rejects(vl.command(long), (e) => e instanceof ViewlineError && e.code === 'line_too_long', `maxLineBytes ${said}`);
        else assert.equal((await vl.command(long)).sent.line, long, `maxLineBytes ${said}`);
      } finally {
        vl.destroy();
        server.stop();
      }
    }
  });

  test('each connection\'s welcome says its own maxLineBytes: a resumed one without it lifts the bound', async () => {
    const server = await fakeServer(async (peer) => {
      if (peer.number > 0) return acceptResume(peer);
      peer.send({ type: 'welcome', protocol: 1, session: 's1', token: 't'.repeat(48), server: 'fake/1.3', maxLineBytes: 64 });
      for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { sent: message });
    });
    const vl = await Client.connect({ port: server.port, timeout: 5000, reconnect: true, backoff: () => 10 });
    const long = `search ${'x'.repeat(100)}`;
    try {
      await assert.rejects(vl.command(long), (e) => e.code === 'line_too_long');
      const resumed = new Promise((resolve) => vl.once('resumed', resolve));
      vl.drop();
      await resumed;
      assert.equal((await vl.command(long)).sent.line, long);
    } finally {
      vl.destroy();
      server.stop();
    }
  });

  test('the ping interval resumes a half-open connection', async () => {
    const server = await fakeServer((peer) => (peer.number === 0 ? welcomeThenSilent(peer) : acceptResume(peer)));
    const vl = await Client.connect({ port: server.port, reconnect: true, pingInterval: 100, timeout: 300 });
    for (let i = 0; i < 50 && vl.resumed === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(vl.resumed, 1);
    assert.equal((await vl.command('ping')).sent.line, 'ping');
    vl.destroy();
    server.stop();
  });

  test('backoff is pluggable and attempts are bounded', async () => {
    const rounds = [];
    const server = await fakeServer(async (peer) => { peer.welcome(); await peer.receive(); peer.close(); });
    const vl = await Client.connect({ port: server.port, reconnect: true, reconnectAttempts: 3, backoff: (n) => { rounds.push(n); return 10; } });
    server.stop();
    await assert.rejects(vl.command('ping'), ConnectionClosedError);
    await new Promise((resolve) => (vl.closed ? resolve() : vl.once('close', resolve)));
    assert.deepEqual(rounds, [0, 1, 2]);
  });
});

describe('what the server sends', () => {
  test('a line that is not JSON is reported, never thrown', async () => {
    const server = await fakeServer(async (peer) => {
      peer.send('<html>not a viewline server</html>');
      peer.welcome();
      const message = await peer.receive();
      peer.send('\u0000garbage');
      peer.reply(message, { pong: true });
    });
    const vl = await Client.connect({ port: server.port });
    const errors = [];
    vl.on('error', (error) => errors.push(error));
    assert.deepEqual(await vl.command('ping'), { pong: true });
    assert.equal(errors[0].code, 'bad_message');
    vl.destroy();
    server.stop();
  });

  describe('against a real server', () => {
    let server;
    before(async () => { server = await startServer(); });
    after(async () => { await server.stop(); });

    test('a throwing onMessage callback is reported as an error event', async () => {
      const vl = await Client.connect({ port: server.port, onMessage: () => { throw new Error('a bug in the callback'); } });
      const errors = [];
      vl.on('error', (error) => errors.push(error.message));
      assert.deepEqual(await vl.command('ping'), { pong: true });
      assert.ok(errors.includes('a bug in the callback'));
      await vl.close();
    });

    test('a throwing waitFor predicate rejects its waiter; the client goes on', async () => {
      const vl = await Client.connect({ port: server.port });
      const waiting = vl.waitFor(() => { throw new RangeError('bad predicate'); });
      await vl.command('search golden');
      await assert.rejects(waiting, RangeError);
      assert.deepEqual(await vl.command('ping'), { pong: true });
      await vl.close();
    });

    test('confirm with no alert and a line with bad syntax reject instead of throwing', async () => {
      const vl = await Client.connect({ port: server.port });
      const confirming = vl.confirm();
      assert.ok(confirming instanceof Promise);
      await assert.rejects(confirming, (e) => e.code === 'no_alert');
      await assert.rejects(vl.command('draft "unbalanced'), (e) => e.code === 'bad_syntax');
      await vl.close();
    });

    test('quit ends the session; close keeps it', async () => {
      const kept = await Client.connect({ port: server.port });
      const { token, session } = kept;
      await kept.close();
      const other = await Client.connect({ port: server.port });
      assert.equal((await other.attach(token)).session, session);
      await other.quit();
      assert.ok(other.closed);
      const third = await Client.connect({ port: server.port });
      await assert.rejects(third.attach(token), (e) => e.code === 'bad_token');
      await third.close();
    });

    test('close waits for the replies of commands already sent; destroy does not', async () => {
      const vl = await Client.connect({ port: server.port });
      const settling = vl.settle();
      await vl.command('search golden');
      const closing = vl.close();
      assert.deepEqual(await settling, { settled: true });
      await closing;
      assert.ok(vl.closed);
      const other = await Client.connect({ port: server.port });
      const pending = other.command('wait 2000');
      other.destroy();
      await assert.rejects(pending, ConnectionClosedError);
    });

    test('await using closes the client at the end of the block', async () => {
      const vl = await Client.connect({ port: server.port });
      await vl[Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]();
      assert.ok(vl.closed);
    });

    test('a snapshot resets views, alert and rev', async () => {
      const owner = await Client.connect({ port: server.port });
      const other = await Client.connect({ port: server.port });
      await owner.command('contacts');
      await owner.settle();
      await other.command('fault save 1 down');
      await other.command('login alice wonderland');
      await other.command('draft lost');
      for (const query of ['a', 'b', 'c', 'd', 'e', 'f']) await other.command(`search ${query}`);
      await other.settle();
      await other.command('save');
      await other.waitForAlert();
      const revBefore = other.rev;
      assert.ok(other.alert && revBefore >= 12);
      const result = await other.attach(owner.token);
      assert.equal(result.snapshot, true);
      assert.equal(other.alert, null);
      await other.waitForDisplay('playlist');
      assert.equal(other.views.draft.text, '');
      assert.deepEqual(other.views.contacts, owner.views.contacts);
      assert.ok(result.rev < other.rev && other.rev < revBefore);
      await owner.close();
      await other.close();
    });

    test('a closed client rejects at once and its event streams end', async () => {
      const vl = await Client.connect({ port: server.port });
      await vl.close();
      const started = Date.now();
      await assert.rejects(vl.waitForAlert({ timeout: 5000 }), ConnectionClosedError);
      await assert.rejects(vl.command('ping'), ConnectionClosedError);
      for await (const event of vl.events()) assert.fail(`an event after close: ${JSON.stringify(event)}`);
      assert.ok(Date.now() - started < 1000);
    });

    test('each events() reader gets every event in its own bounded queue', async () => {
      const vl = await Client.connect({ port: server.port, maxQueuedEvents: 4 });
      const first = vl.events();
      const second = vl.events();
      const a = first.next();
      const b = second.next();
      await vl.command('search golden');
      assert.equal((await a).value.rev, 1);
      assert.equal((await b).value.rev, 1);
      for (const query of ['a', 'b', 'c', 'd', 'e']) await vl.command(`search ${query}`);
      await vl.settle();
      await new Promise((r) => setTimeout(r, 100));
      const rest = [];
      for (let i = 0; i < 4; i++) rest.push((await first.next()).value.rev);
      assert.deepEqual(rest, [vl.rev - 3, vl.rev - 2, vl.rev - 1, vl.rev]);
      assert.ok(vl.droppedEvents > 0);
      await first.return();
      await second.return();
      await vl.close();
    });

    test('throttling carries the wait as a number', async () => {
      const vl = await Client.connect({ port: server.port });
      let throttled = null;
      for (let i = 0; i < 20 && !throttled; i++) {
        try {
          await vl.command('login alice wrong-password');
        } catch (error) {
          if (error instanceof ThrottledError) throttled = error;
          else assert.equal(error.code, 'login_failed');
        }
      }
      assert.ok(throttled instanceof ViewlineError);
      assert.equal(throttled.code, 'login_throttled');
      assert.ok(Number.isInteger(throttled.retryAfter) && throttled.retryAfter >= 1);
      assert.ok(!throttled.message.startsWith('login_throttled'), 'message is the server\'s words, as in Python');
      await vl.close();
    });
  });
});

describe('lifecycle', () => {
  test('an event the resumed connection brings with the attach reply finds the resume counted', async () => {
    const server = await fakeServer(async (peer) => {
      if (peer.number === 0) {
        peer.welcome();
        await new Promise((resolve) => setTimeout(resolve, 100));
        peer.send({ type: 'bye', reason: 'server shutting down', code: 'shutdown' });
        return peer.close();
      }
      peer.welcome('s2', 'u'.repeat(48));
      const attach = await peer.receive();
      // The reply and the alert the restored session raises, in one chunk: the
      // client reads both before anything awaiting the attach runs.
      peer.socket.write([
        { type: 'reply', re: attach.id, ok: true, result: { session: 's1', rev: 1, replayed: 0, snapshot: true } },
        { type: 'alert', id: 'a1', rev: 1, title: 'Unsaved', message: 'Save it?', actions: ['Save', 'Discard'] },
      ].map((message) => JSON.stringify(message) + '\n').join(''));
      for (let message; (message = await peer.receive()) !== null;) peer.reply(message, {});
    });
    const vl = await Client.connect({ port: server.port, reconnect: true, backoff: () => 10, timeout: 5000 });
    try {
      const alert = await vl.waitForAlert();
      assert.equal(alert.id, 'a1');
      assert.equal(vl.resumed, 1, 'the resume is counted before the wait that its events end returns');
      assert.equal(vl.bye, null);
      assert.equal(vl.alert?.id, 'a1');
    } finally {
      vl.destroy();
      server.stop();
    }
  });

  test('a shutdown bye is resumed; a final bye is not', async () => {
    const server = await fakeServer(async (peer) => {
      if (peer.number === 0) {
        peer.welcome();
        await peer.receive();
        peer.send({ type: 'bye', reason: 'server shutting down', code: 'shutdown' });
        return peer.close();
      }
      peer.welcome('s2', 'u'.repeat(48));
      const attach = await peer.receive();
      assert.deepEqual(attach.args, { token: 't'.repeat(48), lastRev: 0 });
      peer.reply(attach, { session: 's1', rev: 0, replayed: 0, snapshot: false });
      await peer.receive();
      peer.send({ type: 'bye', reason: 'session ended', code: 'ended' });
      peer.close();
    });
    const vl = await Client.connect({ port: server.port, reconnect: true });
    const byes = [];
    vl.on('event', (event) => { if (event.type === 'bye') byes.push(event.code); });
    await assert.rejects(vl.command('ping'), ConnectionClosedError);  // its reply was lost with the shutdown
    assert.deepEqual(await vl.command('ping').catch((e) => e.sessionEnded), true);
    assert.equal(vl.resumed, 1);
    assert.deepEqual(byes, ['shutdown', 'ended']);
    assert.equal(server.connections, 2);
    server.stop();
  });
});
