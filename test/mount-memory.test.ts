// The memory bound (-o memory_limit): however many files are read and written
// at once, the buffers of read-ahead and uploads stay within the budget, and
// the mount process stays near its baseline plus that budget.
import t from 'tap';
import * as fs from 'node:fs';
import { sh, startMount } from './helpers/mount';
import { startServer, tmpDir } from './helpers/server';

const MiB = 1024 * 1024;
const kib = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

t.test('four readers and two writers at once stay within memory_limit', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const local = tmpDir('mem');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  const size = 48 * MiB;
  const names = ['r0', 'r1', 'r2', 'r3', 'w0', 'w1'];
  await Promise.all(names.map((n) => sh(`head -c ${size} /dev/urandom > ${local}/${n}.bin`)));
  for (const n of names.slice(0, 4)) await c.put('test', `${n}.bin`, { file: `${local}/${n}.bin`, start: 0, length: size });
  const limit = Number(process.env.SVCFS_TEST_MEMORY_LIMIT ?? 16);
  // payload_hash=always: the uploads hash their parts too (to a loopback server they would go unsigned)
  const m = await startMount(t, s, { options: [`memory_limit=${limit}`, 'payload_hash=always'] });
  await sh(`ls -l ${m.mnt} > /dev/null`);
  const pid = m.proc.pid!;
  const base = kib(pid, 'VmRSS');
  const sums = await Promise.all([
    ...names.slice(0, 4).map((n) => sh(`md5sum < ${m.mnt}/${n}.bin`)),
    ...names.slice(4).map((n) => sh(`cp ${local}/${n}.bin ${m.mnt}/${n}.bin && md5sum < ${m.mnt}/${n}.bin`)),
  ]);
  const want = await Promise.all(names.map((n) => sh(`md5sum < ${local}/${n}.bin`)));
  t.same(sums, want, 'every file read and written byte-exact');
  const peak = kib(pid, 'VmHWM');
  const st = await m.status();
  t.ok(st.buffers.peak <= limit * MiB, `buffers in use at most the limit (peak ${st.buffers.peak / MiB} MiB of ${limit})`);
  t.ok(st.streamedParts > 0, 'the writers streamed parts within the budget');
  // Without the bound it grows by 147 MiB or more here (read-ahead alone would hold 4 x 40 MiB). On top of
  // the budget, V8 lets up to 64 MiB of dead Buffers (socket reads) pile up before it collects them.
  const grew = (peak - base) / 1024;
  t.ok(grew < limit + 96, `resident size grew by ${grew.toFixed(0)} MiB over a ${(base / 1024).toFixed(0)} MiB baseline (bound: ${limit} MiB + 96 MiB)`);
});
