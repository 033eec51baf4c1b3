// Nothing lost: faults between mount and server, a mount killed with uploads
// pending, a server killed while the mount is busy, and a conflicting change.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startFaultProxy } from './helpers/faultproxy';
import { forceUnmount, sh, shStatus, sleep, startMount, stepper } from './helpers/mount';
import { startServer, tmpDir } from './helpers/server';

const KiB = 1024;
const MiB = 1024 * KiB;
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** Files of the given sizes, with random content, in a local directory. */
function makeFiles(dir: string, sizes: number[]): string[] {
  return sizes.map((size, i) => {
    const name = `f${String(i).padStart(3, '0')}-${size}.bin`;
    fs.writeFileSync(path.join(dir, name), randomBytes(size));
    return name;
  });
}

/** Copy files into the mount with N parallel writers; each file's close result, as the application saw it. */
async function writeAll(names: string[], from: string, to: string, writers = 4): Promise<Map<string, string>> {
  const script = path.join(tmpDir('writer'), 'write.py');
  fs.writeFileSync(script, [
    'import sys, shutil, json',
    'res = {}',
    'for name in sys.argv[3:]:',
    '    try:',
    "        with open(sys.argv[2] + '/' + name, 'wb') as out, open(sys.argv[1] + '/' + name, 'rb') as src:",
    '            shutil.copyfileobj(src, out, 1 << 20)',
    "        res[name] = 'ok'",
    '    except OSError as e:',
    "        res[name] = 'error: ' + str(e)",
    'print(json.dumps(res))',
  ].join('\n') + '\n');
  const chunks: string[][] = Array.from({ length: writers }, () => []);
  names.forEach((n, i) => chunks[i % writers].push(n));
  const results = await Promise.all(chunks.map((c) => sh(`python3 ${script} ${from} ${to} ${c.join(' ')}`, { timeout: 900_000 })));
  const out = new Map<string, string>();
  for (const r of results) for (const [k, v] of Object.entries(JSON.parse(r))) out.set(k, v as string);
  return out;
}

/**
 * Open every file now; write and close them all once told to (`go`), so that
 * something can happen in between. `opened` settles when every open returned.
 */
function writeLate(names: string[], from: string, to: string): { opened: Promise<void>; go: () => void; done: Promise<Map<string, string>> } {
  const dir = tmpDir('writer');
  const script = path.join(dir, 'late.py');
  fs.writeFileSync(script, [
    'import os, sys, time, json',
    "files = [(n, open(sys.argv[2] + '/' + n, 'wb')) for n in sys.argv[4:]]",
    "open(sys.argv[3] + '/opened', 'w').close()",
    'for _ in range(6000):',
    "    if os.path.exists(sys.argv[3] + '/go'): break",
    '    time.sleep(0.05)',
    'res = {}',
    'for n, f in files:',
    '    try:',
    "        f.write(open(sys.argv[1] + '/' + n, 'rb').read())",
    '        f.close()',
    "        res[n] = 'ok'",
    '    except OSError as e:',
    "        res[n] = 'error: ' + str(e)",
    'print(json.dumps(res))',
  ].join('\n') + '\n');
  const done = sh(`python3 ${script} ${from} ${to} ${dir} ${names.join(' ')}`, { timeout: 900_000 })
    .then((out) => new Map(Object.entries(JSON.parse(out)) as Array<[string, string]>));
  const opened = (async () => {
    for (let i = 0; i < 1200 && !fs.existsSync(path.join(dir, 'opened')); i++) await Promise.race([sleep(50), done]);
    if (!fs.existsSync(path.join(dir, 'opened'))) await done; // the opens failed: let the error show
  })();
  return { opened, go: () => fs.writeFileSync(path.join(dir, 'go'), ''), done };
}

