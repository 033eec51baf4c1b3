// A server for a team: users and buckets managed with `svcfs serve user|bucket`
// on the data directory, picked up by the running server; per-user read and
// write permission per bucket. Driven through the installed `svcfs` command.
import t from 'tap';
import * as fs from 'node:fs';
import { SvcClient } from '../src/wire/client';
import { SvcError } from '../src/wire/errors';
import { sh, shStatus, sleep } from './helpers/mount';
import { CLI, startServer, tmpDir } from './helpers/server';

const keysOf = (out: string) => ({
  accessKeyId: /SVC_ACCESS_KEY_ID=(\S+)/.exec(out)![1],
  secretAccessKey: /SVC_SECRET_ACCESS_KEY=(\S+)/.exec(out)![1],
});

/** Retry until `f` stops throwing (the server reloads changed files within a second or so). */
async function eventually<T>(f: () => Promise<T>, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await f();
    } catch (e) {
      if (Date.now() > end) throw e;
      await sleep(200);
    }
  }
}

const code = (p: Promise<unknown>) => p.then(() => 'ok', (e) => (e instanceof SvcError ? e.code : String(e)));

t.test('users and buckets from the command line, live on a running server', async (t) => {
  const bin = tmpDir('bin');
  await sh(`${process.execPath} ${CLI} install-helper --dir ${bin} --bin ${bin}`);
  const svcfs = (args: string) => shStatus(`PATH=${bin}:$PATH svcfs ${args}`);
  const data = tmpDir('team');
  t.teardown(() => fs.rmSync(bin, { recursive: true, force: true }));

  t.equal((await svcfs(`serve bucket add team --data ${data}`)).stdout, 'created bucket "team"\n');
  const alice = keysOf((await svcfs(`serve user add alice --write team --data ${data}`)).stdout);
  const bob = keysOf((await svcfs(`serve user add bob --read team --data ${data}`)).stdout);
  const list = (await svcfs(`serve user list --data ${data}`)).stdout;
  t.match(list, /^alice\tSVC\w+\treads -\twrites team$/m, 'user list: names, key IDs, permissions');
  t.notMatch(list, new RegExp(alice.secretAccessKey), 'and never a secret');
  t.equal(fs.statSync(`${data}/users.json`).mode & 0o777, 0o600, 'the users file is private');

  const s = await startServer(t, { dataDir: data, buckets: [] });
  const client = (k: typeof alice) => {
    const c = new SvcClient({ endpoint: s.url, credentials: k, maxAttempts: 1 });
    t.teardown(() => c.close());
    return c;
  };
  const a = client(alice);
  const b = client(bob);
  await a.put('team', 'plan.txt', 'from alice');
  t.equal((await b.getBuffer('team', 'plan.txt')).toString(), 'from alice', 'a reader reads');
  t.equal(await code(b.put('team', 'x.txt', 'no')), 'AccessDenied', 'but does not write');

  // changes while the server runs
  t.match((await svcfs(`serve bucket add second --data ${data}`)).stdout, /created bucket "second"/);
  const carol = keysOf((await svcfs(`serve user add carol --write '*' --data ${data}`)).stdout);
  const c = client(carol);
  await eventually(() => c.put('second', 'new.txt', 'from carol'));
  t.pass('a user and a bucket added while the server runs work without a restart');
  t.equal(await code(a.put('second', 'y.txt', 'no')), 'AccessDenied', 'alice may write team only');

  const rotated = keysOf((await svcfs(`serve user rotate alice --data ${data}`)).stdout);
  t.not(rotated.accessKeyId, alice.accessKeyId, 'rotate gives new keys');
  await eventually(async () => {
    if ((await code(a.getBuffer('team', 'plan.txt'))) !== 'InvalidAccessKeyId') throw new Error('old keys still work');
  });
  t.pass('the old keys stop working');
  t.equal((await client(rotated).getBuffer('team', 'plan.txt')).toString(), 'from alice', 'the new ones work, same permissions');

  t.equal((await svcfs(`serve user remove bob --data ${data}`)).code, 0);
  await eventually(async () => {
    if ((await code(b.getBuffer('team', 'plan.txt'))) !== 'InvalidAccessKeyId') throw new Error('bob still works');
  });
  t.pass('a removed user is refused');

  const busy = await svcfs(`serve bucket remove team --data ${data}`);
  t.equal(busy.code, 1, 'a bucket with objects is not removed');
  t.match(busy.stderr, /not empty \(1 objects/);
  await client(rotated).delete('team', 'plan.txt');
  t.equal((await svcfs(`serve bucket remove team --data ${data}`)).code, 0, 'an empty one is');
  await eventually(async () => {
    if ((await code(c.getBuffer('team', 'plan.txt'))) !== 'NoSuchBucket') throw new Error('bucket still there');
  });
  t.pass('and the running server no longer has it');
  t.equal((await svcfs(`serve bucket list --data ${data}`)).stdout, 'second\n');
  const bad = await svcfs(`serve user add 'no spaces' --data ${data}`);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /not a valid user name/);
});
