#!/usr/bin/env node
// Sequential write and read of one large file through an svcfs mount, side by
// side with the direct HTTP limit (the same object PUT and GET with svcfs's
// client) and, when installed, the peers s3fs and rclone mounting the same
// server in the aws dialect. One run, one server, ratios against direct.
// Usage: node scripts/bench.js [size-MiB=1024] [--no-peers]
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { SvcClient } = require('../dist/wire/client');
const { uploadFile } = require('../dist/fs/uploader');

const MiB = 1024 * 1024;
const sizeMiB = Number(process.argv.find((a) => /^\d+$/.test(a)) || 1024);
const peers = !process.argv.includes('--no-peers');
const creds = { accessKeyId: 'BENCHKEY000000000001', secretAccessKey: 'e'.repeat(64) };
const CLI = path.join(__dirname, '..', 'bin', 'svcfs.js');
const have = (cmd) => { try { execFileSync('which', [cmd], { stdio: 'ignore' }); return true; } catch { return false; } };
const sh = (cmd) => execFileSync('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const secs = async (f) => { const t = process.hrtime.bigint(); await f(); return Number(process.hrtime.bigint() - t) / 1e9; };
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const mounted = (m) => fs.readFileSync('/proc/mounts', 'utf8').includes(` ${m} `);

async function waitMounted(m, proc) {
  for (let i = 0; i < 200 && !mounted(m); i++) {
    if (proc && proc.exitCode !== null) throw new Error(`mount of ${m} exited`);
    await wait(100);
  }
  if (!mounted(m)) throw new Error(`${m} did not mount`);
}

function unmount(m) {
  try { execFileSync('fusermount', ['-u', m], { stdio: 'ignore' }); } catch { try { execFileSync('umount', ['-l', m], { stdio: 'ignore' }); } catch { /* gone */ } }
}

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'svcfs-bench-'));
  const data = path.join(work, 'data');
  const src = path.join(work, 'src.bin');
  process.stderr.write(`preparing ${sizeMiB} MiB of random data in ${work}\n`);
  sh(`head -c ${sizeMiB * MiB} /dev/urandom > ${src}`);
  const env = { ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey };
  const srv = spawn(process.execPath, [CLI, '--log-level', 'warn', 'serve', '--data', data, '--port', '0', '--bucket', 'bench'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((ok) => { let o = ''; srv.stdout.on('data', (d) => { o += d; const m = /listening on (\S+)/.exec(o); if (m) ok(m[1]); }); });
  const client = new SvcClient({ endpoint: url, credentials: creds });
  const rows = [];
  const mbps = (s) => (sizeMiB * MiB) / 1e6 / s;
  const cleanup = [];
  try {
    // direct HTTP: the same multipart uploader the mount uses, and one streamed GET
    const put = await secs(() => uploadFile(client, 'bench', 'direct.bin', src, sizeMiB * MiB, {}));
    const get = await secs(async () => { for await (const _ of (await client.get('bench', 'direct.bin')).body) void _; });
    rows.push(['direct HTTP (svcfs client)', mbps(put), mbps(get)]);

    const mountAndTime = async (name, mnt, start, file) => {
      fs.mkdirSync(mnt, { recursive: true });
      const proc = start();
      cleanup.push(() => { unmount(mnt); if (proc && proc.exitCode === null) proc.kill('SIGKILL'); });
      await waitMounted(mnt, proc);
      const w = await secs(async () => sh(`dd if=${src} of=${mnt}/${file} bs=1M status=none`));
      sh('sync');
      const r = await secs(async () => sh(`dd if=${mnt}/${file} of=/dev/null bs=1M status=none`));
      rows.push([name, mbps(w), mbps(r)]);
      unmount(mnt);
      if (proc) { proc.kill('SIGTERM'); await wait(300); }
    };

    await mountAndTime('svcfs mount', path.join(work, 'mnt-svcfs'), () => spawn(process.execPath, [CLI, '--log-level', 'warn', 'mount', 'bench', path.join(work, 'mnt-svcfs'), '--endpoint', url, '--foreground', '-o', `cache_dir=${work}/cache`], { env, stdio: 'ignore' }), 'svcfs.bin');

    if (peers && have('s3fs')) {
      const pw = path.join(work, 's3fs.passwd');
      fs.writeFileSync(pw, `${creds.accessKeyId}:${creds.secretAccessKey}\n`, { mode: 0o600 });
      const mnt = path.join(work, 'mnt-s3fs');
      // (the AWS SDKs inside rclone and s3fs trip over an AWS_CA_BUNDLE for plain http)
      await mountAndTime('s3fs (aws dialect)', mnt, () => spawn('s3fs', ['bench', mnt, '-f', '-o', `url=${url},use_path_request_style,passwd_file=${pw},sigv4,endpoint=us-east-1,use_cache=${work}/s3fs-cache,nomixupload`], { stdio: 'ignore' }), 's3fs.bin');
    } else if (peers) rows.push(['s3fs: not installed (apt-get install s3fs)', NaN, NaN]);

    if (peers && have('rclone')) {
      const mnt = path.join(work, 'mnt-rclone');
      const renv = { ...process.env, AWS_CA_BUNDLE: '', RCLONE_CONFIG_B_TYPE: 's3', RCLONE_CONFIG_B_PROVIDER: 'Other', RCLONE_CONFIG_B_ENDPOINT: url,
        RCLONE_CONFIG_B_ACCESS_KEY_ID: creds.accessKeyId, RCLONE_CONFIG_B_SECRET_ACCESS_KEY: creds.secretAccessKey, RCLONE_CONFIG_B_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_B_NO_CHECK_BUCKET: 'true' };
      await mountAndTime('rclone mount --vfs-cache-mode writes (aws dialect)', mnt, () => spawn('rclone', ['mount', 'B:bench', mnt, '--vfs-cache-mode', 'writes', '--cache-dir', `${work}/rclone-cache`], { env: renv, stdio: 'ignore' }), 'rclone.bin');
    } else if (peers) rows.push(['rclone: not installed (apt-get install rclone)', NaN, NaN]);
  } finally {
    for (const f of cleanup) f();
    await client.close();
    srv.kill('SIGTERM');
    await new Promise((r) => srv.once('exit', r));
    fs.rmSync(work, { recursive: true, force: true });
  }
  const base = rows[0];
  const fmt = (v, b) => (Number.isNaN(v) ? '-' : `${v.toFixed(0)} MB/s (${(v / b).toFixed(2)}x)`);
  console.log(`sequential ${sizeMiB} MiB, one server on loopback, ${os.cpus().length} cores`);
  console.log(['', 'write', 'read'].map((s, i) => s.padEnd(i ? 22 : 52)).join(''));
  for (const [name, w, r] of rows) console.log(name.padEnd(52) + fmt(w, base[1]).padEnd(22) + fmt(r, base[2]));
}

main().catch((e) => { console.error(e); process.exit(1); });