t.test('200 files of mixed sizes while faults fire at random', async (t) => {
  const s = await startServer(t);
  const proxy = await startFaultProxy(t, s.url, 0.25);
  const m = await startMount(t, s, { endpoint: proxy.url, options: ['retry_budget=10'] });
  const local = tmpDir('faults');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  const sizes = [
    ...Array.from({ length: 140 }, () => KiB + Math.floor(Math.random() * 63 * KiB)),
    ...Array.from({ length: 40 }, () => 100 * KiB + Math.floor(Math.random() * 4 * MiB)),
    ...Array.from({ length: 15 }, () => 5 * MiB + Math.floor(Math.random() * 15 * MiB)),
    ...Array.from({ length: 5 }, () => 30 * MiB + Math.floor(Math.random() * 10 * MiB)),
  ];
  const names = makeFiles(local, sizes);
  await sh(`mkdir -p ${m.mnt}/faulty`);
  const results = await writeAll(names, local, `${m.mnt}/faulty`);
  // and a few more, opened while the server is reachable, written and closed after it is gone:
  // their closes must fail
  const doomed = makeFiles(local, [2 * KiB, 300 * KiB, 20 * MiB]).map((n) => `z-${n}`);
  for (const n of doomed) fs.renameSync(path.join(local, n.slice(2)), path.join(local, n));
  const writing = writeLate(doomed, local, `${m.mnt}/faulty`);
  await writing.opened;
  proxy.down = true;
  writing.go();
  for (const [k, v] of await writing.done) results.set(k, v);
  names.push(...doomed);
  proxy.rate = 0;
  const c = s.client();
  const ok = names.filter((n) => results.get(n) === 'ok');
  const failed = names.filter((n) => results.get(n) !== 'ok');
  t.comment(`faults injected: ${JSON.stringify(proxy.counts)}; closes ok ${ok.length}, failed ${failed.length}`);
  t.ok(Object.values(proxy.counts).reduce((a, b) => a + b, 0) > 100, 'faults did fire');
  let exact = 0;
  for (const n of ok) {
    const got = await c.getBuffer('test', `faulty/${n}`).catch(() => Buffer.alloc(0));
    if (md5(got) === md5(fs.readFileSync(path.join(local, n)))) exact++;
    else t.fail(`${n}: close succeeded but the bucket does not hold its bytes`);
  }
  t.equal(exact, ok.length, `every file whose close succeeded is byte-exact in the bucket (${exact})`);
  for (const n of doomed) t.not(results.get(n), 'ok', `${n}: its close failed while the server was unreachable`);
  for (const n of failed) t.match(results.get(n), /Input\/output error/, `${n}: the failure was reported as EIO`);
  const st = await m.status();
  // (a file that failed during the random phase may already have been uploaded by a background retry)
  t.ok(st.pendingUploads >= doomed.length, `the files that failed while the server was unreachable are still staged (${st.pendingUploads} pending)`);
  const journal = path.join(m.cacheDir, fs.readdirSync(m.cacheDir)[0], 'journal');
  const records = fs.readdirSync(journal).map((f) => JSON.parse(fs.readFileSync(path.join(journal, f), 'utf8')));
  for (const n of doomed) {
    const r = records.find((x) => x.path === `/faulty/${n}`);
    t.ok(r && r.state === 'pending' && md5(fs.readFileSync(r.file)) === md5(fs.readFileSync(path.join(local, n))), `${n}: in the staging area, intact`);
  }
  // once the server is reachable again, the mount uploads them by itself
  proxy.down = false;
  proxy.rate = 0;
  for (let i = 0; i < 600 && (await m.status()).pendingUploads > 0; i++) await sleep(100);
  for (const n of failed) {
    const got = await c.getBuffer('test', `faulty/${n}`).catch(() => Buffer.alloc(0));
    t.equal(md5(got), md5(fs.readFileSync(path.join(local, n))), `${n}: uploaded later, byte-exact`);
  }
  t.ok(st.retries > 0, `retries seen: ${st.retries}`);
});

t.test('kill -9 of a write-back mount with 50 uploads pending; remount uploads them all', async (t) => {
  const s = await startServer(t);
  const cache = tmpDir('wb-cache');
  const mnt = tmpDir('wb-mnt');
  t.teardown(async () => {
    await forceUnmount(mnt);
    fs.rmSync(cache, { recursive: true, force: true });
  });
  const m = await startMount(t, s, { cacheDir: cache, mnt, options: ['write_back=30'] });
  const local = tmpDir('wb');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  const names = makeFiles(local, Array.from({ length: 50 }, (_, i) => (i % 10 === 0 ? 3 * MiB : 10 * KiB + i * 997)));
  const results = await writeAll(names, local, mnt, 2);
  t.equal([...results.values()].filter((v) => v === 'ok').length, 50, 'all 50 closes return at once (write-back)');
  const st = await m.status();
  t.equal(st.pendingUploads, 50, '50 uploads pending');
  m.proc.kill('SIGKILL');
  await new Promise((r) => m.proc.once('exit', r));
  await forceUnmount(mnt);
  const c = s.client();
  let before = 0;
  for await (const p of c.list('test')) before += p.contents.length;
  t.equal(before, 0, 'nothing reached the bucket before the crash');
  const started = Date.now();
  const m2 = await startMount(t, s, { cacheDir: cache, mnt, options: ['write_back=30'] });
  for (let i = 0; i < 300 && (await m2.status()).pendingUploads > 0; i++) await sleep(100);
  const took = Date.now() - started;
  t.comment(`recovery: remount and upload of 50 pending files took ${took} ms`);
  for (const n of names) {
    const got = await c.getBuffer('test', n).catch(() => Buffer.alloc(0));
    if (md5(got) !== md5(fs.readFileSync(path.join(local, n)))) t.fail(`${n} not recovered byte-exact`);
  }
  t.pass('all 50 files are in the bucket, byte-exact, without writing them again');
  t.match(m2.logs.join(''), /"recovered":50/, 'the mount logs what it recovered');
  t.equal((await m2.status()).recovered, 50);
});

