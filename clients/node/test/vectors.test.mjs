// The shared vectors in protocol/vectors/: inline parsing and recorded transcripts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { quote, split, ViewlineError } from '../src/viewline.mjs';
import { matches, PROTOCOL, rawConnection, startServer } from './helpers.mjs';

const inline = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'vectors/inline.json'), 'utf8')).vectors;
const transcripts = fs.readdirSync(path.join(PROTOCOL, 'vectors/transcripts')).filter((f) => f.endsWith('.json')).sort();

describe('inline vectors', () => {
  for (const vector of inline) {
    test(JSON.stringify(vector.line), () => {
      if (vector.words) assert.deepEqual(split(vector.line), vector.words);
      else if (vector.error === 'bad_syntax') {
        assert.throws(() => split(vector.line), (e) => e instanceof ViewlineError && e.code === 'bad_syntax');
      }
    });
  }
  test('quote is the inverse of split', () => {
    for (const word of ['plain', 'two words', 'say "hi"', 'back\\slash', '', 'tab\there', 'ラーメン']) {
      assert.deepEqual(split('search ' + quote(word)), ['search', word]);
    }
  });
  test('each vector sent as {id, line} gets the reply the vector promises', async () => {
    const server = await startServer();
    const connection = await rawConnection(server.port);
    try {
      await connection.next();  // welcome
      for (const [number, vector] of inline.entries()) {
        if (vector.cmd === 'quit') continue;  // it would end the session the rest run in
        connection.send(JSON.stringify({ id: number, line: vector.line }));
        let reply = await connection.next();
        while (reply.type !== 'reply') reply = await connection.next();
        assert.equal(reply.re, number, vector.line);
        const code = reply.ok ? null : reply.error.code;
        if (vector.error) assert.equal(code, vector.error, vector.line);
        else assert.ok(!['bad_arguments', 'bad_syntax', 'unknown_command', 'bad_request'].includes(code), `${vector.line}: ${code}`);
      }
    } finally {
      connection.close();
      await server.stop();
    }
  });
});

describe('transcripts', () => {
  for (const name of transcripts) {
    test(name, async () => {
      const doc = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'vectors/transcripts', name), 'utf8'));
      const server = await startServer(doc.server_args);
      const connection = await rawConnection(server.port);
      try {
        for (const step of doc.steps) {
          if (step.send !== undefined) connection.send(step.send);
          for (const expected of step.expect) {
            const actual = await connection.next();
            assert.ok(matches(actual, expected), `after ${JSON.stringify(step.send)}:\n got ${JSON.stringify(actual)}\nwant ${JSON.stringify(expected)}`);
          }
        }
      } finally {
        connection.close();
        await server.stop();
      }
    });
  }
});
