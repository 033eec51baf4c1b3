// What differs between stores, checked on each: conditional writes (Ceph RGW 16
// refuses a quoted If-Match and ignores conditions on completion), listings
// with or without user metadata, empty completion ETags. Edits of objects
// another client wrote must never end in a conflict copy; a real conflict must.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { backendNames, startBackend } from './helpers/backend';
import { sh, sleep, startMount } from './helpers/mount';
import { CLI, startServer, tmpDir } from './helpers/server';
import { startFaultProxy } from './helpers/faultproxy';
import { PROBE_NAME } from '../src/fs/conditional';

const MiB = 1024 * 1024;

for (const backend of backendNames()) t.test(`stores: ${backend}`, async (t) => {
  const b = await startBackend(t, backend);
  const c = b.client();
  const B = b.bucket;
  const m = await startMount(t, b);
  const M = m.mnt;
  const names = async (dir = '') => (await c.listPage(B, { prefix: dir })).contents.map((o) => o.key);

  t.test('the conditional-write mode is probed and shown', async (t) => {
    const st = await m.status();
    if (backend === 'rgw') t.match(st.conditionalWrites, /^conditional .*ETags sent unquoted.*multipart uploads: HEAD before completion/, st.conditionalWrites);
    else t.match(st.conditionalWrites, /^conditional \(If-Match \/ If-None-Match on upload\)$/, st.conditionalWrites);
    t.match(await sh(`${process.execPath} ${CLI} status ${M}`), /conflict check: conditional/);
    t.notOk((await names()).some((k) => k.includes('.svcfs-probe')), 'the probe leaves no key behind');
  });

  t.test('no false conflicts: edit, append, truncate objects another client wrote', async (t) => {
    const orig = randomBytes(100_000);
    await c.put(B, 'other/edit.bin', orig);
    await c.put(B, 'other/log.txt', 'line 1\n');
    await c.put(B, 'other/cut.txt', '0123456789');
    await sleep(2100); // past the mount's TTL: it learns of them now
    await sh(`printf 'XYZ' | dd of=${M}/other/edit.bin bs=1 seek=5000 conv=notrunc status=none`);
    const want = Buffer.from(orig);
    want.write('XYZ', 5000);
    t.ok((await c.getBuffer(B, 'other/edit.bin')).equals(want), 'edit in the middle');
    await sh(`echo 'line 2' >> ${M}/other/log.txt && echo 'line 3' >> ${M}/other/log.txt`);
    t.equal((await c.getBuffer(B, 'other/log.txt')).toString(), 'line 1\nline 2\nline 3\n', 'two appends');
    await sh(`truncate -s 4 ${M}/other/cut.txt`);
    t.equal((await c.getBuffer(B, 'other/cut.txt')).toString(), '0123', 'truncate');
    // bash's `>` opens, dup2s and closes the first descriptor: a flush (an upload) before the write
    await sh(`echo hello > ${M}/other/new.txt && echo x >> ${M}/other/new.txt`);
    t.equal((await c.getBuffer(B, 'other/new.txt')).toString(), 'hello\nx\n', 'create, then append');
    t.same((await names('other/')).filter((k) => k.includes('.conflict-')), [], 'no conflict copy');
    t.equal((await m.status()).conflicts, 0);
  });

  t.test('no false conflict on a multipart edit', async (t) => {
    const big = randomBytes(20 * MiB);
    await c.put(B, 'other/big.bin', big);
    await sleep(2100);
    await sh(`echo tail >> ${M}/other/big.bin`);
    const got = await c.getBuffer(B, 'other/big.bin');
    t.equal(got.length, big.length + 5);
    t.ok(got.subarray(0, big.length).equals(big) && got.subarray(big.length).toString() === 'tail\n', 'appended through a multipart upload');
    await sh(`echo again >> ${M}/other/big.bin`);
    t.equal((await c.getBuffer(B, 'other/big.bin')).subarray(-6).toString(), 'again\n', 'and again (the ETag the completion gave was right)');
    t.same((await names('other/')).filter((k) => k.includes('.conflict-')), [], 'no conflict copy');
  });

  t.test('a real conflict still keeps both versions', async (t) => {
    await c.put(B, 'other/contended.txt', 'base\n');
    await sleep(2100);
    // hold the file open (rewriting it) while another client replaces it
    // (one descriptor, no dup: a shell's `>&3` closes a duplicate, and that close uploads)
    const writer = sh(`python3 -c 'import time; f = open("${M}/other/contended.txt", "w"); f.write("mine\\n"); f.flush(); time.sleep(2); f.close()'`);
    await sleep(800);
    await c.put(B, 'other/contended.txt', 'theirs\n');
    await writer.catch(() => undefined);
    await sleep(300);
    t.equal((await c.getBuffer(B, 'other/contended.txt')).toString(), 'theirs\n', 'their version stays at the key');
    const copies = (await names('other/')).filter((k) => k.startsWith('other/contended.txt.conflict-'));
    t.equal(copies.length, 1, 'ours next to it');
    if (copies[0]) t.equal((await c.getBuffer(B, copies[0])).toString(), 'mine\n');
  });

  t.test('modes and times in ls -l after the TTL and after a remount', async (t) => {
    await sh(`mkdir -m 750 ${M}/modes && for i in $(seq 1 20); do echo $i > ${M}/modes/f$i; done && chmod 640 ${M}/modes/f* && touch -d '2021-02-03 04:05:06 UTC' ${M}/modes/f7`);
    await sleep(2100);
    const before = (await m.status()).requests as Record<string, number>;
    const ls = await sh(`ls -l ${M}/modes`);
    const after = (await m.status()).requests as Record<string, number>;
    t.equal(ls.split('\n').filter((l) => l.startsWith('-rw-r----- ')).length, 20, 'every file 640');
    // the directory's own lookup may HEAD it (and its marker); its entries need none
    t.ok((after.head ?? 0) - (before.head ?? 0) <= 2, `what this mount wrote needs no HEAD per entry (${(after.head ?? 0) - (before.head ?? 0)})`);
    t.equal((await sh(`stat -c %Y ${M}/modes/f7`)).trim(), String(Date.UTC(2021, 1, 3, 4, 5, 6) / 1000));
    const m2 = await startMount(t, b);
    const ls2 = await sh(`ls -l ${m2.mnt}/modes`);
    t.equal(ls2.split('\n').filter((l) => l.startsWith('-rw-r----- ')).length, 20, 'a fresh mount shows the modes too');
    t.equal((await sh(`stat -c '%a %Y' ${m2.mnt}/modes/f7 && stat -c %a ${m2.mnt}/modes`)).trim(), `640 ${Date.UTC(2021, 1, 3, 4, 5, 6) / 1000}\n750`);
    const heads = ((await m2.status()).requests.head ?? 0) as number;
    if (backend === 'rgw') t.ok(heads >= 20 && heads <= 30, `without listing metadata: one HEAD per entry, no more (${heads})`);
    else t.ok(heads <= 2, `listing metadata: no HEAD per entry, only the directory's own lookup (${heads})`);
  });

  t.test('a 1 MiB file and a symlink written elsewhere read right', async (t) => {
    const local = tmpDir('stores');
    t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
    const data = randomBytes(MiB);
    await c.put(B, 'plain.bin', data);
    await sleep(2100);
    await sh(`cp ${M}/plain.bin ${local}/p`);
    t.ok(fs.readFileSync(`${local}/p`).equals(data));
    await sh(`ln -s plain.bin ${M}/lnk`);
    t.equal((await sh(`readlink ${M}/lnk`)).trim(), 'plain.bin');
    t.equal((await sh(`cat ${M}/lnk | wc -c`)).trim(), String(MiB));
  });
});

