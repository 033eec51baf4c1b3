// Directories through the mount: a 300-file tree renamed and removed, empty
// directories as markers, and the request counts of ls -l (svcfs status).
import t from 'tap';
import * as fs from 'node:fs';
import { sh, shStatus, sleep, startMount } from './helpers/mount';
import { SvcClient } from '../src/wire/client';
import { backendNames, startBackend } from './helpers/backend';
import { startServer, tmpDir } from './helpers/server';

async function keysUnder(c: SvcClient, bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const p of c.list(bucket, { prefix })) keys.push(...p.contents.map((o) => o.key));
  return keys;
}

for (const backend of backendNames()) t.test(`directory trees (${backend})`, async (t) => {
  const b = await startBackend(t, backend);
  const c = b.client();
  const B = b.bucket;
  const m = await startMount(t, b);
  const M = m.mnt;
  const local = tmpDir('tree');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));

  t.test('a tree of 300 files: copied, renamed, removed', async (t) => {
    await sh(`cd ${local} && for d in $(seq 1 10); do mkdir -p tree/d$d/sub; for f in $(seq 1 15); do echo "$d/$f" > tree/d$d/f$f; echo "$d/s$f" > tree/d$d/sub/s$f; done; done`);
    t.equal((await sh(`find ${local}/tree -type f | wc -l`)).trim(), '300');
    await sh(`cp -r ${local}/tree ${M}/tree`);
    t.equal((await keysUnder(c, B, 'tree/')).filter((k) => !k.endsWith('/')).length, 300, '300 objects in the bucket');
    await sh(`mv ${M}/tree ${M}/renamed`);
    t.same(await keysUnder(c, B, 'tree/'), [], 'no key left under the old name');
    const moved = await keysUnder(c, B, 'renamed/');
    t.equal(moved.filter((k) => !k.endsWith('/')).length, 300, 'every file under the new name');
    t.equal((await c.getBuffer(B, 'renamed/d7/sub/s11')).toString(), '7/s11\n');
    t.equal((await sh(`find ${M}/renamed -type f | wc -l`)).trim(), '300');
    await sh(`diff -r ${local}/tree ${M}/renamed`);
    await sh(`rm -r ${M}/renamed`);
    t.same(await keysUnder(c, B, 'renamed/'), [], 'rm -r removed every key');
    t.not((await shStatus(`ls ${M}/renamed`)).code, 0);
  });

  t.test('an empty directory persists as a marker', async (t) => {
    await sh(`mkdir -p ${M}/empty/inner`);
    t.ok(await c.head(B, 'empty/inner/'), 'marker object empty/inner/');
    t.match(await sh(`ls ${M}/empty`), /inner/);
    await sh(`echo x > ${M}/empty/inner/file`);
    t.match((await shStatus(`rmdir ${M}/empty/inner`)).stderr, /not empty/i, 'rmdir of a non-empty directory: ENOTEMPTY');
    await sh(`rm ${M}/empty/inner/file && rmdir ${M}/empty/inner`);
    t.equal(await c.head(B, 'empty/inner/'), undefined, 'rmdir removes the marker');
    t.ok(await c.head(B, 'empty/'));
  });

  t.test('unlinks answered before their DELETE: rm -r leaves no key behind, in batches; a name made again at once keeps its new object', async (t) => {
    await sh(`mkdir ${M}/gone && cd ${M}/gone && for i in $(seq 1 200); do echo $i > f$i; done`);
    const s0 = await m.status();
    await sh(`rm -r ${M}/gone`);
    t.same(await keysUnder(c, B, 'gone/'), [], 'nothing left once rm -r returned (its rmdir waited for the deletes)');
    const s1 = await m.status();
    const behind = s1.deletesBehind - s0.deletesBehind;
    const batches = s1.deleteBatches - s0.deleteBatches;
    t.ok(behind >= 190, `unlinks answered before their DELETE: ${behind} of 200 (the first in the directory waits for its own)`);
    t.ok(batches > 0 && batches <= behind / 4, `sent in ${batches} batch deletes`);
    t.equal(s1.deleteErrors, 0);

    // each name made again right after its unlink: a file, a symlink, a directory, a rename's target
    await sh(`mkdir ${M}/again && cd ${M}/again && for i in $(seq 1 40); do echo old$i > f$i; done && echo moved > m`);
    await sh(`cd ${M}/again && rm f1; for i in $(seq 2 37); do rm f$i; echo new$i > f$i; done; ` +
      `rm f38 && ln -s target f38 && rm f39 && mkdir f39 && rm f40 && mv m f40`);
    for (let i = 2; i <= 37; i++) t.equal((await c.getBuffer(B, `again/f${i}`)).toString(), `new${i}\n`, `again/f${i}: the new object`);
    t.equal((await c.getBuffer(B, 'again/f38')).toString(), 'target', 'a symlink made at once');
    t.ok(await c.head(B, 'again/f39/'), 'a directory made at once');
    t.equal(await c.head(B, 'again/f39'), undefined, '(and the file of that name gone)');
    t.equal((await c.getBuffer(B, 'again/f40')).toString(), 'moved\n', 'a rename onto a name just removed');
    t.equal((await sh(`ls ${M}/again | wc -l`)).trim(), '39');
    // names a batch could alter (white space at an end of the key, control characters) go one by one; their neighbours stay
    const odd = [' sp', 'sp ', 'c\x01c'];
    await sh(`cd ${M}/again && python3 -c "import os
for n in ['sp', ' sp', 'sp ', 'c\\x01c']: open(n, 'w').write(n)
for n in [' sp', 'sp ', 'c\\x01c']: os.unlink(n)"`);
    t.equal((await c.getBuffer(B, 'again/sp')).toString(), 'sp', 'the neighbour stays');
    for (const n of odd) t.equal(await c.head(B, `again/${n}`), undefined, `${JSON.stringify(n)} gone`);
    await sh(`rm -r ${M}/again`);
    t.same(await keysUnder(c, B, 'again/'), []);
  });

  // The root's own entry expired while a listing of the root fetched later still lived: the cache
  // read the root as a missing entry of its own listing, and every path through the mount answered
  // ENOENT until that listing expired (found by hand: `cd` into the mount failed mid-session).
  t.test('the mount root stays when its attributes expire before a later listing of it', async (t) => {
    const r = await startMount(t, b);
    await sleep(2200); // what the mount's start cached (cache_ttl 2 s, the kernel's too) has expired
    await sh(`stat ${r.mnt} > /dev/null`); // the root's attributes, cached at T
    await sleep(1000);
    await sh(`ls ${r.mnt} > /dev/null`); // its listing, cached at T + 1 s
    await sleep(1100);
    const failures: string[] = [];
    // from T + 2.1 s to T + 3.5 s: the root's attributes expired, its listing not yet
    for (let i = 0; i < 14; i++) {
      const st = await shStatus(`stat ${r.mnt} > /dev/null && ls ${r.mnt} > /dev/null`);
      if (st.code !== 0) failures.push(st.stderr.trim());
      await sleep(100);
    }
    t.same(failures, [], 'stat and ls of the mount root never fail');
  });

  t.test('an empty directory survives a remount', async (t) => {
    await sh(`mkdir ${M}/kept`);
    const m2 = await startMount(t, b);
    t.equal((await sh(`stat -c %F ${m2.mnt}/kept`)).trim(), 'directory');
    t.equal((await sh(`ls -A ${m2.mnt}/kept`)).trim(), '');
  });
});

