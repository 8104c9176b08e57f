// A hostile server: the client holds no more of what it sends than its limits allow,
// stops reading rather than queueing without end, rejects only with its own errors
// whatever numbers come, and never hands a terminal a control character. Every test
// runs against the scripted server in fake-server.mjs (no real server needed).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  Client, ConnectError, MovedError, ProtocolError, ThrottledError, ViewlineError, printable,
} from '../src/viewline.mjs';
import { LineSplitter, MAX_LINE_BYTES, MAX_QUEUED_EVENTS } from '../src/wire.mjs';
import { fakeServer } from './fake-server.mjs';

const MiB = 1 << 20;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition, what, ms = 5000) {
  for (const started = Date.now(); !condition(); await sleep(20)) {
    if (Date.now() - started > ms) assert.fail(`timed out waiting for ${what}`);
  }
}

/** Answers every further command with an ok reply. */
async function rest(peer) {
  for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { pong: true });
}

/** A script: welcome, then for the first command the hostile `lines`, then its reply. */
const afterFirstCommand = (...lines) => async (peer) => {
  peer.welcome();
  const message = await peer.receive();
  for (const line of lines) peer.send(line);
  if (message) peer.reply(message, { pong: true });
  await rest(peer);
};

/** Display events from rev 1 on, `perChunk` whole lines a chunk; `last()` is the last rev handed out. */
function events(perChunk = 64) {
  let rev = 0;
  const next = () => {
    const lines = [];
    for (let i = 0; i < perChunk; i++) {
      rev += 1;
      lines.push(JSON.stringify({ type: 'display', rev, view: 'ticker', state: { n: rev } }));
    }
    return Buffer.from(`${lines.join('\n')}\n`);
  };
  next.last = () => rev;
  return next;
}

/** A display line of exactly `size` bytes (without its line ending). */
function paddedDisplay(size) {
  const line = JSON.stringify({ type: 'display', rev: 1, view: 'pad', state: { p: '' } });
  return line.replace('"p":""', `"p":"${'x'.repeat(size - line.length)}"`);
}

