#!/usr/bin/env node
// The benchmark of record: the workloads of everyday use through an svcfs mount,
// side by side in one run with the direct HTTP limit (curl, and the minimum
// request sequence on one keep-alive connection) and the peers rclone and s3fs
// mounting the same `svcfs serve` in the aws dialect. Prints a table with ratios
// to direct, and writes JSON and an SVG chart when asked.
//
// Usage: node scripts/bench.js [--size MiB] [--big MiB] [--files N] [--mv N]
//          [--dirs N,N] [--no-peers] [--json FILE] [--svg FILE]
// Defaults: --size 256 --big 2048 --files 500 --mv 100 --dirs 10000,100000.
// --big 0 and --dirs '' skip those parts. Needs root (drop_caches, fuse).
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { SvcClient } = require('../dist/wire/client');
const { withHugePages } = require('../dist/fs/hugepages');
const { pairsPerSecond } = require('./bench-server');

const MiB = 1024 * 1024;
const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const opt = {
  size: Number(arg('size', 256)), big: Number(arg('big', 2048)), files: Number(arg('files', 500)), mv: Number(arg('mv', 100)),
  dirs: String(arg('dirs', '10000,100000')).split(',').filter(Boolean).map(Number),
  peers: !process.argv.includes('--no-peers'), json: arg('json'), svg: arg('svg'), serverSecs: Number(arg('server-secs', 5)),
};
const BUCKET = 'bench';
const creds = { accessKeyId: 'BENCHKEY000000000001', secretAccessKey: 'e'.repeat(64) };
const CLI = path.join(__dirname, '..', 'bin', 'svcfs.js');
const have = (cmd) => { try { execFileSync('which', [cmd], { stdio: 'ignore' }); return true; } catch { return false; } };
const sh = (cmd) => execFileSync('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 28 }).toString();
// `ls -l` started directly, its output discarded: no shell's start (a few ms) inside a 30 ms figure
const lsl = (dir) => execFileSync('ls', ['-l', dir], { stdio: 'ignore' });
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => Number(process.hrtime.bigint()) / 1e9;
const mounted = (m) => fs.readFileSync('/proc/mounts', 'utf8').includes(` ${m} `);
const log = (s) => process.stderr.write(`${s}\n`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** fresh mounts for the workloads that take milliseconds (mount until ready, ls -l cold) */
const SHORT_RUNS = 9;

/**
 * The same start for each timed write: nothing dirty left from an earlier step
 * for the kernel to write back meanwhile, the page cache emptied, then the
 * source read back into it. The emptying matters on a VM like this one: memory
 * the page cache never used costs a fault into the host at its first touch
 * (a 256 MiB cp into the mount, staging file and server blob both new: 1.1-1.5 s
 * with the cache grown by earlier steps, 0.70-0.78 s after a drop, direct's PUT
 * 0.71-0.80 s either way), so without it a write's time says more about what
 * ran before it than about the system writing.
 */
function settleFor(file) {
  dropCaches();
  sh(`cat ${file} > /dev/null`);
}

function dropCaches() {
  try { sh('sync; echo 3 > /proc/sys/vm/drop_caches'); return true; } catch { return false; }
}

/** peak resident memory of a process since the last reset (VmHWM); reset with clear_refs 5 */
const rss = {
  reset(pid) { try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); } catch { /* not ours */ } },
  peakMiB(pid) { const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8')); return m ? Number(m[1]) / 1024 : NaN; },
};

// ---- the store ----

async function startServer(work) {
  const out = path.join(work, 'serve.out');
  const env = { ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey };
  const fd = fs.openSync(out, 'w');
  const proc = spawn(process.execPath, [CLI, '--log-level', 'warn', 'serve', '--data', path.join(work, 'data'), '--port', '0', '--bucket', BUCKET, '--metrics', '127.0.0.1:0'],
    { env, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  for (let i = 0; i < 300; i++) {
    const text = fs.readFileSync(out, 'utf8');
    const url = /listening on (\S+)/.exec(text);
    const metrics = /metrics on ([^\s,]+)/.exec(text);
    if (url && metrics) return { proc, url: url[1], metricsUrl: metrics[1], env };
    if (proc.exitCode !== null) throw new Error(`svcfs serve exited: ${text}`);
    await wait(20);
  }
  throw new Error('svcfs serve did not start');
}

/** requests the server answered so far, by operation */
async function serverCounts(metricsUrl) {
  const res = await fetch(metricsUrl);
  if (!res.ok) throw new Error(`metrics: HTTP ${res.status}`);
  const text = await res.text();
  const counts = {};
  for (const m of text.matchAll(/^svcfs_requests_total\{operation="([^"]+)",status="\d+"\} (\d+)$/gm)) counts[m[1]] = (counts[m[1]] ?? 0) + Number(m[2]);
  return counts;
}
const delta = (a, b, re) => Object.keys(b).filter((k) => re.test(k)).reduce((n, k) => n + b[k] - (a[k] ?? 0), 0);

// ---- direct: curl in the svc dialect, one process and one connection per sequence ----

function curlDirect(url) {
  const auth = `--aws-sigv4 "svc:svc:us-east-1:s3" --user ${creds.accessKeyId}:${creds.secretAccessKey}`;
  const obj = (key) => `${url}/${BUCKET}/${key.split('/').map(encodeURIComponent).join('/')}`;
  return {
    put: (file, key) => sh(`curl -sSf ${auth} -T ${file} ${obj(key)} -o /dev/null`),
    getMd5: (key) => sh(`curl -sSf ${auth} ${obj(key)} | md5sum`).split(' ')[0],
    list: (prefix) => sh(`curl -sSf ${auth} '${url}/${BUCKET}?list-type=2&delimiter=%2F&prefix=${encodeURIComponent(prefix)}' -o /dev/null`),
    /** a sequence of requests in one curl process: [{ method, key, file?, headers? }] */
    sequence(work, reqs) {
      const cfg = path.join(work, 'curl.cfg');
      const q = (s) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
      fs.writeFileSync(cfg, reqs.map((r) => [
        `aws-sigv4 = "svc:svc:us-east-1:s3"`, `user = ${q(`${creds.accessKeyId}:${creds.secretAccessKey}`)}`, 'silent', 'show-error', 'fail',
        `request = ${r.method}`, r.file ? `upload-file = ${q(r.file)}` : '', ...(r.headers ?? []).map((h) => `header = ${q(h)}`),
        `url = ${q(obj(r.key))}`, 'output = /dev/null',
      ].filter(Boolean).join('\n')).join('\nnext\n'));
      sh(`curl -K ${cfg}`);
    },
  };
}

// ---- the mounts ----

function mountSpecs(work, url, env) {
  const specs = {
    // (in the environment `svcfs mount` gives the mount process it starts: malloc's huge pages on)
    svcfs: (mnt) => spawn(process.execPath, [CLI, '--log-level', 'warn', 'mount', BUCKET, mnt, '--endpoint', url, '--foreground', '-o', `cache_dir=${work}/svcfs-cache`], { env: withHugePages(env), stdio: 'ignore' }),
  };
  if (opt.peers && have('s3fs')) {
    const pw = path.join(work, 's3fs.passwd');
    fs.writeFileSync(pw, `${creds.accessKeyId}:${creds.secretAccessKey}\n`, { mode: 0o600 });
    // s3fs's defaults (no use_cache: a local copy of every file read would not be a fair cold read)
    specs.s3fs = (mnt) => spawn('s3fs', [BUCKET, mnt, '-f', '-o', `url=${url},use_path_request_style,passwd_file=${pw},sigv4,endpoint=us-east-1`], { stdio: 'ignore' });
  }
  if (opt.peers && have('rclone')) {
    // (the AWS SDK inside rclone trips over an AWS_CA_BUNDLE for plain http)
    const renv = { ...process.env, AWS_CA_BUNDLE: '', RCLONE_CONFIG_B_TYPE: 's3', RCLONE_CONFIG_B_PROVIDER: 'Other', RCLONE_CONFIG_B_ENDPOINT: url,
      RCLONE_CONFIG_B_ACCESS_KEY_ID: creds.accessKeyId, RCLONE_CONFIG_B_SECRET_ACCESS_KEY: creds.secretAccessKey,
      RCLONE_CONFIG_B_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_B_NO_CHECK_BUCKET: 'true' };
    specs.rclone = (mnt) => spawn('rclone', ['mount', `B:${BUCKET}`, mnt, '--vfs-cache-mode', 'writes', '--cache-dir', `${work}/rclone-cache`], { env: renv, stdio: 'ignore' });
  }
  return specs;
}

async function mount(start, mnt) {
  fs.mkdirSync(mnt, { recursive: true });
  const t0 = now();
  const proc = start(mnt);
  while (!mounted(mnt)) {
    if (proc.exitCode !== null) throw new Error(`mount of ${mnt} exited (${proc.exitCode})`);
    if (now() - t0 > 20) throw new Error(`${mnt} did not mount`);
    await wait(2);
  }
  // ready: it answers (the kernel lists a FUSE mount before its process serves it)
  await fs.promises.stat(mnt);
  return { proc, mnt, ready: now() - t0 };
}

async function unmount(m) {
  try { execFileSync('fusermount', ['-u', m.mnt], { stdio: 'ignore' }); } catch { try { execFileSync('umount', ['-l', m.mnt], { stdio: 'ignore' }); } catch { /* gone */ } }
  if (m.proc.exitCode === null) {
    const exited = new Promise((r) => m.proc.once('exit', r));
    m.proc.kill('SIGTERM');
    await Promise.race([exited, wait(10000)]);
    if (m.proc.exitCode === null) m.proc.kill('SIGKILL');
  }
}

// ---- waiting until the bucket shows what a tool did ----

async function until(what, check, limitSec = 300) {
  const t0 = now();
  while (!(await check())) {
    if (now() - t0 > limitSec) throw new Error(`gave up waiting: ${what}`);
    await wait(10);
  }
}
async function countUnder(client, prefix) {
  let n = 0;
  // (directory markers, keys ending in /, are not files)
  for await (const page of client.list(BUCKET, { prefix })) n += page.contents.filter((c) => !c.key.endsWith('/')).length;
  return n;
}
const hasSize = (client, key, size) => async () => { const h = await client.head(BUCKET, key).catch(() => undefined); return h && h !== 'not-modified' && h.size === size; };

// ---- the run ----

const WORKLOADS = {
  mount: 'mount until ready',
  write: `write ${opt.size} MiB, until in bucket`,
  read: `cold read ${opt.size} MiB + md5`,
  reread: `second read ${opt.size} MiB (page cache)`,
  create: `create ${opt.files} x 4 KiB, until in bucket`,
  lscold: `ls -l cold, ${opt.files} entries`,
  lswarm: `ls -l warm, ${opt.files} entries`,
  rm: `rm -r ${opt.files}, until gone`,
  mv: `mv dir of ${opt.mv}, until moved`,
  bigwrite: `write ${opt.big} MiB, until in bucket`,
  bigread: `cold read ${opt.big} MiB + md5`,
  ...Object.fromEntries(opt.dirs.map((n) => [`ls${n}`, `ls -l cold, ${n} entries`])),
};

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'svcfs-bench-'));
  const results = {}; // workload -> system -> { sec, ...extra }
  const note = (w, sys, sec, extra = {}) => { (results[w] ??= {})[sys] = { sec, ...extra }; log(`  ${sys.padEnd(7)} ${WORKLOADS[w].padEnd(40)} ${sec.toFixed(3)} s ${Object.keys(extra).length ? JSON.stringify(extra) : ''}`); };
  const timed = async (f) => { const t0 = now(); await f(); return now() - t0; };
  const cleanup = [];
  let server;
  let client;
  let serverAlone;
  try {
    const src = path.join(work, 'src.bin');
    const small = path.join(work, 'small');
    log(`preparing ${opt.size} MiB of random data and ${opt.files} files of 4 KiB in ${work}`);
    sh(`head -c ${opt.size * MiB} /dev/urandom > ${src}`);
    fs.mkdirSync(small);
    for (let i = 0; i < opt.files; i++) fs.writeFileSync(path.join(small, `f${String(i).padStart(4, '0')}`), require('node:crypto').randomBytes(4096));
    const srcMd5 = sh(`md5sum ${src}`).split(' ')[0];
    if (!dropCaches()) log('cannot drop the page cache (not root?): "cold" reads are not cold');

    server = await startServer(work);
    client = new SvcClient({ endpoint: server.url, credentials: creds, connections: 32 });
    const direct = curlDirect(server.url);
    const smallFiles = fs.readdirSync(small).sort();
    const prefill = async (prefix, n, body = Buffer.alloc(4096, 7)) => {
      let next = 0;
      await Promise.all(Array.from({ length: 32 }, async () => {
        for (let i = next++; i < n; i = next++) await client.put(BUCKET, `${prefix}f${String(i).padStart(6, '0')}`, body);
      }));
    };

    // direct
    log('direct (curl)');
    settleFor(src);
    note('write', 'direct', await timed(() => direct.put(src, 'direct.bin')));
    dropCaches();
    let md5;
    note('read', 'direct', await timed(() => { md5 = direct.getMd5('direct.bin'); }));
    if (md5 !== srcMd5) throw new Error('direct read: wrong bytes');
    note('create', 'direct', await timed(() => direct.sequence(work, smallFiles.map((f) => ({ method: 'PUT', key: `direct-small/${f}`, file: path.join(small, f) })))));
    const lists = [];
    for (let i = 0; i < SHORT_RUNS; i++) lists.push(await timed(() => direct.list('direct-small/')));
    note('lscold', 'direct', median(lists));
    note('rm', 'direct', await timed(() => direct.sequence(work, smallFiles.map((f) => ({ method: 'DELETE', key: `direct-small/${f}` })))));
    await prefill('direct-mvsrc/', opt.mv);
    const mvKeys = Array.from({ length: opt.mv }, (_, i) => `f${String(i).padStart(6, '0')}`);
    note('mv', 'direct', await timed(() => direct.sequence(work, [
      ...mvKeys.map((k) => ({ method: 'PUT', key: `direct-mvdst/${k}`, headers: [`x-svc-copy-source: /${BUCKET}/direct-mvsrc/${k}`] })),
      ...mvKeys.map((k) => ({ method: 'DELETE', key: `direct-mvsrc/${k}` })),
    ])));

    // the server alone: small requests per second (the big transfers are the direct rows above)
    log(`server alone: 4 KiB PUT+GET pairs, 16 clients, ${opt.serverSecs} s`);
    serverAlone = await pairsPerSecond(client, BUCKET, opt.serverSecs, 16);
    log(`  ${serverAlone.pairsPerSec.toFixed(0)} pairs/s`);

    // each mount in turn, the same workloads
    const specs = mountSpecs(work, server.url, server.env);
    for (const [sys, start] of Object.entries(specs)) {
      log(sys);
      const mnt = path.join(work, `mnt-${sys}`);
      let m = await mount(start, mnt);
      cleanup.push(() => unmount(m));
      const ready = [m.ready];
      settleFor(src);
      note('write', sys, await timed(async () => {
        sh(`cp ${src} ${mnt}/${sys}.bin`);
        await until(`${sys}.bin in the bucket`, hasSize(client, `${sys}.bin`, opt.size * MiB));
      }));
      dropCaches();
      note('read', sys, await timed(() => { md5 = sh(`md5sum ${mnt}/direct.bin`).split(' ')[0]; }));
      if (md5 !== srcMd5) throw new Error(`${sys} read: wrong bytes`);
      note('reread', sys, await timed(() => sh(`cat ${mnt}/direct.bin > /dev/null`)));
      note('create', sys, await timed(async () => {
        sh(`cp -r ${small} ${mnt}/${sys}-small`);
        await until(`${opt.files} files in the bucket`, async () => (await countUnder(client, `${sys}-small/`)) === opt.files);
      }));
      await prefill(`${sys}-mvsrc/`, opt.mv);
      // fresh mounts, nothing of the listing cached: the median of SHORT_RUNS (one run of a 50 ms workload is mostly noise)
      const cold = [];
      sh('sync');
      for (let i = 0; i < SHORT_RUNS; i++) {
        await unmount(m);
        m = await mount(start, mnt);
        ready.push(m.ready);
        cold.push(await timed(() => lsl(`${mnt}/${sys}-small`)));
      }
      note('mount', sys, median(ready));
      note('lscold', sys, median(cold));
      // warm: the median of SHORT_RUNS too (a 3-8 ms workload; the best of 3 swung by 3 ms between runs)
      const warm = [];
      for (let i = 0; i < SHORT_RUNS; i++) warm.push(await timed(() => lsl(`${mnt}/${sys}-small`)));
      note('lswarm', sys, median(warm));
      note('rm', sys, await timed(async () => {
        sh(`rm -r ${mnt}/${sys}-small`);
        await until('all deleted', async () => (await countUnder(client, `${sys}-small/`)) === 0);
      }));
      note('mv', sys, await timed(async () => {
        sh(`mv ${mnt}/${sys}-mvsrc ${mnt}/${sys}-mvdst`);
        await until('all moved', async () => (await countUnder(client, `${sys}-mvsrc/`)) === 0 && (await countUnder(client, `${sys}-mvdst/`)) === opt.mv);
      }));
      await unmount(m);
    }

    // svcfs alone (and direct): a big file, and big directories, with the mount's peak memory
    if (opt.big > 0 || opt.dirs.length) {
      log('svcfs: big file and big directories');
      const big = path.join(work, 'big.bin');
      const mnt = path.join(work, 'mnt-svcfs');
      if (opt.big > 0) {
        fs.rmSync(src);
        sh(`head -c ${opt.big * MiB} /dev/urandom > ${big}`);
        const bigMd5 = sh(`md5sum ${big}`).split(' ')[0];
        settleFor(big);
        note('bigwrite', 'direct', await timed(() => direct.put(big, 'direct-big.bin')));
        dropCaches();
        note('bigread', 'direct', await timed(() => { md5 = direct.getMd5('direct-big.bin'); }));
        if (md5 !== bigMd5) throw new Error('direct big read: wrong bytes');
        const m = await mount(specs.svcfs, mnt);
        cleanup.push(() => unmount(m));
        rss.reset(m.proc.pid);
        settleFor(big);
        const w = await timed(async () => {
          sh(`cp ${big} ${mnt}/svcfs-big.bin`);
          await until('big file in the bucket', hasSize(client, 'svcfs-big.bin', opt.big * MiB));
        });
        note('bigwrite', 'svcfs', w, { peakRssMiB: Math.round(rss.peakMiB(m.proc.pid)) });
        fs.rmSync(big);
        dropCaches();
        rss.reset(m.proc.pid);
        const r = await timed(() => { md5 = sh(`md5sum ${mnt}/direct-big.bin`).split(' ')[0]; });
        if (md5 !== bigMd5) throw new Error('svcfs big read: wrong bytes');
        note('bigread', 'svcfs', r, { peakRssMiB: Math.round(rss.peakMiB(m.proc.pid)) });
        await unmount(m);
      }
      for (const n of opt.dirs) {
        log(`  filling a directory of ${n} objects`);
        await prefill(`dir${n}/`, n, Buffer.from('x'));
        sh('sync'); // (the server's writes of the prefill, and of the big file before, are not part of the listing)
        const before = await serverCounts(server.metricsUrl);
        note(`ls${n}`, 'direct', await timed(async () => { for await (const _ of client.list(BUCKET, { prefix: `dir${n}/`, delimiter: '/' })) void _; }),
          { lists: delta(before, await serverCounts(server.metricsUrl), /^List/) });
        const m = await mount(specs.svcfs, mnt);
        cleanup.push(() => unmount(m));
        rss.reset(m.proc.pid);
        const b = await serverCounts(server.metricsUrl);
        const sec = await timed(() => { const lines = sh(`ls -l ${mnt}/dir${n} | wc -l`); if (Number(lines) !== n + 1) throw new Error(`ls -l showed ${lines}`); });
        const a = await serverCounts(server.metricsUrl);
        note(`ls${n}`, 'svcfs', sec, { lists: delta(b, a, /^List/), heads: delta(b, a, /^Head/), peakRssMiB: Math.round(rss.peakMiB(m.proc.pid)) });
        await unmount(m);
      }
    }
  } finally {
    for (const f of cleanup.reverse()) await f();
    if (client) await client.close();
    if (server) { server.proc.kill('SIGTERM'); await new Promise((r) => (server.proc.exitCode === null ? server.proc.once('exit', r) : r())); }
    fs.rmSync(work, { recursive: true, force: true });
  }
  const report = {
    date: new Date().toISOString(), machine: machine(), options: opt, workloads: WORKLOADS, results,
    serverAlone: { ...serverAlone, writeMBps: mbps(results.write?.direct, opt.size), readMBps: mbps(results.read?.direct, opt.size) },
  };
  printTable(report);
  if (opt.json) fs.writeFileSync(opt.json, `${JSON.stringify(report, null, 1)}\n`);
  if (opt.svg) fs.writeFileSync(opt.svg, chart(report));
}

const mbps = (r, mib) => (r ? (mib * MiB) / 1e6 / r.sec : undefined);

function machine() {
  const v = (cmd) => { try { return sh(cmd).trim().split('\n')[0]; } catch { return undefined; } };
  return {
    cpu: os.cpus()[0]?.model, cores: os.cpus().length, memGiB: Math.round(os.totalmem() / 2 ** 30), kernel: os.release(), node: process.version,
    curl: v('curl --version')?.split(' ')[1], s3fs: v('s3fs --version')?.match(/V([\d.]+)/)?.[1], rclone: v('rclone version')?.split(' ')[1],
  };
}

const SYSTEMS = ['direct', 'rclone', 's3fs', 'svcfs'];
function printTable(rep) {
  const sys = SYSTEMS.filter((s) => Object.values(rep.results).some((r) => r[s]));
  const cell = (w, s) => {
    const r = rep.results[w][s];
    if (!r) return '-';
    let t = `${r.sec < 10 ? r.sec.toFixed(2) : r.sec.toFixed(1)} s`;
    const d = rep.results[w].direct;
    if (s !== 'direct' && d) t += ` (${(d.sec / r.sec).toFixed(2)}x)`;
    if (r.lists !== undefined) t += ` ${r.lists} LIST`;
    if (r.heads !== undefined) t += ` ${r.heads} HEAD`;
    if (r.peakRssMiB !== undefined) t += ` ${r.peakRssMiB} MiB`;
    return t;
  };
  const m = rep.machine;
  console.log(`svcfs bench, ${rep.date.slice(0, 10)}: ${m.cores} x ${m.cpu}, ${m.memGiB} GiB, Linux ${m.kernel}, Node ${m.node}; curl ${m.curl}, rclone ${m.rclone ?? '-'}, s3fs ${m.s3fs ?? '-'}`);
  console.log('(x) = speed relative to direct: direct time / this time; higher is better, 1 is the wire');
  console.log(`| workload | ${sys.join(' | ')} |`);
  console.log(`|---|${sys.map(() => '---').join('|')}|`);
  for (const w of Object.keys(rep.workloads).filter((k) => rep.results[k])) console.log(`| ${rep.workloads[w]} | ${sys.map((s) => cell(w, s)).join(' | ')} |`);
  const a = rep.serverAlone;
  if (a.pairsPerSec) console.log(`server alone: ${a.pairsPerSec.toFixed(0)} PUT+GET pairs/s of 4 KiB (${(2 * a.pairsPerSec).toFixed(0)} requests/s, 16 clients, p50 ${a.p50} ms); ${opt.size} MiB PUT ${a.writeMBps?.toFixed(0)} MB/s, GET+md5 ${a.readMBps?.toFixed(0)} MB/s (curl)`);
}

/** grouped horizontal bars, one group per workload, each group scaled to its slowest bar */
function chart(rep) {
  const colors = { direct: '#888888', rclone: '#e69f00', s3fs: '#56b4e9', svcfs: '#009e73' };
  const sys = SYSTEMS.filter((s) => Object.values(rep.results).some((r) => r[s]));
  const ws = Object.keys(rep.workloads).filter((k) => rep.results[k]);
  const W = 1060; const labelW = 250; const barMax = 460; const bh = 13; const gap = 12;
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const out = [];
  let y = 58;
  for (const w of ws) {
    const rows = sys.filter((s) => rep.results[w][s]);
    const max = Math.max(...rows.map((s) => rep.results[w][s].sec));
    out.push(`<text x="${labelW - 8}" y="${y + (rows.length * bh) / 2 + 4}" text-anchor="end" font-weight="bold">${esc(rep.workloads[w])}</text>`);
    for (const s of rows) {
      const r = rep.results[w][s];
      const len = Math.max(1, (r.sec / max) * barMax);
      const d = rep.results[w].direct;
      let label = `${r.sec < 10 ? r.sec.toFixed(2) : r.sec.toFixed(1)} s`;
      if (s !== 'direct' && d) label += ` (${(d.sec / r.sec).toFixed(2)}x direct)`;
      if (r.peakRssMiB !== undefined) label += `, peak RSS ${r.peakRssMiB} MiB`;
      if (r.lists !== undefined) label += `, ${r.lists} LIST${r.heads !== undefined ? ` ${r.heads} HEAD` : ''}`;
      out.push(`<rect x="${labelW}" y="${y}" width="${len.toFixed(1)}" height="${bh - 2}" fill="${colors[s]}"><title>${s}: ${esc(label)}</title></rect>`);
      out.push(`<text x="${labelW + len + 4}" y="${y + bh - 3}" font-size="10">${esc(label)}</text>`);
      y += bh;
    }
    y += gap;
  }
  const legend = sys.map((s, i) => `<rect x="${labelW + i * 110}" y="30" width="12" height="12" fill="${colors[s]}"/><text x="${labelW + i * 110 + 16}" y="40">${s}</text>`).join('');
  const m = rep.machine;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y + 24}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="18" font-size="13" font-weight="bold">svcfs bench: time per workload (shorter is better; each group scaled to its slowest)</text>
${legend}
${out.join('\n')}
<text x="10" y="${y + 12}" font-size="10" fill="#555">${esc(`${rep.date.slice(0, 10)}, ${m.cores} x ${m.cpu}, Linux ${m.kernel}, Node ${m.node}, rclone ${m.rclone ?? '-'} (--vfs-cache-mode writes), s3fs ${m.s3fs ?? '-'}; one svcfs serve on loopback; direct = curl and one keep-alive connection`)}</text>
</svg>
`;
}

main().catch((e) => { console.error(e); process.exit(1); });