// the listing extension of svcfs serve: ls -l needs no HEAD at all
t.test('request counts: ls -l (serve)', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const keys = Array.from({ length: 2000 }, (_, i) => `big/obj${String(i).padStart(4, '0')}`);
  for (let i = 0; i < keys.length; i += 200) await Promise.all(keys.slice(i, i + 200).map((k) => c.put('test', k, 'x')));
  await c.put('test', 'small/a', 'a');
  await c.put('test', 'small/b', 'b');
  const m = await startMount(t, s, { options: ['cache_ttl=60'] });
  const M = m.mnt;
  const req = async () => (await m.status()).requests as Record<string, number>;
  const diff = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(Object.keys({ ...a, ...b }).map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)]).filter(([, v]) => v !== 0));

  await sh(`ls ${M}`);
  const r0 = await req();
  const out = await sh(`ls -l ${M}/small`);
  t.match(out, /-rw-r--r-- .* a\n/);
  const r1 = await req();
  t.same(diff(r0, r1), { list: 1 }, 'first ls -l of a directory: one list request');
  await sh(`ls -l ${M}/small`);
  t.same(diff(r1, await req()), {}, 'a second ls -l within the TTL sends no request');

  const r2 = await req();
  const big = await sh(`ls -l ${M}/big`);
  t.equal(big.trim().split('\n').length, 2001, 'total line and 2000 entries');
  const d = diff(r2, await req());
  t.same(d, { list: 2 }, `ls -l of a 2000-object directory: 2 list requests and no HEAD (${JSON.stringify(d)})`);
  const st = await sh(`${process.execPath} ${__dirname}/../bin/svcfs.js status ${M}`);
  t.match(st, /cache: \d+ entries, hit rate/);
  t.match(st, /requests: .*list \d+/);
});

