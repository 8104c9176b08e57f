// A scripted line server for the error paths a real server does not take on cue:
// silence, half-open connections, lines that are not JSON, a `bye` mid-command, and
// a hostile server's tricks (an endless line, a flood of events, hostile numbers).
import { once } from 'node:events';
import net from 'node:net';
import readline from 'node:readline';

/** Starts a server running `script(peer)` for each connection; resolves with `{port, lines, connections, stop()}`. */
export async function fakeServer(script) {
  const state = { lines: [], connections: 0, sockets: [] };
  const server = net.createServer((socket) => {
    const number = state.connections++;
    state.sockets.push(socket);
    socket.on('error', () => {});
    const queue = [];
    const waiting = [];
    readline.createInterface({ input: socket }).on('line', (line) => {
      const message = JSON.parse(line);
      state.lines.push(message);
      if (waiting.length) waiting.shift()(message);
      else queue.push(message);
    }).on('error', () => {});  // readline re-emits the socket's errors (a client that hangs up with data unread: ECONNRESET)
    socket.on('close', () => { for (const w of waiting.splice(0)) w(null); });
    const peer = {
      number,
      send: (message) => socket.write((typeof message === 'string' ? message : JSON.stringify(message)) + '\n'),
      welcome: (session = 's1', token = 't'.repeat(48)) => peer.send({ type: 'welcome', protocol: 1, session, token, server: 'fake/1.1' }),
      receive: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiting.push(resolve))),
      reply: (request, result = {}) => peer.send({ type: 'reply', re: request.id, ok: true, result }),
      fail: (request, error) => peer.send({ type: 'reply', re: request.id, ok: false, error }),
      close: () => socket.destroy(),
      socket,
      /** Writes `chunk` again and again, up to `most` bytes, until the client stops taking them
       * (closes, or reads nothing for 2 s); resolves with the bytes handed to the socket. */
      async stream(chunk, most) {
        let sent = 0;
        while (sent < most && !socket.destroyed) {
          sent += chunk.length;
          if (!socket.write(chunk) && !(await drained(socket, 2000))) break;
        }
        return sent;
      },
      /** Writes `nextChunk()` (whole lines) until the client stops reading — nothing drained
       * for `stall` ms — or `most` bytes went out; resolves with `{stopped, sent}`. */
      async flood(nextChunk, most = 32 << 20, stall = 500) {
        let sent = 0;
        while (sent < most) {
          const chunk = nextChunk();
          sent += chunk.length;
          if (!socket.write(chunk) && !(await drained(socket, stall))) return { stopped: true, sent };
        }
        return { stopped: false, sent };
      },
    };
    Promise.resolve(script(peer)).catch(() => socket.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    get lines() { return state.lines; },
    get connections() { return state.connections; },
    stop() {
      for (const socket of state.sockets) socket.destroy();
      server.close();
    },
  };
}

/** Whether `socket` drains within `ms` (false if it closes first). */
function drained(socket, ms) {
  return new Promise((resolve) => {
    const done = (value) => { clearTimeout(timer); socket.off('drain', onDrain); socket.off('close', onClose); resolve(value); };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    socket.on('drain', onDrain);
    socket.on('close', onClose);
  });
}

/** Welcome, then an `ok` reply to every command echoing what was sent. */
export async function echo(peer) {
  peer.welcome();
  for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { sent: message });
}

/** The second connection of a resume: welcome, accept the attach, then echo. */
export async function acceptResume(peer) {
  peer.welcome('s2', 'u'.repeat(48));
  const attach = await peer.receive();
  if (!attach || attach.cmd !== 'attach') return peer.close();
  peer.reply(attach, { session: 's1', rev: 0, replayed: 0, snapshot: false });
  for (let message; (message = await peer.receive()) !== null;) peer.reply(message, { sent: message });
}
