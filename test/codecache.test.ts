// The code cache of the process that serves a mount (src/cli/codecache.ts):
// modules come from it when their source is what it was, never when it changed
// (even to the same length, which V8 alone would accept), and a damaged or
// missing cache only means compiling as usual.
import t from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { sh, startMount } from './helpers/mount';
import { ROOT, startServer, tmpDir } from './helpers/server';

const RUNNER = `
const { enableCodeCache, codeCacheStats } = require(${JSON.stringify(path.join(ROOT, 'dist', 'cli', 'codecache.js'))});
enableCodeCache(process.argv[2], 'test', __dirname);
const lib = require('./lib');
console.log(JSON.stringify({ word: lib.word(), resolved: lib.self(), ...codeCacheStats() }));
`;

t.test('modules come from the cache only while their source is unchanged', async (t) => {
  const root = tmpDir('cc-root');
  const dir = path.join(tmpDir('cc'), 'code');
  fs.writeFileSync(path.join(root, 'run.js'), RUNNER);
  const lib = path.join(root, 'lib.js');
  fs.writeFileSync(lib, "exports.word = () => 'one';\nexports.self = () => require.resolve('./lib');\n");
  const run = (env: Record<string, string> = {}) =>
    JSON.parse(execFileSync(process.execPath, [path.join(root, 'run.js'), dir], { env: { ...process.env, ...env } }).toString()) as
      { word: string; resolved: string; file: string; fromCache: number; compiled: number };

  const first = run();
  t.match(first, { word: 'one', resolved: lib, fromCache: 0, compiled: 1 }, 'no cache yet: compiled');
  t.ok(fs.existsSync(first.file), `the cache is written at exit (${first.file})`);
  t.match(run(), { word: 'one', resolved: lib, fromCache: 1, compiled: 0 }, 'then the module comes from it');

  // the same length: V8 checks only that, and would run the old code
  fs.writeFileSync(lib, fs.readFileSync(lib, 'utf8').replace("'one'", "'two'"));
  t.match(run(), { word: 'two', fromCache: 0, compiled: 1 }, 'a changed source is compiled, not taken from the cache');
  t.match(run(), { word: 'two', fromCache: 1, compiled: 0 }, 'and cached again');

  fs.writeFileSync(first.file, Buffer.from('not a cache at all'));
  t.match(run(), { word: 'two', fromCache: 0, compiled: 1 }, 'a damaged cache file: compiled as usual');
  fs.writeFileSync(first.file, fs.readFileSync(first.file).subarray(0, 0));
  t.match(run(), { word: 'two', compiled: 1 }, 'an empty one too');

  t.match(run({ SVCFS_CODE_CACHE: '0' }), { word: 'two', file: '', fromCache: 0, compiled: 0 }, 'SVCFS_CODE_CACHE=0 turns it off');
});

t.test('a mount starts from the code the previous one left', async (t) => {
  const s = await startServer(t);
  const env = { XDG_CACHE_HOME: tmpDir('xdg') };
  const m1 = await startMount(t, s, { env });
  await sh(`mkdir ${m1.mnt}/d && echo hi > ${m1.mnt}/d/f && ls -l ${m1.mnt}/d`);
  const c1 = (await m1.status()).codeCache as { file: string; fromCache: number; compiled: number };
  t.equal(c1.fromCache, 0, 'the first mount compiles');
  t.ok(c1.compiled > 30, `its modules: ${c1.compiled}`);
  t.ok(c1.file.startsWith(path.join(env.XDG_CACHE_HOME, 'svcfs', 'code')), `in the user's cache directory (${c1.file})`);
  await m1.stop();
  t.ok(fs.existsSync(c1.file), 'written when it ended');

  const m2 = await startMount(t, s, { env });
  t.equal(await sh(`cat ${m2.mnt}/d/f`), 'hi\n', 'the second mount works');
  const c2 = (await m2.status()).codeCache as { fromCache: number; compiled: number };
  t.ok(c2.fromCache >= c1.compiled - 2, `and its modules came from the cache (${c2.fromCache} of ${c1.compiled} compiled before, ${c2.compiled} compiled now)`);
});
