// The client over TLS, against a server with a certificate made for the test.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '../src/viewline.mjs';
import { startServer } from './helpers.mjs';

describe('TLS', () => {
  let server;
  let ca;
  before(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'viewline-tls-'));
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
    ca = readFileSync(cert);
    server = await startServer(['--tls-cert', cert, '--tls-key', key]);
  });
  after(async () => { await server.stop(); });

  test('a flow over TLS', async () => {
    const vl = await Client.connect({ port: server.port, tls: { ca } });
    await vl.command('search pizza');
    const state = await vl.waitForDisplay('search', (s) => !s.loading);
    assert.ok(state.results.length > 0);
    vl.close();
  });

  test('an untrusted certificate is refused', async () => {
    await assert.rejects(Client.connect({ port: server.port, tls: true }), (e) => /self[- ]signed/i.test(e.message));
  });
});