describe('an endless line', () => {
  test('the splitter never holds more than the limit of an unfinished line, and throws as soon as it is passed', () => {
    const lines = new LineSplitter(1000);
    lines.push(Buffer.from('{"a":1}\r\n{"b":'));
    assert.equal(lines.length, 1);
    assert.equal(lines.shift(), '{"a":1}\r');
    for (let i = 0; i < 99; i++) lines.push(Buffer.from('1'.repeat(10)));
    assert.ok(lines.held <= 1001);
    assert.throws(() => lines.push(Buffer.alloc(64 * 1024, 'x')), (e) => e instanceof ProtocolError && e.code === 'message_too_long');
    assert.equal(lines.held, 0);
  });

  test('a line trickled a byte per chunk costs its bytes, not an object per chunk', () => {
    const lines = new LineSplitter(MAX_LINE_BYTES);
    const before = process.memoryUsage().arrayBuffers;
    const one = Buffer.from('a');
    for (let i = 0; i < 512 * 1024; i++) lines.push(one);
    assert.equal(lines.held, 512 * 1024);
    // One buffer that doubles as it fills: at most the limit, never a Buffer per byte.
    assert.ok(process.memoryUsage().arrayBuffers - before <= MAX_LINE_BYTES + 4096);
    lines.push(Buffer.from('\n'));
    assert.equal(lines.shift(), 'a'.repeat(512 * 1024));
  });

  test('is refused within the limit, closes the client for good and is never resumed', async () => {
    let streamed = null;
    const server = await fakeServer(async (peer) => {
      peer.welcome();
      if (await peer.receive()) streamed = await peer.stream(Buffer.alloc(65536, 'x'), 16 * MiB);  // never a "\n"
    });
    const vl = await Client.connect({ port: server.port, reconnect: true });
    const reported = [];
    vl.on('error', (error) => reported.push(error));
    await assert.rejects(vl.command('ping'), (e) => e instanceof ProtocolError && e.code === 'message_too_long' && e.message.includes(String(MAX_LINE_BYTES)));
    assert.ok(vl.closed);
    assert.equal(reported[0]?.code, 'message_too_long');
    await assert.rejects(vl.command('ping'), ProtocolError);  // every call says why
    await assert.rejects(vl.waitForAlert({ timeout: 1000 }), ProtocolError);
    await assert.rejects((async () => { for await (const event of vl.events()) assert.fail(String(event)); })(), ProtocolError);
    await until(() => streamed !== null, 'the server to give up');
    assert.ok(streamed < 16 * MiB, `the client took ${streamed} bytes of an endless line`);
    assert.equal(server.connections, 1);
    server.stop();
  });

  for (const ending of ['\n', '\r\n']) {
    test(`a line of the limit is taken and one byte more is not (${JSON.stringify(ending)})`, async () => {
      const limit = 2000;
      const server = await fakeServer(afterFirstCommand(paddedDisplay(limit) + ending.slice(0, -1), paddedDisplay(limit + 1) + ending.slice(0, -1)));
      const vl = await Client.connect({ port: server.port, maxLineBytes: limit });
      await assert.rejects(vl.command('ping'), (e) => e.code === 'message_too_long');
      assert.ok(vl.views.pad.p.startsWith('x'));  // the line of exactly the limit went through
      server.stop();
    });
  }

  test('an overlong welcome is a ConnectError caused by the ProtocolError', async () => {
    const server = await fakeServer((peer) => peer.send(paddedDisplay(5000)));
    await assert.rejects(Client.connect({ port: server.port, maxLineBytes: 1024 }), (e) => e instanceof ConnectError && e.cause?.code === 'message_too_long');
    server.stop();
  });

  test('limits must be whole numbers of at least 1', async () => {
    assert.throws(() => new Client({ maxLineBytes: 0 }), RangeError);
    await assert.rejects(Client.connect({ port: 1, maxQueuedEvents: -1 }), RangeError);
    await assert.rejects(Client.connect({ port: 1, maxQueuedEvents: 1.5 }), RangeError);
  });
});