// The mount probes the store (conditional writes, tags on copies) once it
// serves, when an upload first needs the answer (or a second after the mount):
// a slow store does not delay the start, the first listings have the store to
// themselves, listings never show the probe's scratch keys, and uploads wait
// for the answer.
t.test('the mount serves while it probes the store', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const proxy = await startFaultProxy(t, s.url, 0);
  let firstProbe = 0;
  proxy.delayOf = (req) => {
    if (!req.url?.includes(PROBE_NAME)) return 0;
    firstProbe ||= Date.now();
    return 700;
  };
  const t0 = Date.now();
  const m = await startMount(t, s, { endpoint: proxy.url });
  const ready = Date.now() - t0;
  // (about 15 probe requests of 0.7 s each, one after another)
  t.ok(ready < 6000, `mounted before the probes end (${ready} ms)`);
  const scratch = async () => (await c.listPage('test', {})).contents.map((o) => o.key).filter((k) => k.includes(PROBE_NAME));
  await sh(`mkdir ${m.mnt}/d`);
  await sleep(300);
  t.equal(firstProbe, 0, 'no probe request yet: nothing needed its answer');
  t.same(await scratch(), [], 'and no probe key');
  // the upload at close needs the answer: it asks for the probes and waits for them
  const writing = sh(`echo hello > ${m.mnt}/d/early.txt`);
  for (let i = 0; i < 100 && !(await scratch()).length; i++) await sleep(20);
  t.ok((await scratch()).length > 0, 'a probe key is in the bucket now');
  t.equal((await sh(`ls -A ${m.mnt}`)).trim(), 'd', 'the root listing shows no probe key');
  t.ok((await scratch()).length > 0, 'while the probe is still on');
  await writing;
  t.equal((await c.getBuffer('test', 'd/early.txt')).toString(), 'hello\n', 'a file written while probing is uploaded at close');
  const st = await m.status();
  t.match(st.conditionalWrites, /^conditional \(If-Match \/ If-None-Match on upload\)$/, 'status answers with what the probe found');
  t.same(await scratch(), [], 'the probe leaves no key behind');
});
