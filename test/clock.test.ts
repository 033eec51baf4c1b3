// A machine whose clock is off from the store's by more than the 15 minutes
// stores allow (a laptop after a trip, a VM resumed, a board with no RTC): the
// client signs with the store's time once a refusal tells it (the store's Date
// header), as the AWS SDKs do. The clock is set off with libfaketime
// (scripts/test.sh installs it): in the store's process, or in the mount's.
import t from 'tap';
import * as fs from 'node:fs';
import { SvcClient } from '../src/wire/client';
import { SvcError } from '../src/wire/errors';
import { ADMIN, READER, clockOffEnv, startServer, tmpDir } from './helpers/server';
import { sh, startMount } from './helpers/mount';
import { backendNames, startBackend } from './helpers/backend';

const ahead = clockOffEnv('+40m');
const behind = clockOffEnv('-40m');
const missing = ahead && behind ? false : 'libfaketime is not installed (apt-get install faketime; scripts/test.sh does)';
const FORTY_MIN = 40 * 60_000;

t.test("a client whose clock is 40 minutes behind the store's", { skip: missing }, async (t) => {
  const s = await startServer(t, { env: ahead });
  const client = (creds = ADMIN) => {
    const offsets: number[] = [];
    const c = new SvcClient({ endpoint: s.url, credentials: creds, maxAttempts: 1, onClockOffset: (ms) => offsets.push(ms) });
    t.teardown(() => c.close());
    return { c, offsets };
  };
  const near = (ms: number) => Math.abs(ms - FORTY_MIN) <= 5_000;

  t.test("the first request is refused for the time, then sent again with the store's", async (t) => {
    const { c, offsets } = client();
    await c.listPage('test', { maxKeys: 1 });
    t.ok(near(c.clockOffsetMs), `signing 40 minutes ahead of this clock (${c.clockOffsetMs} ms)`);
    t.equal(offsets.length, 1, 'the change is told once');
    t.equal(c.counts.get('list'), 2, 'the refused LIST and the one sent again');
    await c.put('test', 'a.txt', 'after the correction');
    t.equal((await c.getBuffer('test', 'a.txt')).toString(), 'after the correction');
    t.equal(c.counts.get('put'), 1, 'later requests go once');
  });

  t.test('a HEAD first: its refusal has no body and no code, the Date header tells', async (t) => {
    const { c } = client();
    const info = await c.head('test', 'a.txt');
    t.equal(typeof info === 'object' && info.size, 'after the correction'.length);
    t.ok(near(c.clockOffsetMs));
  });

  t.test('first requests at once, uploads that are not idempotent among them: all go through', async (t) => {
    const { c, offsets } = client();
    const keys = Array.from({ length: 8 }, (_, i) => `many/${i}`);
    const [mp] = await Promise.all([c.createMultipart('test', 'mp.bin'), ...keys.map((k) => c.put('test', k, k))]);
    t.ok(mp, 'a multipart upload begun (POST: sent again, as it never ran)');
    for (const k of keys) t.equal((await c.getBuffer('test', k)).toString(), k);
    t.equal(offsets.length, 1, 'one correction for all of them');
  });

  t.test('a refusal that is not about the time still fails, after one correction', async (t) => {
    const { c } = client({ accessKeyId: ADMIN.accessKeyId, secretAccessKey: 'f'.repeat(64) });
    const e = await c.listPage('test', { maxKeys: 1 }).catch((x) => x);
    t.ok(e instanceof SvcError && e.code === 'SignatureDoesNotMatch', `the wrong secret is named: ${(e as Error).message}`);
    t.equal(c.counts.get('list'), 2, 'refused for the time, then for the signature: no loop');
  });
});

t.test('clocks that agree: a 403 is only what it says', async (t) => {
  const s = await startServer(t);
  const c = new SvcClient({ endpoint: s.url, credentials: READER, maxAttempts: 1 });
  t.teardown(() => c.close());
  const put = await c.put('test', 'nope', 'x').catch((x) => x);
  t.equal((put as SvcError).code, 'AccessDenied');
  const head = await c.head('test', 'missing-but-denied').catch((x) => x);
  t.ok(head === undefined || head instanceof SvcError, 'a HEAD answered as it is');
  t.equal(c.clockOffsetMs, 0, 'the clock is left alone');
  t.equal(c.counts.get('put'), 1, 'the refused upload was not sent again');
});

for (const backend of backendNames()) {
  t.test(`a mount whose clock is 40 minutes behind the store's (${backend})`, { skip: missing }, async (t) => {
    const b = await startBackend(t, backend);
    const c = b.client();
    const local = tmpDir('clock');
    t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
    const m = await startMount(t, b, { env: behind });
    const M = m.mnt;
    await sh(`head -c 20000000 /dev/urandom > ${local}/big.bin`);
    await sh(`mkdir ${M}/d && cp ${local}/big.bin ${M}/d/big.bin && echo small > ${M}/d/small.txt && ls ${M}/d`);
    t.equal((await c.getBuffer(b.bucket, 'd/small.txt')).toString(), 'small\n', 'a small file in the bucket');
    const big = await c.head(b.bucket, 'd/big.bin');
    t.equal(typeof big === 'object' && big.size, 20_000_000, 'a multipart upload in the bucket');
    await sh(`cmp ${local}/big.bin ${M}/d/big.bin`);
    const st = await m.status();
    t.ok(Math.abs(st.clockOffsetSec * 1000 - FORTY_MIN) <= 5_000, `svcfs status: signed ${st.clockOffsetSec} s ahead of the mount's clock`);
    t.match(m.logs.join(''), /clock is off from the store's/, 'the mount says so in its log');
  });
}
