// When the server cannot take an upload, close (and fsync) report it to the
// application, and the data stays staged instead of being lost.
import t from 'tap';
import * as fs from 'node:fs';
import { sh, shStatus, sleep, startMount, stepper } from './helpers/mount';
import { startServer, tmpDir } from './helpers/server';
import { startFaultProxy } from './helpers/faultproxy';

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

t.test('an unlink answered before its DELETE: a delete the store refuses brings the file back, and fsync and rmdir of the directory say why', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const proxy = await startFaultProxy(t, s.url, 0);
  const m = await startMount(t, s, { endpoint: proxy.url });
  const M = m.mnt;
  const deletes = (req: { method?: string; url?: string }) => req.method === 'DELETE' || (req.method === 'POST' && /[?&]delete(=|&|$)/.test(req.url ?? ''));
  const refuse = () => { proxy.refuse = (req) => (deletes(req) ? { status: 403, code: 'AccessDenied' } : undefined); };
  await sh(`mkdir ${M}/d && cd ${M}/d && for i in $(seq 10 40); do echo "file $i" > f$i; done`);

  // the first unlink in a directory waits for its DELETE: a refusal is rm's own error
  refuse();
  const first = await shStatus(`rm ${M}/d/f10`);
  t.not(first.code, 0, 'rm fails');
  t.match(first.stderr, /Permission denied/);
  t.ok(await c.head('test', 'd/f10'), 'the object stays');
  proxy.refuse = undefined;
  await sh(`rm ${M}/d/f10`);

  // once one went through, the next are answered first: their refusal comes later
  refuse();
  const before = proxy.refused;
  await shStatus(`rm ${M}/d/f*`);
  const fsync = await shStatus(`python3 -c "import os; os.fsync(os.open('${M}/d', os.O_RDONLY))"`);
  t.not(fsync.code, 0, 'fsync of the directory fails once the deletes were refused');
  t.match(fsync.stderr, /Permission denied/);
  t.ok(proxy.refused > before, `deletes refused (${proxy.refused - before})`);
  const st = await m.status();
  t.ok(st.deletesBehind >= 1, `unlinks answered before their DELETE (${st.deletesBehind})`);
  t.ok(st.deleteErrors >= 1, `failures counted (${st.deleteErrors})`);
  t.equal(st.deletesPending, 0);
  // nothing lost: every file is in the bucket with its bytes, and listed again
  for (let i = 11; i <= 40; i++) t.equal((await c.getBuffer('test', `d/f${i}`)).toString(), `file ${i}\n`);
  t.equal((await sh(`ls ${M}/d | wc -l`)).trim(), '30', 'listed again');
  t.equal((await sh(`cat ${M}/d/f40`)), 'file 40\n', 'and readable');

  // rmdir waits for the deletes below and says why the directory is not empty (once; then ENOTEMPTY)
  proxy.refuse = undefined;
  await sh(`mkdir ${M}/e && cd ${M}/e && for i in $(seq 10 40); do echo "file $i" > f$i; done && rm f10`);
  refuse();
  const rmdir = await shStatus(`python3 -c "
import os
for n in sorted(os.listdir('${M}/e')):
    try: os.unlink('${M}/e/' + n)
    except OSError: pass
for i in range(2):
    try: os.rmdir('${M}/e')
    except OSError as e: print(e.strerror)
"`);
  t.same(rmdir.stdout.trim().split('\n'), ['Permission denied', 'Directory not empty'], 'rmdir: why, then not empty');
  t.equal((await c.listPage('test', { prefix: 'e/f' })).contents.length, 30, 'every object still there');
  t.equal((await sh(`ls ${M}/e | wc -l`)).trim(), '30');

  proxy.refuse = undefined;
  await sh(`rm -r ${M}/d ${M}/e`);
  t.same((await c.listPage('test', {})).contents, [], 'removed once the store allows it');
  t.equal((await m.status()).deletesPending, 0);
});
