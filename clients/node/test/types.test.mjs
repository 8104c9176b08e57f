// src/viewline.d.ts is written by hand and checked here against what it describes:
// every property of every server message in protocol/schema/, every error code the
// server's `help` lists, and every name the module exports.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as viewline from '../src/viewline.mjs';
import { Client } from '../src/viewline.mjs';
import { FINAL_BYE_CODES, FINAL_BYE_REASONS, byeIsFinal, errorFromReply, MovedError, RetryLaterError, ThrottledError } from '../src/errors.mjs';
import { PROTOCOL, startServer } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const declarations = fs.readFileSync(path.join(here, '../src/viewline.d.ts'), 'utf8');

/** The body of `export interface Name {…}` (one level of braces). */
function interfaceBody(name) {
  const match = new RegExp(`export interface ${name}\\b[^{]*\\{([\\s\\S]*?)\\n\\}`).exec(declarations);
  assert.ok(match, `viewline.d.ts declares interface ${name}`);
  return match[1];
}

const messages = { welcome: 'Welcome', reply: 'Reply', display: 'Display', alert: 'Alert', dismiss: 'Dismiss', bye: 'Bye' };

for (const [schema, name] of Object.entries(messages)) {
  test(`${name} declares every property of ${schema}.schema.json, optional exactly where the schema says`, () => {
    const doc = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'schema', `${schema}.schema.json`), 'utf8'));
    const body = interfaceBody(name);
    const required = new Set(doc.required ?? []);
    for (const property of Object.keys(doc.properties ?? {})) {
      const declared = new RegExp(`^\\s*${property}(\\??):`, 'm').exec(body);
      assert.ok(declared, `${name}.${property} is declared`);
      if (required.has(property)) assert.equal(declared[1], '', `${name}.${property} is required in the schema`);
    }
  });
}

test('ErrorObject declares every property of the reply schema\'s error object', () => {
  const doc = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'schema', 'reply.schema.json'), 'utf8'));
  const found = JSON.stringify(doc).match(/"retryAfter"|"address"|"code"|"message"/g);
  assert.ok(found);
  const body = interfaceBody('ErrorObject');
  for (const property of ['code', 'message', 'address', 'retryAfter']) assert.match(body, new RegExp(`^\\s*${property}\\??:`, 'm'));
});

test('ErrorCode lists every code the server declares', async () => {
  const server = await startServer();
  try {
    const vl = await Client.connect({ port: server.port });
    const { errors } = await vl.command('help');
    await vl.close();
    const union = /export type ErrorCode =([\s\S]*?);/.exec(declarations)[1];
    for (const { code } of errors) assert.ok(union.includes(`'${code}'`), `ErrorCode has '${code}'`);
  } finally {
    await server.stop();
  }
});

/** Every property `export interface Name` declares: name → optional. */
function declaredProperties(name) {
  return new Map([...interfaceBody(name).matchAll(/^\s*(\w+)(\??):/gm)].map((m) => [m[1], m[2] === '?']));
}