t.test('request counts: mkdir, then 100 new files copied into it: one PUT each, no lookup requests', async (t) => {
  const s = await startServer(t);
  const m = await startMount(t, s, { options: ['cache_ttl=60'] });
  const local = tmpDir('small');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  for (let i = 0; i < 100; i++) fs.writeFileSync(`${local}/f${i}`, `file ${i}\n`);
  await sh(`ls ${m.mnt}`);
  const before = (await m.status()).requests as Record<string, number>;
  await sh(`cp -r ${local} ${m.mnt}/copied`);
  const after = (await m.status()).requests as Record<string, number>;
  const d = Object.fromEntries(Object.keys({ ...before, ...after }).map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]).filter(([, v]) => v !== 0));
  t.same(d, { put: 101 }, `the directory marker and one PUT per file; a new directory is known empty (${JSON.stringify(d)})`);
  t.equal((await s.client().listPage('test', { prefix: 'copied/' })).contents.length, 101);
});

t.test('ls -l: lookups after a listing are answered in the FUSE thread, with what getattr would say; changes after a listing show at once', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  for (let i = 0; i < 60; i++) await c.put('test', `d/f${i}`, `content ${i}`);
  await c.put('test', 'd/sub/', '');
  for (const [k, v] of [['e/f1', 'one'], ['e/f2', 'two'], ['e/f3', 'three'], ['e/f4', 'four']]) await c.put('test', k, v);
  const m = await startMount(t, s, { options: ['cache_ttl=60'] });
  const M = m.mnt;
  const getattrs = async () => ((await m.status()).operations as Record<string, { count: number }>).getattr?.count ?? 0;
  await sh(`ls ${M}`);
  const g0 = await getattrs();
  const out = await sh(`ls -ln --time-style=+%s ${M}/d`);
  const g1 = await getattrs();
  t.ok(g1 - g0 < 5, `61 lookups of ls -l, ${g1 - g0} getattr reached JavaScript`);
  t.match(out, /\n-rw-r--r-- 1 0 0 +9 \d+ f1\n/, 'a file: mode, owner, size');
  t.match(out, /\n-rw-r--r-- 1 0 0 +10 \d+ f59\n/);
  t.match(out, /\ndrwxr-xr-x \d+ 0 0 +\d+ \d+ sub\n/, 'a directory');
  // what a fresh mount's getattr says, entry by entry (no listing before the stat)
  const m2 = await startMount(t, s, { options: ['cache_ttl=60'] });
  // (files: a directory's times from a listing and from a lookup may differ by the marker's sub-second part)
  const statOf = (dir: string) => sh(`cd ${dir} && for f in f0 f7 f33 f59; do stat -c '%n %f %s %u %g %Y %h' $f; done`);
  const direct = await statOf(`${m2.mnt}/d`);
  t.equal(await statOf(`${M}/d`), direct, 'the same attributes as lookups without a listing');

  // a directory listed but not yet looked up: each change goes through JavaScript and drops what the listing left
  const py = `
import os, sys
e = sys.argv[1]
os.listdir(e)
os.chmod(e + '/f1', 0o600)
os.listdir(e)
os.truncate(e + '/f2', 1)
os.listdir(e)
with open(e + '/f3', 'a') as f: f.write('++')
os.listdir(e)
os.rename(e + '/f3', e + '/f4')
os.listdir(e)
print(oct(os.stat(e + '/f1').st_mode & 0o777), os.stat(e + '/f2').st_size, os.stat(e + '/f4').st_size, os.path.exists(e + '/f3'))
`;
  const dir = tmpDir('changes');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(`${dir}/changes.py`, py);
  t.equal((await sh(`python3 ${dir}/changes.py ${M}/e`)).trim(), '0o600 1 7 False');
  t.equal((await c.getBuffer('test', 'e/f4')).toString(), 'three++');
});