describe('a flood of events', () => {
  /** Welcome, then events until the client stops reading; then, for the command that comes, its reply. */
  const floodThenAnswer = (outcome) => async (peer) => {
    peer.welcome();
    const next = events();
    const { stopped, sent } = await peer.flood(next);
    Object.assign(outcome, { stopped, sent, last: next.last() });
    const message = await peer.receive();
    if (message) peer.reply(message, { pong: true });
    await rest(peer);
  };

  test('a client nobody reads stops reading at a full queue; a command still gets its reply', async () => {
    const outcome = {};
    const server = await fakeServer(floodThenAnswer(outcome));
    const cap = 16;
    const vl = await Client.connect({ port: server.port, maxQueuedEvents: cap });
    await until(() => outcome.stopped !== undefined, 'the flood to end', 20_000);
    assert.ok(outcome.stopped && outcome.sent < 32 * MiB);
    // It read exactly what fills the queue, then stopped: nothing dropped.
    assert.equal(vl.queuedEvents, cap);
    assert.equal(vl.rev, cap);
    assert.equal(vl.droppedEvents, 0);
    await sleep(200);
    assert.equal(vl.rev, cap);
    assert.deepEqual(await vl.command('ping', null, { timeout: 20_000 }), { pong: true });
    assert.ok(vl.queuedEvents <= cap);
    assert.equal(vl.rev, outcome.last);
    assert.equal(vl.droppedEvents, outcome.last - cap);
    const newest = [];
    for (let i = 0; i < cap; i++) newest.push((await vl.waitFor(() => true)).rev);
    assert.deepEqual(newest, Array.from({ length: cap }, (_, i) => outcome.last - cap + 1 + i));
    vl.destroy();
    server.stop();
  });

  test('the default queue is bounded too', async () => {
    const outcome = {};
    const server = await fakeServer(floodThenAnswer(outcome));
    const vl = await Client.connect({ port: server.port });
    await until(() => outcome.stopped !== undefined, 'the flood to end', 20_000);
    assert.ok(outcome.stopped);
    assert.equal(vl.queuedEvents, MAX_QUEUED_EVENTS);
    assert.equal(vl.rev, MAX_QUEUED_EVENTS);
    vl.destroy();
    server.stop();
  });

  const sendAll = (total) => async (peer) => {
    peer.welcome();
    const next = events(100);
    while (next.last() < total) peer.socket.write(next());
    await rest(peer);
  };

  test('a slow events() loop loses nothing: the client waits for it', async () => {
    const total = 3000;
    const server = await fakeServer(sendAll(total));
    const vl = await Client.connect({ port: server.port, maxQueuedEvents: 8 });
    const seen = [];
    let most = 0;
    for await (const event of vl.events()) {
      seen.push(event.rev);
      most = Math.max(most, vl.queuedEvents);
      if (seen.length % 500 === 0) await sleep(50);
      if (event.rev === total) break;
    }
    assert.deepEqual(seen, Array.from({ length: total }, (_, i) => i + 1));
    assert.ok(most <= 8);
    assert.equal(vl.droppedEvents, 0);
    vl.destroy();
    server.stop();
  });

  test('an onMessage callback sees every event; waitFor\'s queue then keeps the newest', async () => {
    const total = 2000;
    const server = await fakeServer(sendAll(total));
    const seen = [];
    const vl = await Client.connect({ port: server.port, maxQueuedEvents: 8, onMessage: (m) => seen.push(m.rev) });
    await until(() => vl.rev === total, 'every event');
    assert.equal(seen.at(-1), total);
    assert.equal(vl.queuedEvents, 8);
    assert.equal(vl.droppedEvents, 0);
    vl.destroy();
    server.stop();
  });

  test('an \'event\' listener added to a client that stopped reading lets it go on', async () => {
    const total = 2000;
    const server = await fakeServer(sendAll(total));
    const vl = await Client.connect({ port: server.port, maxQueuedEvents: 8 });
    await until(() => vl.rev === 8, 'a full queue');
    await sleep(100);
    assert.equal(vl.rev, 8);
    const seen = [];
    vl.on('event', (event) => seen.push(event.rev));
    await until(() => vl.rev === total, 'every event');
    assert.deepEqual(seen, Array.from({ length: total - 8 }, (_, i) => i + 9));
    vl.destroy();
    server.stop();
  });
});