test('Help, HelpCommand, HelpArgument and HelpView declare every key of a real server\'s help, optional where a key can be missing', async () => {
  const server = await startServer(['--admin']);
  try {
    const vl = await Client.connect({ port: server.port });
    const help = await vl.help();
    await vl.close();
    const check = (name, objects) => {
      const declared = declaredProperties(name);
      const seen = new Map();
      for (const object of objects) for (const key of Object.keys(object)) seen.set(key, (seen.get(key) ?? 0) + 1);
      for (const [key, count] of seen) {
        assert.ok(declared.has(key), `${name}.${key} is declared`);
        if (count < objects.length) assert.equal(declared.get(key), true, `${name}.${key} is optional (missing from some)`);
      }
      for (const [key, optional] of declared) if (!optional) assert.equal(seen.get(key), objects.length, `${name}.${key} is in every one`);
    };
    // …and exactly help.schema.json's properties, optional where the schema does not require them.
    const schema = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'schema', 'help.schema.json'), 'utf8'));
    for (const [name, part] of [['Help', schema], ['HelpCommand', schema.$defs.command], ['HelpArgument', schema.$defs.argument], ['HelpView', schema.$defs.view]]) {
      const declared = declaredProperties(name);
      assert.deepEqual([...declared.keys()].sort(), Object.keys(part.properties).sort(), name);
      for (const [key, optional] of declared) assert.equal(optional, !part.required.includes(key), `${name}.${key}`);
    }
    check('Help', [help]);
    check('HelpCommand', help.commands);
    check('HelpArgument', help.commands.flatMap((command) => command.arguments));
    check('HelpView', help.views);
    assert.ok(help.commands.some((command) => command.primary), 'a primary command');
    assert.ok(help.commands.some((command) => command.live) && help.commands.some((command) => command.paging));
    const kinds = /export type ArgumentKind = ([^;]*);/.exec(declarations)[1];
    for (const argument of help.commands.flatMap((command) => command.arguments)) assert.ok(kinds.includes(`'${argument.kind}'`), argument.kind);
  } finally {
    await server.stop();
  }
});

test('ByeCode lists every bye code of PROTOCOL §4', () => {
  const protocol = fs.readFileSync(path.join(PROTOCOL, 'PROTOCOL.md'), 'utf8');
  const codes = [...protocol.matchAll(/^\s*\| `([a-z]+)` \| [^|]+\| (?:ended|lives on|lives on in a cluster|none began) \|/gm)].map((m) => m[1]);
  assert.deepEqual(codes.sort(), ['ended', 'evicted', 'expired', 'moved', 'quit', 'refused', 'shutdown']);
  const union = /export type ByeCode =([\s\S]*?);/.exec(declarations)[1];
  for (const code of codes) assert.ok(union.includes(`'${code}'`), `ByeCode has '${code}'`);
});

test('every export of the module is declared, and nothing more', () => {
  const declared = [...declarations.matchAll(/^export (?:class|function) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(viewline).sort());
});

test('package.json points types at the declarations', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(here, '../package.json'), 'utf8'));
  assert.equal(pkg.exports['.'].types, './src/viewline.d.ts');
  assert.ok(fs.existsSync(path.join(here, '..', pkg.exports['.'].default)));
});

test('the final bye tables are bye.schema.json\'s (one source for every client)', () => {
  const schema = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'schema', 'bye.schema.json'), 'utf8'));
  assert.deepEqual([...FINAL_BYE_CODES].sort(), [...schema['x-final-codes']].sort());
  assert.deepEqual([...FINAL_BYE_REASONS].sort(), [...schema['x-final-reasons-before-1.1']].sort());
  for (const code of [...schema['x-resumable-codes'], 'a_code_from_a_later_server']) {
    assert.equal(byeIsFinal({ type: 'bye', reason: '', code }), false, code);
  }
  const union = /export type ByeCode = ([^;]*);/.exec(declarations)[1];
  for (const code of [...schema['x-final-codes'], ...schema['x-resumable-codes']]) assert.ok(union.includes(`'${code}'`), `ByeCode has '${code}'`);
});

test('the error classes are reply.schema.json\'s (wait and retry, follow moved, or neither)', () => {
  const schema = JSON.parse(fs.readFileSync(path.join(PROTOCOL, 'schema', 'reply.schema.json'), 'utf8'));
  const classes = schema.properties.error['x-classes'];
  for (const code of schema.properties.error.properties.code.enum) {
    const error = errorFromReply({ type: 'reply', re: null, ok: false, error: { code, message: '' } });
    assert.equal(error.code, code);
    assert.equal(error instanceof RetryLaterError, classes['retry-later'].includes(code), code);
    assert.equal(error instanceof ThrottledError, classes.throttled.includes(code), code);
    assert.equal(error instanceof MovedError, classes.moved.includes(code), code);
  }
});