t.test('cp -r and rm -r: the lookup after each create and the directory checks between files are answered in the FUSE thread, with current attributes', async (t) => {
  const s = await startServer(t);
  const opts = { options: ['cache_ttl=60'] };
  const m = await startMount(t, s, opts);
  const local = tmpDir('hops');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  fs.chmodSync(local, 0o755);
  for (let i = 0; i < 50; i++) fs.writeFileSync(`${local}/f${i}`, `file ${i}\n`);
  const lookups = async (mount: typeof m) => {
    const ops = (await mount.status()).operations as Record<string, { count: number }>;
    return (ops.getattr?.count ?? 0) + (ops.fgetattr?.count ?? 0);
  };
  await sh(`ls ${m.mnt}`);
  const started = Math.floor(Date.now() / 1000);
  const l0 = await lookups(m);
  await sh(`cp -r ${local} ${m.mnt}/dst`);
  const l1 = await lookups(m);
  // each new name's (negative) lookup reaches JavaScript; libfuse's lookup after create and the
  // kernel's check of the directory before the next file do not (they were 2 more per file)
  t.ok(l1 - l0 <= 50 + 5, `cp -r of 50 files: ${l1 - l0} getattr/fgetattr reached JavaScript`);
  // into a directory that exists, cp stats each name first, then creates it with O_EXCL, which makes
  // the kernel look the name up again: that second lookup is answered ENOENT in the FUSE thread
  await sh(`mkdir ${m.mnt}/dst2`);
  const l1b = await lookups(m);
  await sh(`cp -r ${local}/. ${m.mnt}/dst2/`);
  const l1c = await lookups(m);
  t.ok(l1c - l1b <= 50 + 5, `cp -r into an existing directory: ${l1c - l1b} getattr reached JavaScript (2 per file before)`);
  t.equal(await sh(`cat ${m.mnt}/dst2/f3`), 'file 3\n', 'and the files are there');
  const [mode, mtime] = (await sh(`stat -c '%a %Y' ${m.mnt}/dst`)).trim().split(' ');
  t.equal(mode, '755', "the directory's own mode");
  t.ok(Number(mtime) >= started, `its mtime is that of the last create (${mtime} >= ${started})`);
  t.equal((await sh(`stat -c '%a %s' ${m.mnt}/dst/f7`)).trim(), '644 7', 'a file: mode and size');
  t.equal(await sh(`cat ${m.mnt}/dst/f49`), 'file 49\n');
  // a fresh mount (nothing in the kernel's caches): rm -r looks up each entry, and the directory
  // between two unlinks is answered from what the unlink handed back
  await m.stop();
  const m2 = await startMount(t, s, opts);
  await sh(`ls ${m2.mnt}`);
  const l2 = await lookups(m2);
  await sh(`rm -r ${m2.mnt}/dst`);
  const l3 = await lookups(m2);
  t.ok(l3 - l2 <= 50 + 5, `rm -r of 50 files: ${l3 - l2} getattr reached JavaScript (one lookup per file; 2 per file before)`);
  t.equal((await s.client().listPage('test', { prefix: 'dst/' })).contents.length, 0, 'all gone');
  // a name found missing, then made by another client: an O_EXCL create through the mount does not
  // overwrite it (the upload's If-None-Match keeps both, as a conflict)
  await sh(`stat ${m2.mnt}/dst2/late 2>/dev/null || true`);
  await s.client().put('test', 'dst2/late', 'theirs');
  await sh(`python3 -c "import os; fd = os.open('${m2.mnt}/dst2/late', os.O_CREAT | os.O_EXCL | os.O_WRONLY); os.write(fd, b'ours'); os.close(fd)" || true`);
  t.equal((await s.client().getBuffer('test', 'dst2/late')).toString(), 'theirs', 'theirs is not overwritten');
});

