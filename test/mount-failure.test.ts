// When the server cannot take an upload, close (and fsync) report it to the
// application, and the data stays staged instead of being lost.
import t from 'tap';
import * as fs from 'node:fs';
import { sh, sleep, startMount, stepper } from './helpers/mount';
import { startServer, tmpDir } from './helpers/server';

t.test('a failed upload is an error from close, and nothing is lost', async (t) => {
  const s = await startServer(t);
  const m = await startMount(t, s);
  const M = m.mnt;
  const local = tmpDir('fail');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  await sh(`head -c 3000000 /dev/urandom > ${local}/data.bin`);
  await sh(`echo before > ${M}/before.txt`);

  // Writers that hold their files open while the server goes away, then close (or fsync).
  const writer = (file: string, how: 'close' | 'fsync') => stepper(`
f = open('${M}/' + '${file}', 'wb')
f.write(open('${local}/data.bin', 'rb').read())
f.flush()
said('written')
wait('gone')
if '${how}' == 'fsync':
    os.fsync(f.fileno())
f.close()
`);
  const closing = writer('data.bin', 'close');
  const syncing = writer('synced.bin', 'fsync');
  await closing.reached('written');
  await syncing.reached('written');
  await s.stop('SIGKILL');
  closing.go('gone');
  syncing.go('gone');
  const cp = await closing.done;
  t.not(cp.code, 0, 'close fails');
  t.match(cp.stderr, /Input\/output error/, 'with EIO');
  const fsync = await syncing.done;
  t.not(fsync.code, 0, 'fsync fails');
  t.match(fsync.stderr, /Input\/output error/);
  const st = await m.status();
  t.ok(st.uploadErrors >= 2, `upload errors counted (${st.uploadErrors})`);
  t.ok(st.pendingUploads >= 2, `pending uploads shown (${st.pendingUploads})`);
  t.ok(st.retries > 0, `retries counted (${st.retries})`);

  await s.restart();
  const c = s.client();
  t.equal(await c.head('test', 'data.bin'), undefined, 'nothing half-written in the bucket');
  t.equal((await c.getBuffer('test', 'before.txt')).toString(), 'before\n', 'earlier files intact');
  // the staged copy is still there: writing the same file again through the mount now succeeds and is byte-exact
  await sh(`cp ${local}/data.bin ${M}/data.bin`);
  t.ok((await c.getBuffer('test', 'data.bin')).equals(fs.readFileSync(`${local}/data.bin`)), 'uploaded once the server is back');
  await sh(`sync ${M}/dd.bin`).catch(() => undefined);
  const st2 = await m.status();
  t.ok(st2.uploads >= 1);
});

t.test('a file sent while it is written loses nothing when the server fails half-way', async (t) => {
  const s = await startServer(t);
  const m = await startMount(t, s);
  const M = m.mnt;
  const local = tmpDir('stream');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  await sh(`head -c ${56 * 1024 * 1024} /dev/urandom > ${local}/data.bin`);
  const want = fs.readFileSync(`${local}/data.bin`);
  // the first 32 MiB while the server is up, the rest while it is down
  const w = stepper(`
src = open('${local}/data.bin', 'rb').read()
f = open('${M}/big.bin', 'wb')
f.write(src[:32 << 20])
said('half')
wait('rest')
f.write(src[32 << 20:])
try:
    f.close()
    print('closed')
except OSError as e:
    print('close failed:', e)
`);
  await w.reached('half');
  let sent = 0;
  for (let i = 0; i < 150 && sent < 2; i++, await sleep(100)) sent = (await m.status()).streamedParts;
  t.ok(sent >= 2, `parts went up before the server failed (${sent})`);
  await s.stop('SIGKILL');
  w.go('rest');
  const r = await w.done;
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /close failed: .*Input\/output error/, 'close reports the failure (EIO)');
  const st = await m.status();
  t.equal(st.pendingUploads, 1, 'the file is still pending');

  await s.restart();
  const c = s.client();
  let got: Buffer | undefined;
  for (let i = 0; i < 200 && !got; i++, await sleep(200)) {
    const info = await c.head('test', 'big.bin');
    if (typeof info === 'object') got = await c.getBuffer('test', 'big.bin');
  }
  t.ok(got && got.equals(want), 'uploaded in the background once the server is back, byte-exact');
  t.equal((await m.status()).pendingUploads, 0, 'nothing left pending');
});
