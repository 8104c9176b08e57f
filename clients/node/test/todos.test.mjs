// Examples/Todos, a view-model the client has never heard of, driven from Node: its
// commands go as typed and the server parses them. `./dev test` runs this after
// building the example, with VIEWLINE_TODO_SERVER set to its todo-server binary.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { test } from 'node:test';
import { Client } from '../src/viewline.mjs';

const TODO_SERVER = process.env.VIEWLINE_TODO_SERVER;

test('the client drives the Todos example', { skip: !TODO_SERVER && 'VIEWLINE_TODO_SERVER (Examples/Todos\' todo-server) not given' }, async () => {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-todos-'));
  const child = spawn(TODO_SERVER, ['0', '0'], { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [first] = await once(readline.createInterface({ input: child.stdout }), 'line');
    assert.match(first, /^listening on /);
    const vl = await Client.connect({ port: Number(first.split(':').pop()) });
    const { commands } = await vl.command('help');
    assert.ok(['add', 'done', 'delete'].every((name) => commands.some((c) => c.name === name)));
    await vl.command('add buy milk');
    await vl.command('add', { title: 'walk the dog' });
    const todos = await vl.waitForDisplay('todos', (s) => s.items.length === 2);
    assert.deepEqual(todos.items.map((t) => t.title), ['buy milk', 'walk the dog']);
    const id = todos.items[0].id;
    await vl.command(`done ${id}`);
    await vl.waitForDisplay('todos', (s) => s.items[0].done);
    await vl.command(`delete ${id}`);
    const alert = await vl.waitForAlert();
    assert.deepEqual(alert.actions.map((a) => a.label), ['Undo', 'Keep deleted']);
    await vl.confirm();
    await vl.waitForDisplay('todos', (s) => s.items.some((t) => t.title === 'buy milk'));
    await assert.rejects(vl.command('add'), (e) => e.code === 'bad_arguments' && e.message.includes('add <title>'));
    await vl.close();
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
});
