// The mount driven by ordinary tools: cp, cat, cmp, dd, truncate, mv, ln -s,
// tar, rsync, touch, stat, setfattr/getfattr; results checked through the client.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { sh, shStatus, sleep, startMount, stepper } from './helpers/mount';
import { backendNames, startBackend } from './helpers/backend';
import { tmpDir } from './helpers/server';

const MiB = 1024 * 1024;
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/**
 * The share of a file's pages in the kernel's page cache right after an open
 * of it (mincore of a mapping): an open without keep_cache empties it. Not
 * GETs: this machine's host takes random pages of any file's cache away now
 * and then (seen on plain ext4 files too: 1,521 of 16,384 pages in a few
 * minutes, counted as workingset refaults), and each comes back with a GET.
 */
async function resident(file: string): Promise<number> {
  const out = await sh(`python3 -c "
import ctypes, os
libc = ctypes.CDLL('libc.so.6', use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open('${file}', os.O_RDONLY)
size = os.fstat(fd).st_size
p = libc.mmap(None, size, 1, 1, fd, 0)
n = (size + 4095) // 4096
vec = (ctypes.c_ubyte * n)()
assert libc.mincore(ctypes.c_void_p(p), ctypes.c_size_t(size), vec) == 0
print(sum(v & 1 for v in vec) / n)
"`);
  return Number(out.trim());
}

