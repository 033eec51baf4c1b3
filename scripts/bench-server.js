#!/usr/bin/env node
// Request rate of `svcfs serve` for 4 KiB PUT+GET pairs with N concurrent
// clients (default 16), over real HTTP on loopback. Starts its own server on a
// temporary data directory. Usage: node scripts/bench-server.js [seconds] [clients]
// (scripts/bench.js runs the same measurement as part of the benchmark of record)
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { SvcClient } = require('../dist/wire/client');

const creds = { accessKeyId: 'BENCHKEY000000000001', secretAccessKey: 'e'.repeat(64) };

/** PUT then GET 4 KiB objects from `clients` loops for `seconds`: pairs per second and pair latency */
async function pairsPerSecond(client, bucket, seconds, clients) {
  const body = randomBytes(4096);
  let pairs = 0;
  const lat = [];
  const t0 = Date.now();
  const end = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, async (_, w) => {
    for (let i = 0; Date.now() < end; i++) {
      const t = process.hrtime.bigint();
      const key = `pairs/w${w}/k${i % 100}`;
      await client.put(bucket, key, body);
      const got = await client.getBuffer(bucket, key);
      if (!got.equals(body)) throw new Error('mismatch');
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
      pairs++;
    }
  }));
  lat.sort((a, b) => a - b);
  const q = (p) => Number(lat[Math.floor(p * (lat.length - 1))].toFixed(1));
  return { clients, pairs, pairsPerSec: pairs / ((Date.now() - t0) / 1000), p50: q(0.5), p99: q(0.99) };
}

async function main() {
  const seconds = Number(process.argv[2] || 10);
  const clients = Number(process.argv[3] || 16);
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'svcfs-bench-'));
  const env = { ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey };
  const srv = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svcfs.js'), '--log-level', 'warn', 'serve', '--data', data, '--port', '0', '--bucket', 'bench'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((ok) => { let o = ''; srv.stdout.on('data', (d) => { o += d; const m = /listening on (\S+)/.exec(o); if (m) ok(m[1]); }); });
  const client = new SvcClient({ endpoint: url, credentials: creds, connections: clients });
  const r = await pairsPerSecond(client, 'bench', seconds, clients);
  console.log(`${clients} clients, ${seconds}s: ${r.pairs} PUT+GET pairs of 4 KiB, ${r.pairsPerSec.toFixed(0)} pairs/s (${(2 * r.pairsPerSec).toFixed(0)} requests/s); pair latency p50 ${r.p50} ms, p99 ${r.p99} ms`);
  await client.close();
  srv.kill('SIGTERM');
  await new Promise((res) => srv.once('exit', res));
  fs.rmSync(data, { recursive: true, force: true });
}

module.exports = { pairsPerSecond };
if (require.main === module) main().catch((e) => { console.error(e); process.exit(1); });