t.test('a file still open at a crash is set aside, not uploaded; one closed at once never needed a journal record', async (t) => {
  const s = await startServer(t);
  const cache = tmpDir('aside-cache');
  const mnt = tmpDir('aside-mnt');
  t.teardown(async () => {
    await forceUnmount(mnt);
    fs.rmSync(cache, { recursive: true, force: true });
  });
  const m = await startMount(t, s, { cacheDir: cache, mnt });
  const records = () => sh(`find ${cache} -path '*journal*' -name '*.json' | wc -l`).then((n) => Number(n.trim()));
  // closed at once (cp): uploaded at close, with no journal record written in between
  await sh(`for i in 1 2 3 4 5; do echo quick $i > ${mnt}/quick$i.txt; done`);
  t.equal(await records(), 0, 'no journal records left');
  const data = randomBytes(200 * KiB);
  const local = tmpDir('aside');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  fs.writeFileSync(path.join(local, 'open.bin'), data);
  // written and held open past the record's delay, then the mount dies
  const holder = shStatus(`python3 -c "
import time
f = open('${mnt}/open.bin', 'wb')
f.write(open('${local}/open.bin', 'rb').read()); f.flush()
time.sleep(4)
"`);
  for (let i = 0; i < 50 && (await records()) === 0; i++) await sleep(100);
  t.equal(await records(), 1, 'a file open for more than a second has its record');
  m.proc.kill('SIGKILL');
  await new Promise((r) => m.proc.once('exit', r));
  await forceUnmount(mnt);
  await holder;
  const m2 = await startMount(t, s, { cacheDir: cache, mnt });
  t.match(m2.logs.join(''), /never closed before the crash was set aside/, 'the remount says so');
  const aside = (await sh(`find ${cache} -path '*set-aside*' -type f -name '*open.bin'`)).trim().split('\n').filter(Boolean);
  t.equal(aside.length, 1, 'its bytes are kept in set-aside');
  t.ok(fs.readFileSync(aside[0]).equals(data), 'byte-exact');
  t.equal(await s.client().head('test', 'open.bin'), undefined, 'and not uploaded');
  t.equal((await s.client().getBuffer('test', 'quick3.txt')).toString(), 'quick 3\n');
});

t.test('the server killed and restarted while the mount is busy: no remount needed', async (t) => {
  const s = await startServer(t);
  const m = await startMount(t, s, { options: ['retry_budget=30'] });
  const local = tmpDir('srvkill');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  const names = makeFiles(local, Array.from({ length: 30 }, () => MiB));
  // half of them opened before the crash and closed while the server is down
  const late = writeLate(names.slice(15), local, m.mnt);
  const writing = Promise.all([writeAll(names.slice(0, 15), local, m.mnt, 2), late.done])
    .then(([a, b]) => new Map([...a, ...b]));
  await late.opened;
  await sleep(500);
  await s.stop('SIGKILL');
  late.go();
  await sleep(2500);
  await s.restart();
  const results = await writing;
  t.equal([...results.values()].filter((v) => v === 'ok').length, 30, 'every close succeeded');
  const c = s.client();
  for (const n of names) {
    const got = await c.getBuffer('test', n);
    if (md5(got) !== md5(fs.readFileSync(path.join(local, n)))) t.fail(`${n} differs`);
  }
  t.pass('all 30 files byte-exact');
  t.equal(await sh(`cat ${m.mnt}/${names[0]} | md5sum | cut -c1-32`), md5(fs.readFileSync(path.join(local, names[0]))) + '\n', 'and readable through the same mount');
  t.ok((await m.status()).retries > 0, 'the mount retried meanwhile');
});

for (const mode of ['on', 'head']) t.test(`a conflicting change keeps both versions (conflict_check=${mode})`, async (t) => {
  const s = await startServer(t);
  const m = await startMount(t, s, { options: [`conflict_check=${mode}`] });
  const c = s.client();
  await c.put('test', 'shared/doc.txt', 'version 1 from the bucket\n');
  await sleep(2100);
  // the mount holds an edit (the file is open, modified, not yet closed) ...
  const editing = stepper(`
f = open('${m.mnt}/shared/doc.txt', 'r+')
f.seek(0, 2); f.write('edited through the mount\\n'); f.flush()
said('edited')
wait('changed')
f.close()
`);
  await editing.reached('edited');
  await sleep(300); // the mount reads the rest of the file (version 1) as soon as it is written to
  // ... while another client writes the same key
  await c.put('test', 'shared/doc.txt', 'version 2 from another client\n');
  editing.go('changed');
  const r = await editing.done;
  t.equal(r.code, 0, 'close succeeds: our version is kept, not lost');
  t.equal((await c.getBuffer('test', 'shared/doc.txt')).toString(), 'version 2 from another client\n', "the other writer's version stays at the key");
  const keys: string[] = [];
  for await (const p of c.list('test', { prefix: 'shared/' })) keys.push(...p.contents.map((o) => o.key));
  const copy = keys.find((k) => /^shared\/doc\.txt\.conflict-\d{8}T\d{6}Z$/.test(k));
  t.ok(copy, `ours is kept as ${copy}`);
  t.equal((await c.getBuffer('test', copy!)).toString(), 'version 1 from the bucket\nedited through the mount\n');
  t.match(m.logs.join(''), /conflict: the object changed on the server/);
  await sleep(2100);
  t.match(await sh(`ls ${m.mnt}/shared`), /doc\.txt\.conflict-/, 'both show in the mount');
  t.equal((await m.status()).conflicts, 1);
});