for (const backend of backendNames()) t.test(`files through the mount (${backend})`, async (t) => {
  const b = await startBackend(t, backend);
  const c = b.client();
  const B = b.bucket;
  const m = await startMount(t, b);
  const M = m.mnt;
  const local = tmpDir('local');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));

  t.test('100 MiB byte-exact both ways', async (t) => {
    await sh(`head -c ${100 * MiB} /dev/urandom > ${local}/big.bin`);
    await sh(`cp ${local}/big.bin ${M}/big.bin`);
    const want = (await sh(`md5sum < ${local}/big.bin`)).split(' ')[0];
    const h = createHash('md5');
    for await (const ch of (await c.get(B, 'big.bin')).body) h.update(ch);
    t.equal(h.digest('hex'), want, 'written through the mount, read through the client');
    const info = await c.head(B, 'big.bin');
    t.match(typeof info === 'object' && info.etag, /-\d+$/, 'uploaded as a multipart upload');
    await c.put(B, 'big2.bin', { file: `${local}/big.bin`, start: 0, length: 100 * MiB });
    t.equal((await sh(`md5sum < ${M}/big2.bin`)).split(' ')[0], want, 'written through the client, read through the mount');
    t.equal((await shStatus(`cmp ${local}/big.bin ${M}/big.bin`)).code, 0, 'cmp');
    const part = await sh(`dd if=${M}/big2.bin bs=4096 skip=12345 count=2 status=none | md5sum`);
    t.equal(part.split(' ')[0], md5(fs.readFileSync(`${local}/big.bin`).subarray(12345 * 4096, 12347 * 4096)), 'a random read in the middle');
  });

  t.test('a big new file goes up while it is written; edits, times and mode set before close still count', async (t) => {
    const data = randomBytes(64 * MiB);
    fs.writeFileSync(`${local}/stream.bin`, data);
    const before = (await m.status()).streamedParts;
    const recycledBefore = (await m.status()).recycledMiB;
    const w = stepper(`
f = open('${M}/stream.bin', 'wb')
f.write(open('${local}/stream.bin', 'rb').read())
said('written')
wait('finish')
f.seek(${MiB + 5}); f.write(b'X' * 1000); f.flush()
os.utime(f.fileno(), (1000000000, 1000000000))
os.fchmod(f.fileno(), 0o640)
f.close()
`);
    await w.reached('written');
    let sent = 0;
    for (let i = 0; i < 150 && sent < 8; i++, await sleep(100)) sent = (await m.status()).streamedParts - before;
    t.ok(sent >= 8, `parts sent while the file is still open (${sent} of 8)`);
    // the front sent as parts left the page cache (patched fuse-native 18: 16 MiB steps, one step behind;
    // parts end out of order, so the front may jump by up to 4 parts: with 8 sent, at least 16 MiB went)
    const recycled = (await m.status()).recycledMiB - recycledBefore;
    t.ok(recycled >= 16, `the first 16 MiB left the page cache (${recycled} MiB)`);
    t.ok((await sh(`head -c ${2 * MiB} ${M}/stream.bin | md5sum`)).startsWith(md5(data.subarray(0, 2 * MiB))), 'and read back whole while the file is still open');
    w.go('finish');
    const r = await w.done;
    t.equal(r.code, 0, `the writer closed without error ${r.stderr}`);
    const want = Buffer.from(data);
    want.fill('X', MiB + 5, MiB + 1005);
    t.ok((await c.getBuffer(B, 'stream.bin')).equals(want), 'the bucket holds every byte, the edit of a part already sent included');
    const info = await c.head(B, 'stream.bin');
    const meta = typeof info === 'object' ? info.meta : {};
    t.equal(Number(meta.mtime), 1000000000, 'the mtime set through the open file is recorded');
    t.equal(Number(meta.mode) & 0o7777, 0o640, 'so is the mode');
    await sleep(2100);
    t.equal((await sh(`stat -c '%a %Y %s' ${M}/stream.bin`)).trim(), `640 1000000000 ${64 * MiB}`);
  });

  t.test('a streamed file that is only written keeps its write time', async (t) => {
    await sh(`head -c ${20 * MiB} /dev/urandom > ${local}/plain.bin && cp ${local}/plain.bin ${M}/plain.bin`);
    const info = await c.head(B, 'plain.bin');
    t.ok(typeof info === 'object' && Math.abs(info.lastModified.getTime() - Date.now()) < 60_000);
    await sleep(2100);
    const mtime = Number((await sh(`stat -c %Y ${M}/plain.bin`)).trim());
    t.ok(Math.abs(mtime - Date.now() / 1000) < 60, `mtime is the time of writing (${mtime})`);
    t.equal((await shStatus(`cmp ${local}/plain.bin ${M}/plain.bin`)).code, 0, 'cmp');
  });

  t.test('writes of a new file are made in the FUSE thread: sizes seen meanwhile, a truncation, an appending handle, byte-exact', async (t) => {
    const before = (await m.status()).writesInFuseThread as number;
    const out = await sh(`python3 -c "
import os
p = '${M}/offload.bin'
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
chunk = bytes(range(256)) * 512
sizes = []
for i in range(40):
    os.write(fd, chunk)
    if i % 10 == 9:
        sizes += [os.fstat(fd).st_size, os.stat(p).st_size]
os.ftruncate(fd, 3 * len(chunk) + 100)
sizes.append(os.fstat(fd).st_size)
os.lseek(fd, 0, 2)
os.write(fd, b'tail')
a = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(a, b'+appended')
os.close(a)
os.lseek(fd, 0, 0)
sizes.append(len(os.read(fd, 1 << 20)))
os.close(fd)
print(' '.join(map(str, sizes)))
"`);
    const K128 = 128 * 1024;
    const sizes = [10, 20, 30, 40].flatMap((n) => [n * K128, n * K128]);
    t.equal(out.trim(), [...sizes, 3 * K128 + 100, 3 * K128 + 113].join(' '), 'fstat and stat while writing, after ftruncate; read back through the open handle');
    const chunk = Buffer.alloc(K128);
    for (let i = 0; i < K128; i++) chunk[i] = i & 255;
    const want = Buffer.concat([chunk, chunk, chunk, chunk.subarray(0, 100), Buffer.from('tail+appended')]);
    t.ok((await c.getBuffer(B, 'offload.bin')).equals(want), 'in the bucket, byte-exact');
    t.ok((await sh(`cat ${M}/offload.bin | md5sum`)).startsWith(md5(want)), 'read back through the mount');
    const made = ((await m.status()).writesInFuseThread as number) - before;
    t.ok(made >= 40, `${made} of the writes were made in the FUSE thread (the appending handle's went through JavaScript)`);
  });

  t.test('overwrite in the middle, append, truncate up and down', async (t) => {
    const orig = randomBytes(3 * MiB + 123);
    await c.put(B, 'edit.bin', orig);
    await sleep(2100); // let the mount's cache expire: it never saw this object change
    await sh(`printf 'PATCHED' | dd of=${M}/edit.bin bs=1 seek=1500000 conv=notrunc status=none`);
    const want = Buffer.from(orig);
    want.write('PATCHED', 1500000);
    t.ok((await c.getBuffer(B, 'edit.bin')).equals(want), 'random write in the middle of an existing object');
    await sh(`echo appended >> ${M}/edit.bin`);
    const appended = Buffer.concat([want, Buffer.from('appended\n')]);
    t.ok((await c.getBuffer(B, 'edit.bin')).equals(appended), 'append');
    await sh(`truncate -s 1000 ${M}/edit.bin`);
    t.ok((await c.getBuffer(B, 'edit.bin')).equals(appended.subarray(0, 1000)), 'truncate down');
    await sh(`truncate -s 5000 ${M}/edit.bin`);
    const up = await c.getBuffer(B, 'edit.bin');
    t.equal(up.length, 5000);
    t.ok(up.subarray(0, 1000).equals(appended.subarray(0, 1000)) && up.subarray(1000).equals(Buffer.alloc(4000)), 'truncate up fills with zeros');
    t.equal((await sh(`stat -c %s ${M}/edit.bin`)).trim(), '5000');
    await sh(`: > ${M}/edit.bin`);
    t.equal((await c.getBuffer(B, 'edit.bin')).length, 0, 'O_TRUNC empties the object');
  });

  t.test('names with spaces and unicode; mv; rm', async (t) => {
    await sh(`mkdir -p "${M}/with space/ünï 漢字" && echo hi > "${M}/with space/ünï 漢字/fïle 😀.txt"`);
    t.equal((await c.getBuffer(B, 'with space/ünï 漢字/fïle 😀.txt')).toString(), 'hi\n');
    await sh(`mv "${M}/with space/ünï 漢字/fïle 😀.txt" "${M}/with space/rénamed.txt"`);
    t.equal(await c.head(B, 'with space/ünï 漢字/fïle 😀.txt'), undefined);
    t.equal((await c.getBuffer(B, 'with space/rénamed.txt')).toString(), 'hi\n');
    t.match(await sh(`ls "${M}/with space"`), /rénamed.txt/);
    await sh(`echo one > ${M}/a.txt && echo two > ${M}/b.txt && mv -f ${M}/a.txt ${M}/b.txt`);
    t.equal((await c.getBuffer(B, 'b.txt')).toString(), 'one\n', 'rename over an existing file');
    t.equal(await c.head(B, 'a.txt'), undefined);
    await sh(`rm ${M}/b.txt`);
    t.equal(await c.head(B, 'b.txt'), undefined, 'rm deletes the object');
    t.not((await shStatus(`cat ${M}/b.txt`)).code, 0);
  });

  t.test('metadata: mode, owner, times; objects without metadata look sane', async (t) => {
    await sh(`echo x > ${M}/meta.txt && chmod 640 ${M}/meta.txt && chown 1234:2345 ${M}/meta.txt && touch -d '2020-01-02 03:04:05 UTC' ${M}/meta.txt`);
    const info = await c.head(B, 'meta.txt');
    const meta = typeof info === 'object' ? info.meta : {};
    t.equal(Number(meta.mode) & 0o7777, 0o640);
    t.equal(meta.uid, '1234');
    t.equal(meta.gid, '2345');
    t.equal(Number(meta.mtime), Date.UTC(2020, 0, 2, 3, 4, 5) / 1000);
    await sleep(2100);
    t.equal((await sh(`stat -c '%a %u %g %Y' ${M}/meta.txt`)).trim(), `640 1234 2345 ${Date.UTC(2020, 0, 2, 3, 4, 5) / 1000}`);
    await c.put(B, 'plain/raw.txt', 'from elsewhere');
    await sleep(2100);
    const [mode, uid, mtime, size] = (await sh(`stat -c '%a %u %Y %s' ${M}/plain/raw.txt`)).trim().split(' ');
    t.equal(mode, '644', 'default mode');
    t.equal(uid, String(process.getuid!()), 'default owner: the mounting user');
    t.ok(Math.abs(Number(mtime) - Date.now() / 1000) < 30, 'mtime from Last-Modified');
    t.equal(size, '14');
    t.equal((await sh(`stat -c '%a %F' ${M}/plain`)).trim(), '755 directory', 'an implicit directory');
  });

  t.test('the kernel reads ahead 1 MiB, not 128 KiB (a reader that computes between reads overlaps the next round trip)', async (t) => {
    const dev = (await sh(`mountpoint -d ${M}`)).trim();
    let kb = '';
    for (let i = 0; i < 30 && kb !== '1024'; i++, await sleep(100)) kb = fs.readFileSync(`/sys/class/bdi/${dev}/read_ahead_kb`, 'utf8').trim();
    t.equal(kb, '1024', `read_ahead_kb of ${dev}`);
  });

  t.test('reads inside a chunk already fetched are answered in the FUSE thread, with the right bytes', async (t) => {
    const reads = async () => ((await m.status()).operations.read?.count ?? 0) as number;
    const data = randomBytes(24 * MiB + 12345);
    await c.put(B, 'windowed.bin', data); // not written through the mount: no pages cached yet
    await sleep(2100);
    const r0 = await reads();
    t.equal((await sh(`dd if=${M}/windowed.bin bs=128k status=none | md5sum`)).split(' ')[0], md5(data), 'sequential read');
    const hops = (await reads()) - r0;
    // (~6 per 8 MiB chunk: the first reads of each, which arrive before it is fetched; all 193 without the window)
    t.ok(hops > 0 && hops < data.length / 131072 / 2, `${hops} of ~${Math.ceil(data.length / 131072)} reads of 128 KiB reached JavaScript`);
    const direct = (await m.status()).directGets as { sent: number; opened: number } | null;
    t.ok(direct && direct.sent >= 3 && direct.opened <= direct.sent, `the chunks' GETs were read in place (${JSON.stringify(direct)})`);
    // another object (the first one's pages are cached now): jumps back and forth, across chunk
    // boundaries and to the end; every range has the object's bytes
    await c.put(B, 'windowed2.bin', data);
    await sleep(2100);
    fs.writeFileSync(`${local}/windowed.bin`, data);
    const out = await sh(`python3 -c "
import os
a = open('${local}/windowed.bin', 'rb').read()
fd = os.open('${M}/windowed2.bin', os.O_RDONLY)
bad = 0
for off, n in [(0, 131072), (8388608 - 4096, 8192), (5 << 20, 1 << 20), (100, 7000), (16 << 20, 300000), (len(a) - 5000, 10000), (8 << 20, 131072), (3 << 20, 131072)]:
    b = os.pread(fd, n, off)
    bad += b != a[off:off + n]
os.close(fd)
print(bad)
"`);
    t.equal(out.trim(), '0', 'every range read back as written');
  });

  t.test('reads of one stream that arrive out of order are still read ahead in chunks, not fetched one by one', async (t) => {
    // The kernel sends a stream's read-ahead as several reads at once and the FUSE threads hand
    // them over in any order. Here the order is forced: 128 KiB preads, each pair swapped, with
    // read-ahead off (POSIX_FADV_RANDOM) so that each pread is one FUSE read.
    const gets = async () => ((await m.status()).requests.get ?? 0) as number;
    const data = randomBytes(16 * MiB);
    await c.put(B, 'shuffled.bin', data);
    fs.writeFileSync(`${local}/shuffled.bin`, data);
    await sleep(2100);
    const g0 = await gets();
    const out = await sh(`python3 -c "
import os
a = open('${local}/shuffled.bin', 'rb').read()
fd = os.open('${M}/shuffled.bin', os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
n = 131072
offs = []
for i in range(0, len(a) // n, 2):
    offs += [(i + 1) * n, i * n]
print(sum(os.pread(fd, n, o) != a[o:o + n] for o in offs))
os.close(fd)
"`);
    t.equal(out.trim(), '0', 'every read has the right bytes');
    const sent = (await gets()) - g0;
    // two 8 MiB chunks and the first reads' small ranges (~64 GETs when each read is taken as random)
    t.ok(sent <= 6, `${sent} GETs for 16 MiB`);
  });

  t.test('a file read again is served from the page cache while unchanged, and read anew once changed', async (t) => {
    const gets = async () => ((await m.status()).requests.get ?? 0) as number;
    const data = randomBytes(6 * MiB);
    fs.writeFileSync(`${local}/cached.bin`, data);
    await sh(`cp ${local}/cached.bin ${M}/cached.bin`);
    // FUSE writes go through the pages and the upload records the new object's ETag for them; the
    // kernel can still lack a few pages (seen: 1 in 10 files), which this first read fills
    t.equal((await sh(`md5sum < ${M}/cached.bin`)).split(' ')[0], md5(data), 'first read');
    t.equal((await sh(`md5sum < ${M}/cached.bin`)).split(' ')[0], md5(data), 'read again');
    t.ok((await resident(`${M}/cached.bin`)) > 0.9, 'opened again: its pages are still cached (keep_cache)');
    await sleep(2500); // past the mount's cache_ttl (2 s): the attributes are fetched anew, the pages stay
    const kept = await resident(`${M}/cached.bin`);
    t.ok(kept > 0.9, `opened again after the TTL: ${(kept * 100).toFixed(1)}% of its pages still cached (an open without keep_cache leaves none)`);
    t.equal((await sh(`md5sum < ${M}/cached.bin`)).split(' ')[0], md5(data), 'read again after the TTL');
    const g2 = await gets();
    const other = randomBytes(6 * MiB);
    await c.put(B, 'cached.bin', other);
    await sleep(2500); // the mount's cache_ttl (2 s) passes
    t.equal((await sh(`md5sum < ${M}/cached.bin`)).split(' ')[0], md5(other), 'changed by another client: the new bytes, not the cached pages');
    t.ok((await gets()) > g2, 'read anew from the store');
  });

  // Another client's change within the TTL: the mount may still show the old attributes, but
  // an open confirms what it knows when that is older than a second, and the reads give the new
  // object whole (the kernel's cached size is the old one: the handle reads past it, direct).
  t.test('a file another client replaced is read whole before the TTL ends, grown or shrunk', async (t) => {
    await c.put(B, 'replaced.txt', Buffer.from('version one\n'));
    t.equal(await sh(`cat ${M}/replaced.txt`), 'version one\n', 'first read');
    const grown = randomBytes(300 * 1024);
    await c.put(B, 'replaced.txt', grown);
    await sleep(1200); // older than a second, younger than the mount's cache_ttl (2 s)
    t.equal(md5(fs.readFileSync(`${M}/replaced.txt`)), md5(grown), 'grown: the new object whole, not EIO and not cut at the old size');
    t.equal(md5(fs.readFileSync(`${M}/replaced.txt`)), md5(grown), 'and again at the next open');
    await sleep(2500);
    t.equal(fs.statSync(`${M}/replaced.txt`).size, grown.length, 'the new size once the TTL has passed');
    await c.put(B, 'replaced.txt', Buffer.from('v3\n'));
    await sleep(1200);
    t.equal(await sh(`cat ${M}/replaced.txt`), 'v3\n', 'shrunk: the new object, ending where it ends (no zeros up to the old size)');
  });

  t.test('a file read while its writer still has it open is kept in the page cache once that writer is gone', async (t) => {
    // close(2) returns before the kernel's RELEASE reaches the mount: the next open may still find
    // the staged file. Here the writer keeps its descriptor on purpose, so that case always happens.
    const data = randomBytes(3 * MiB);
    fs.writeFileSync(`${local}/held.bin`, data);
    const out = await sh(`python3 -c "
import os, subprocess
fd = os.open('${M}/held.bin', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, open('${local}/held.bin', 'rb').read())
os.fsync(fd)
print(subprocess.check_output('md5sum < ${M}/held.bin', shell=True).decode().split()[0])
os.close(fd)
"`);
    t.equal(out.trim(), md5(data), 'read while the writer has it open');
    const kept = await resident(`${M}/held.bin`);
    t.ok(kept > 0.9, `opened after the writer closed it: ${(kept * 100).toFixed(1)}% of the pages read through the staged file still cached`);
    t.equal((await sh(`md5sum < ${M}/held.bin`)).split(' ')[0], md5(data), 'read after the writer closed it');
  });

  t.test('symlinks, tar, rsync', async (t) => {
    await sh(`ln -s target/file.txt ${M}/link && test "$(readlink ${M}/link)" = target/file.txt`);
    const info = await c.head(B, 'link');
    t.equal((await c.getBuffer(B, 'link')).toString(), 'target/file.txt', 'symlink stored as its target');
    t.equal(Number(typeof info === 'object' && info.meta.mode) & 0o170000, 0o120000, 'with S_IFLNK in mode');
    await sh(`mkdir -p ${local}/src/d1/d2 && for i in $(seq 1 20); do head -c $((i * 1000)) /dev/urandom > ${local}/src/d1/f$i; done && cp ${local}/src/d1/f3 ${local}/src/d1/d2/g`);
    await sh(`tar -C ${local} -cf ${M}/archive.tar src`);
    await sh(`mkdir ${local}/x && tar -C ${local}/x -xf ${M}/archive.tar && diff -r ${local}/src ${local}/x/src`);
    await sh(`tar -C ${M} -xf ${M}/archive.tar && diff -r ${local}/src ${M}/src`);
    t.pass('tar into and out of the mount');
    await sh(`rsync -a ${local}/src/ ${M}/synced/ && diff -r ${local}/src ${M}/synced`);
    const again = await sh(`rsync -ai ${local}/src/ ${M}/synced/`);
    t.equal(again.trim(), '', 'a second rsync finds nothing to do (sizes and times kept)');
    t.equal((await sh(`find ${M}/synced -type f | wc -l`)).trim(), '21');
  });

  t.test('extended attributes: tags, metadata, other user xattrs', async (t) => {
    await sh(`echo tagged > ${M}/tagged.txt`);
    await sh(`setfattr -n user.svc.tag.project -v svcfs ${M}/tagged.txt && setfattr -n user.svc.tag.stage -v test ${M}/tagged.txt`);
    t.same(await c.getTags(B, 'tagged.txt'), { project: 'svcfs', stage: 'test' }, 'tags set by setfattr, seen by GET ?tagging');
    await c.putTags(B, 'tagged.txt', { project: 'svcfs', stage: 'test', from: 'client' });
    t.equal((await sh(`getfattr --only-values -n user.svc.tag.from ${M}/tagged.txt`)).trim(), 'client');
    await sh(`setfattr -n user.svc.meta.color -v blue ${M}/tagged.txt && setfattr -n user.xdg.origin.url -v https://example.org/x ${M}/tagged.txt`);
    const info = await c.head(B, 'tagged.txt');
    t.equal(typeof info === 'object' && info.meta.color, 'blue', 'user.svc.meta.* is user metadata');
    const bag = JSON.parse(decodeURIComponent((typeof info === 'object' && info.meta.xattr) || '{}'));
    t.equal(Buffer.from(bag['user.xdg.origin.url'], 'base64').toString(), 'https://example.org/x', 'other xattrs kept as s3fs keeps them');
    const dump = await sh(`getfattr -d ${M}/tagged.txt`);
    for (const n of ['user.svc.tag.project="svcfs"', 'user.svc.meta.color="blue"', 'user.xdg.origin.url="https://example.org/x"']) t.match(dump, n);
    await sh(`setfattr -x user.svc.tag.stage ${M}/tagged.txt && setfattr -x user.xdg.origin.url ${M}/tagged.txt`);
    t.same(await c.getTags(B, 'tagged.txt'), { project: 'svcfs', from: 'client' });
    t.notMatch(await sh(`getfattr -d ${M}/tagged.txt`), /xdg/);
    t.equal((await c.getBuffer(B, 'tagged.txt')).toString(), 'tagged\n', 'content untouched by metadata changes');
    t.not((await shStatus(`getfattr -n user.nothing ${M}/tagged.txt`)).code, 0);
  });

  t.test('read-only handles, statfs, errors', async (t) => {
    const df = await sh(`df -P ${M} | tail -1`);
    t.match(df, `svcfs:${B}`);
    t.ok(Number(df.trim().split(/\s+/)[3]) > 1e9, 'large free figure');
    t.not((await shStatus(`cat ${M}/does/not/exist`)).code, 0);
    t.match((await shStatus(`rmdir ${M}/src`)).stderr, /not empty/i);
    t.match((await shStatus(`mkdir ${M}/src`)).stderr, /exists/i);
  });

  t.test('changes made through the client show after the TTL', async (t) => {
    await c.put(B, 'ext.txt', 'version 1');
    await sleep(2100);
    t.equal(await sh(`cat ${M}/ext.txt`), 'version 1');
    await c.put(B, 'ext.txt', 'version 2, longer');
    await sleep(2500);
    t.equal(await sh(`cat ${M}/ext.txt`), 'version 2, longer', 'new content after the TTL');
    await c.delete(B, 'ext.txt');
    await sleep(2500);
    t.not((await shStatus(`cat ${M}/ext.txt`)).code, 0, 'deleted elsewhere: gone after the TTL');
  });
});