describe('hostile numbers and shapes', () => {
  const bad = {
    'rev 1e300': '{"type":"display","rev":1e300,"view":"v","state":{}}',
    'rev 1e19': '{"type":"display","rev":1e19,"view":"v","state":{}}',
    'rev 2**64 as an integer': '{"type":"display","rev":18446744073709551616,"view":"v","state":{}}',
    'rev 2**53': '{"type":"display","rev":9007199254740992,"view":"v","state":{}}',
    'rev of 5000 digits': `{"type":"display","rev":${'9'.repeat(5000)},"view":"v","state":{}}`,
    'rev 1e400 (Infinity)': '{"type":"alert","rev":1e400,"id":"a1","title":"","message":"","actions":[]}',
    'rev -1': '{"type":"dismiss","rev":-1,"id":"a1"}',
    'rev 1.5': '{"type":"display","rev":1.5,"view":"v","state":{}}',
    'rev a string': '{"type":"display","rev":"7","view":"v","state":{}}',
    'rev true': '{"type":"display","rev":true,"view":"v","state":{}}',
    'alert id a number': '{"type":"alert","rev":1,"id":1e300,"title":"","message":"","actions":[]}',
    'dismiss id a number': '{"type":"dismiss","rev":1,"id":5}',
    'display view a number': '{"type":"display","rev":1,"view":12,"state":{}}',
    'display state a list': '{"type":"display","rev":1,"view":"v","state":[1]}',
    'reply re an object': '{"type":"reply","re":{"a":1},"ok":true,"result":{}}',
    'reply re 1e400 (Infinity)': '{"type":"reply","re":1e400,"ok":true,"result":{}}',
    'reply ok a number': '{"type":"reply","re":null,"ok":1,"result":{}}',
    'reply result a number': '{"type":"reply","re":null,"ok":true,"result":5}',
    'reply error a string': '{"type":"reply","re":null,"ok":false,"error":"x"}',
    'attach rev 1e300': '{"type":"reply","re":null,"ok":true,"result":{"session":"s","rev":1e300,"replayed":0,"snapshot":true}}',
    'attach rev -3': '{"type":"reply","re":null,"ok":true,"result":{"session":"s","rev":-3,"replayed":0,"snapshot":true}}',
    'bye reason an object with toString': '{"type":"bye","reason":{"toString":1,"valueOf":1}}',
    'bye code a number': '{"type":"bye","reason":"x","code":5}',
    'an unknown type with rev 1e19': '{"type":"telepathy","rev":1e19}',
  };
  for (const [name, line] of Object.entries(bad)) {
    test(`${name} is a ProtocolError and nothing else`, async () => {
      const server = await fakeServer(afterFirstCommand(line));
      const vl = await Client.connect({ port: server.port, reconnect: true });
      const reported = [];
      vl.on('error', (error) => reported.push(error));
      await assert.rejects(vl.command('ping'), (e) => e instanceof ProtocolError && e.code === 'bad_message');
      assert.ok(vl.closed && vl.rev <= 1 && !('v' in vl.views));
      assert.ok(reported[0] instanceof ProtocolError);
      await assert.rejects(vl.command('ping'), ProtocolError);
      await sleep(50);
      assert.equal(server.connections, 1);  // closed for good: not resumed
      server.stop();
    });
  }

  test('a welcome without a session is a ConnectError', async () => {
    const server = await fakeServer((peer) => peer.send('{"type":"welcome","protocol":1,"session":5,"token":"t"}'));
    await assert.rejects(Client.connect({ port: server.port }), (e) => e instanceof ConnectError && e.cause?.code === 'bad_message');
    server.stop();
  });

  const taken = {
    'rev 3.0 is 3': ['{"type":"display","rev":3.0,"view":"v","state":{}}', (vl) => vl.rev === 3],
    'rev 2**53 - 1': ['{"type":"display","rev":9007199254740991,"view":"v","state":{}}', (vl) => vl.rev === 2 ** 53 - 1],
    'a huge number in a state is the state\'s': [`{"type":"display","rev":1,"view":"v","state":{"n":${'9'.repeat(5000)},"m":1e400,"r":-1.5}}`,
      (vl) => vl.views.v.n === Infinity && vl.views.v.r === -1.5],
    'NaN is not JSON: reported and skipped': ['{"type":"display","rev":NaN,"view":"v","state":{}}', (vl, errors) => vl.rev === 0 && errors[0]?.code === 'bad_message'],
    'deep nesting is not an object: reported and skipped': ['['.repeat(20_000) + ']'.repeat(20_000), (vl, errors) => errors.length === 1],
    'an unknown type with odd keys': ['{"type":"telepathy","id":1e300,"view":[],"ok":"no"}', (vl, errors) => vl.rev === 0 && errors.length === 0],
    'a view named __proto__ is a view': ['{"type":"display","rev":1,"view":"__proto__","state":{"search":{"evil":true}}}',
      (vl) => Object.getPrototypeOf(vl.views) === Object.prototype && vl.views.search === undefined && vl.views.__proto__.search.evil],
  };
  for (const [name, [line, check]] of Object.entries(taken)) {
    test(`${name}`, async () => {
      const server = await fakeServer(afterFirstCommand(line));
      const vl = await Client.connect({ port: server.port });
      const errors = [];
      vl.on('error', (error) => errors.push(error));
      assert.deepEqual(await vl.command('ping'), { pong: true });
      assert.ok(check(vl, errors), JSON.stringify({ rev: vl.rev, errors: errors.map((e) => e.message) }));
      vl.destroy();
      server.stop();
    });
  }

  const retryAfter = { '1e300': null, '-5': null, '1.5': null, 'true': null, '100000000000000000000': null, '86401': null, '"30"': null, '30': 30, '0': 0, '86400': 86400 };
  for (const [value, expected] of Object.entries(retryAfter)) {
    test(`retryAfter ${value} is ${expected}`, async () => {
      const server = await fakeServer(async (peer) => {
        peer.welcome();
        const message = await peer.receive();
        peer.send(`{"type":"reply","re":${message.id},"ok":false,"error":{"code":"login_throttled","message":"wait","retryAfter":${value}}}`);
        await rest(peer);
      });
      const vl = await Client.connect({ port: server.port });
      await assert.rejects(vl.command('login alice x'), (e) => e instanceof ThrottledError && e.retryAfter === expected);
      vl.destroy();
      server.stop();
    });
  }

  for (const address of ['h:99999999999999999999', 'h:\u00b2', 'h:-1', 'h:0', 'h:65536', 'h:', '\u0000bad:7878', 'a b:7878', 'h:1e3', 'h:0x50', 'h: 80', 12, { host: 'h', port: 1e300 }]) {
    test(`a moved address ${JSON.stringify(address)} is null`, async () => {
      const server = await fakeServer(async (peer) => {
        peer.welcome();
        peer.fail(await peer.receive(), { code: 'moved', message: 'go', address });
        await rest(peer);
      });
      const vl = await Client.connect({ port: server.port });
      await assert.rejects(vl.attach('t'.repeat(48)), (e) => e instanceof MovedError && e.address === null);
      vl.destroy();
      server.stop();
    });
  }

  test('an error whose code and message are objects is an internal_error, not a TypeError', async () => {
    const server = await fakeServer(async (peer) => {
      peer.welcome();
      const message = await peer.receive();
      peer.send(`{"type":"reply","re":${message.id},"ok":false,"error":{"code":{"toString":1},"message":{"valueOf":1}}}`);
      await rest(peer);
    });
    const vl = await Client.connect({ port: server.port });
    await assert.rejects(vl.command('ping'), (e) => e instanceof ViewlineError && e.code === 'internal_error' && e.message === '');
    vl.destroy();
    server.stop();
  });
});

