// Every JavaScript example in clients/node/README.md runs against a real server
// (each against its own, started with --admin; `port: 7878` is replaced by its port
// and `'viewline'` by this package's module).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { startServer } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const readme = fs.readFileSync(path.join(here, '../README.md'), 'utf8');
const examples = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const moduleURL = pathToFileURL(path.join(here, '../src/viewline.mjs')).href;

test('the README has examples', () => assert.ok(examples.length >= 5));

for (const [index, source] of examples.entries()) {
  test(`README example ${index + 1} runs`, async () => {
    const server = await startServer(['--admin']);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'viewline-readme-')), 'example.mjs');
    try {
      const code = source.replaceAll('port: 7878', `port: ${server.port}`).replaceAll("from 'viewline'", `from '${moduleURL}'`);
      assert.notEqual(code, source);
      // `await using` needs Node 22 or --harmony; an older Node runs the example with
      // the block's close written out, which is what `await using` does.
      const runnable = /^v(2[2-9]|[3-9]\d)/.test(process.version) ? code
        : code.replace(/await using (\w+) = ([^;]*);([^\n]*)\n([\s\S]*)$/, 'const $1 = $2;$3\ntry {\n$4} finally { await $1.close(); }\n');
      fs.writeFileSync(file, runnable);
      const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 30_000 });
      assert.ok(stdout.trim().length > 0, 'an example that prints nothing');
    } finally {
      await server.stop();
    }
  });
}
