#!/usr/bin/env node
// Request rate of `svcfs serve` for 4 KiB PUT+GET pairs with N concurrent
// clients (default 16), over real HTTP on loopback. Starts its own server on a
// temporary data directory. Usage: node scripts/bench-server.js [seconds] [clients]
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { SvcClient } = require('../dist/wire/client');

const seconds = Number(process.argv[2] || 10);
const clients = Number(process.argv[3] || 16);
const creds = { accessKeyId: 'BENCHKEY000000000001', secretAccessKey: 'e'.repeat(64) };

async function main() {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'svcfs-bench-'));
  const env = { ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey };
  const srv = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svcfs.js'), '--log-level', 'warn', 'serve', '--data', data, '--port', '0', '--bucket', 'bench'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((ok) => { let o = ''; srv.stdout.on('data', (d) => { o += d; const m = /listening on (\S+)/.exec(o); if (m) ok(m[1]); }); });
  const client = new SvcClient({ endpoint: url, credentials: creds, connections: clients });
  const body = randomBytes(4096);
  let pairs = 0;
  const lat = [];
  const end = Date.now() + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, async (_, w) => {
    for (let i = 0; Date.now() < end; i++) {
      const t0 = process.hrtime.bigint();
      const key = `w${w}/k${i % 100}`;
      await client.put('bench', key, body);
      const got = await client.getBuffer('bench', key);
      if (!got.equals(body)) throw new Error('mismatch');
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      pairs++;
    }
  }));
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.floor(p * (lat.length - 1))].toFixed(1);
  console.log(`${clients} clients, ${seconds}s: ${pairs} PUT+GET pairs of 4 KiB, ${(pairs / seconds).toFixed(0)} pairs/s (${(2 * pairs / seconds).toFixed(0)} requests/s); pair latency p50 ${q(0.5)} ms, p99 ${q(0.99)} ms`);
  await client.close();
  srv.kill('SIGTERM');
  await new Promise((r) => srv.once('exit', r));
  fs.rmSync(data, { recursive: true, force: true });
}
main().catch((e) => { console.error(e); process.exit(1); });