describe('control characters', () => {
  const hostile = '\x1b]0;pwned\x07\x1b[2J\x9b31mred\r\u0085over\x00\x7f';

  test('printable strips C0 and C1 controls but keeps newline and tab', () => {
    assert.equal(printable(hostile), ']0;pwned[2J31mredover');
    assert.equal(printable('line one\n\tline two — ünïcode'), 'line one\n\tline two — ünïcode');
  });

  test('errors from the server are printable; the reply is kept as it came', async () => {
    const server = await fakeServer(async (peer) => {
      peer.welcome();
      peer.fail(await peer.receive(), { code: 'bad\x1b[2J_code', message: hostile });
      await rest(peer);
    });
    const vl = await Client.connect({ port: server.port });
    const error = await vl.command('ping').catch((e) => e);
    for (const text of [error.code, error.message, String(error), error.stack.split('\n')[0]]) assert.equal(printable(text), text);
    assert.equal(error.reply.error.message, hostile);
    vl.destroy();
    server.stop();
  });

  test('a refusal and a reported line are printable, and so is the warning when nobody listens', async () => {
    const refusing = await fakeServer((peer) => peer.send({ type: 'bye', reason: hostile, code: 'refused' }));
    const refused = await Client.connect({ port: refusing.port }).catch((e) => e);
    assert.ok(refused instanceof ConnectError && printable(refused.message) === refused.message);
    refusing.stop();

    const server = await fakeServer(afterFirstCommand('\x1b[2J not json \x9b'));
    const warnings = [];
    const onWarning = (warning) => warnings.push(warning.message);
    process.on('warning', onWarning);
    const vl = await Client.connect({ port: server.port });
    await vl.command('ping');
    await sleep(20);  // warnings are emitted on the next tick
    process.off('warning', onWarning);
    const ours = warnings.filter((w) => w.startsWith('viewline:'));
    assert.equal(ours.length, 1);
    assert.equal(printable(ours[0]), ours[0]);
    vl.destroy();
    server.stop();
  });
});