for (const backend of backendNames()) t.test(`a directory made here: lookups of names not made in it are answered in the FUSE thread, and only while its listing lives (${backend})`, async (t) => {
  const s = await startBackend(t, backend);
  const c = s.client();
  const B = s.bucket;
  const local = tmpDir('made');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  for (let i = 0; i < 50; i++) fs.writeFileSync(`${local}/f${i}`, `file ${i}\n`);
  const errno = async (p: string) => (await sh(`python3 -c "
import os, sys
try:
    os.stat(sys.argv[1]); print('found')
except OSError as e:
    print(os.strerror(e.errno))" '${p}'`)).trim();

  // a long TTL: the kernel's check of the directory between files is answered in the FUSE thread
  // too (patch 12), so what reaches JavaScript is the lookups of the new names
  const long = await startMount(t, s, { options: ['cache_ttl=60'] });
  const getattrs = async () => ((await long.status()).operations as Record<string, { count: number }>).getattr?.count ?? 0;
  await sh(`mkdir ${long.mnt}/new`);
  const g0 = await getattrs();
  await sh(`cp -r ${local}/. ${long.mnt}/new/`);
  const g1 = await getattrs();
  // cp stats each name, then creates it with O_EXCL (another lookup): 100 lookups of new names
  t.ok(g1 - g0 <= 5, `cp of 50 files into a directory made here: ${g1 - g0} getattr reached JavaScript (50 before)`);
  t.equal(await sh(`cat ${long.mnt}/new/f7`), 'file 7\n', 'the files made are found');
  t.equal((await c.listPage(B, { prefix: 'new/' })).contents.filter((o) => !o.key.endsWith('/')).length, 50, 'and in the bucket');
  await long.stop();

  // cache_ttl=2 (the helper's): the directory's listing lives 2 s, the addon's mark a little less
  const m = await startMount(t, s);
  const M = m.mnt;
  await sh(`mkdir ${M}/new2`);
  // names made by other operations than create
  await sh(`ln -s f1 ${M}/new2/link && mkfifo ${M}/new2/fifo && mkdir ${M}/new2/sub`);
  t.equal((await sh(`readlink ${M}/new2/link`)).trim(), 'f1', 'a symlink made there is found');
  t.equal((await sh(`stat -c %F ${M}/new2/fifo ${M}/new2/sub`)).trim(), 'fifo\ndirectory', 'a fifo and a directory too');
  t.equal(await errno(`${M}/new2/nothing`), 'No such file or directory', 'a name never made: ENOENT');
  t.equal(await errno(`${M}/new2/sub/nothing`), 'No such file or directory', 'in the subdirectory made there too');

  // names the store cannot hold are refused as JavaScript refuses them, not said to be absent
  t.equal(await errno(`${M}/new2/${'n'.repeat(300)}`), 'File name too long', 'a name over 255 bytes');
  // (the test cluster's RGW refuses keys of ~600 bytes already: a mkdir that deep is EIO there)
  if (backend === 'serve') {
    let deep = `${M}/new2`;
    for (let i = 0; i < 4; i++) {
      deep += `/${String(i).repeat(200)}`;
      await sh(`mkdir ${deep}`);
    }
    t.equal(await errno(`${deep}/${'k'.repeat(250)}`), 'File name too long', 'a path whose key would pass 1024 bytes');
    t.equal(await errno(`${deep}/short`), 'No such file or directory', 'a shorter one there: absent');
  }

  // moved in: rename drops every mark
  await sh(`echo moved > ${local}/m && cp ${local}/m ${M}/outside && mv ${M}/outside ${M}/new2/moved`);
  t.equal(await sh(`cat ${M}/new2/moved`), 'moved\n', 'a file renamed into it is found at once');

  // made by another client: invisible at most until the listing expires, as everywhere in the mount
  await sh(`mkdir ${M}/other`);
  await sh(`touch ${M}/other/mine`);
  await c.put(B, 'other/theirs', 'theirs');
  await sleep(2500);
  t.equal(await errno(`${M}/other/theirs`), 'found', "another client's file shows once the directory's listing expired");
  t.equal(await sh(`cat ${M}/other/theirs`), 'theirs');
});
