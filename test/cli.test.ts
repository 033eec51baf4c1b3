// The command line as a user runs it: demo, mount -t svcfs, an fstab line,
// clear errors with reliable exit codes, presign, help.
import t from 'tap';
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { forceUnmount, sh, shStatus, sleep } from './helpers/mount';
import { ADMIN, CLI, ROOT, startServer, tmpDir } from './helpers/server';
import { hugePagesOn, withHugePages } from '../src/fs/hugepages';

const node = process.execPath;
const envCreds = `SVC_ACCESS_KEY_ID=${ADMIN.accessKeyId} SVC_SECRET_ACCESS_KEY=${ADMIN.secretAccessKey}`;
const mounted = (m: string) => fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === m);

function credFile(mode = 0o600): string {
  const f = path.join(tmpDir('creds'), 'credentials');
  fs.writeFileSync(f, `[default]\naccess_key_id = ${ADMIN.accessKeyId}\nsecret_access_key = ${ADMIN.secretAccessKey}\n[other]\naccess_key_id = X\n`, { mode });
  fs.chmodSync(f, mode);
  return f;
}

t.test('svcfs demo comes up, works, and Ctrl-C leaves nothing behind', async (t) => {
  const cwd = tmpDir('demo');
  const data = tmpDir('demodata');
  const mnt = path.join(cwd, 'mnt');
  const p = spawn(node, [CLI, 'demo', '--data', data, '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(async () => {
    if (p.exitCode === null) p.kill('SIGKILL');
    await forceUnmount(mnt);
  });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (out += d));
  for (let i = 0; i < 150 && !out.includes('Press Ctrl-C'); i++) await sleep(100);
  t.match(out, /server listening on http:\/\/127\.0\.0\.1:\d+/);
  t.match(out, /mounted at .*mnt/);
  t.match(await sh(`ls ${mnt}`), /README.txt/);
  await sh(`echo from-test > ${mnt}/docs/new.txt`);
  const link = /curl '([^']+)'/.exec(out)![1];
  t.match(await sh(`curl -sf '${link}'`), /svcfs demo bucket/, 'the printed pre-signed link works with curl');
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGINT');
  const code = await Promise.race([exited, sleep(20_000).then(() => 'timeout')]);
  t.equal(code, 0, 'exits 0 on Ctrl-C');
  t.notOk(mounted(mnt), 'no mount left');
  t.equal((await shStatus(`pgrep -f "${mnt}"`)).code, 1, 'no process left');
  t.notMatch(out, /\{"level"/, 'what the demo printed is sentences, no JSON log line');
  // a terminal's Ctrl-C reaches the whole process group
  const again = spawn(node, [CLI, 'demo', '--data', data, '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out2 = '';
  again.stdout!.on('data', (d) => (out2 += d));
  again.stderr!.on('data', (d) => (out2 += d));
  for (let i = 0; i < 150 && !out2.includes('Press Ctrl-C'); i++) await sleep(100);
  t.equal(await sh(`cat ${mnt}/docs/new.txt`), 'from-test\n', 'the demo bucket is kept between runs');
  const ex2 = new Promise((r) => again.once('exit', r));
  process.kill(-again.pid!, 'SIGINT');
  await ex2;
  t.notOk(mounted(mnt));
  t.notMatch(out2, /\{"level"/, 'Ctrl-C to the process group: no JSON log line');
  t.notMatch(out2, /without waiting for pending uploads/, 'and no warning about pending uploads when none are pending');
});

t.test('a dead mount (its process killed): mount refuses it and names the fix; unmount cleans it up and says so', async (t) => {
  const s = await startServer(t);
  const mnt = tmpDir('dead-mnt');
  const cache = tmpDir('dead-cache');
  t.teardown(async () => {
    await forceUnmount(mnt);
    fs.rmSync(cache, { recursive: true, force: true });
  });
  const args = `${node} ${CLI} mount test ${mnt} --endpoint ${s.url} -o cache_dir=${cache}`;
  // (a tunable of the user's own, which the mount process must keep)
  const up = await sh(`${envCreds} GLIBC_TUNABLES=glibc.malloc.perturb=0 ${args}`);
  t.match(up, /mounted test at /, 'mounted in the background');
  const [, pidText, logFile] = /pid (\d+), log ([^)]+)\)/.exec(up)!;
  const pid = Number(pidText);
  // (what the process itself was given: the loader rewrites /proc/PID/environ's copy)
  const st = JSON.parse(await sh(`${node} ${CLI} status ${mnt} --json`));
  t.equal(st.memory.hugePages, true, 'the mount process starts with malloc\'s huge pages on, and svcfs status says so');
  const thp = '/sys/kernel/mm/transparent_hugepage/enabled';
  if (fs.existsSync(thp) && !/\[never\]/.test(fs.readFileSync(thp, 'utf8'))) {
    await s.client().put('test', 'big.bin', crypto.randomBytes(24 * 1024 * 1024));
    await sh(`cat ${mnt}/big.bin > /dev/null`);
    const after = JSON.parse(await sh(`${node} ${CLI} status ${mnt} --json`));
    t.ok(after.memory.hugePagesMiB > 0, `and its read-ahead lands in huge pages (${after.memory.hugePagesMiB} MiB)`);
  } else {
    t.comment('transparent huge pages are off on this machine: where the read-ahead lands is not checked');
  }
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 50; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      break;
    }
    await sleep(100);
  }
  const ls = await shStatus(`ls ${mnt}`);
  t.match(ls.stderr, /Transport endpoint is not connected/, 'the mount point is dead');
  const again = await shStatus(`${envCreds} ${args}`);
  t.not(again.code, 0, 'svcfs mount refuses a dead mount point');
  t.match(again.stderr, new RegExp(`dead mount .*svcfs unmount ${mnt}`), `and names the fix: ${again.stderr.trim()}`);
  const un = await shStatus(`${node} ${CLI} unmount ${mnt}`);
  t.equal(un.code, 0, 'svcfs unmount of the dead mount succeeds');
  t.match(un.stdout, /was a dead mount .*unmounted it/, `and says what it did: ${un.stdout.trim()}`);
  t.notOk(mounted(mnt), 'nothing left mounted');
  const fresh = await sh(`${envCreds} ${args}`);
  t.match(fresh, /mounted test at /, 'the mount point works again');
  const fg = await shStatus(`${node} ${CLI} unmount ${mnt}`);
  t.equal(fg.code, 0);
  t.match(fs.readFileSync(logFile, 'utf8').split('\n')[0], /^\{"level":/, 'the background mount\'s log file holds JSON records');
});

t.test('the environment of a mount process: huge pages added, a user\'s own tunables kept', async (t) => {
  t.same(withHugePages({ A: '1' }), { A: '1', GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' });
  t.equal(withHugePages({ GLIBC_TUNABLES: 'glibc.malloc.perturb=0' }).GLIBC_TUNABLES, 'glibc.malloc.perturb=0:glibc.malloc.hugetlb=1', 'added to the user\'s');
  t.equal(withHugePages({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' }).GLIBC_TUNABLES, 'glibc.malloc.hugetlb=0', 'the user\'s choice wins');
  t.notOk(hugePagesOn({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' }));
  t.ok(hugePagesOn({ GLIBC_TUNABLES: 'x.y=2:glibc.malloc.hugetlb=1' }));
  t.notOk(hugePagesOn({}));
});

t.test('the logger: its file opened at once, pino loaded only for a line at an enabled level', async (t) => {
  const file = path.join(tmpDir('log'), 'sub', 'mount.log');
  // a process of its own: pino must not be loaded by anything else before
  const script = `
    const { makeLogger } = require(${JSON.stringify(path.join(ROOT, 'dist/cli/log.js'))});
    const pinoLoaded = () => Object.keys(require.cache).some((k) => k.includes('/node_modules/pino/'));
    const log = makeLogger('warn', ${JSON.stringify(file)});
    const before = require('fs').existsSync(${JSON.stringify(file)});
    log.info('not written'); log.debug({ a: 1 }, 'nor this');
    const afterInfo = pinoLoaded();
    log.warn({ secretAccessKey: 'SHOULD-NOT-APPEAR', n: 3 }, 'written');
    console.log(JSON.stringify({ before, afterInfo, afterWarn: pinoLoaded() }));`;
  const js = path.join(tmpDir('log'), 'log.js');
  fs.writeFileSync(js, script);
  const out = JSON.parse(await sh(`${node} ${js}`));
  t.same(out, { before: true, afterInfo: false, afterWarn: true }, 'file created at start; pino loaded at the warning, not before');
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  t.equal(lines.length, 1, 'only the line at an enabled level');
  t.match(lines[0], { level: 40, msg: 'written', n: 3, secretAccessKey: '[redacted]' });
  const bad = await shStatus(`${envCreds} ${node} ${CLI} --log-level loud mount bbb ${tmpDir('mnt')} --endpoint http://127.0.0.1:1 --foreground`);
  t.equal(bad.code, 2, 'an unknown level is a usage error');
  t.match(bad.stderr, /--log-level must be one of .*; got "loud"/);
});

t.test('logs on a terminal are sentences; --log-format json gives JSON', async (t) => {
  const s = await startServer(t);
  const run = async (extra: string) => {
    const mnt = tmpDir('fmt-mnt');
    const cache = tmpDir('fmt-cache');
    const p = spawn('bash', ['-c', `${envCreds} exec ${node} ${CLI} ${extra} mount test ${mnt} --endpoint ${s.url} --foreground -o cache_dir=${cache}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let out = '';
    p.stderr!.on('data', (d) => (err += d));
    p.stdout!.on('data', (d) => (out += d));
    for (let i = 0; i < 100 && !out.includes('mounted '); i++) await sleep(100);
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
    await forceUnmount(mnt);
    return err;
  };
  const human = await run('');
  t.match(human, /^svcfs: mounted \(bucket=test prefix= mountpoint=/m, 'a sentence per line on stderr, details after it');
  t.match(human, /^svcfs: unmounted/m);
  // (the harness starts it without the tunable svcfs mount sets)
  t.match(human, /^svcfs: started without GLIBC_TUNABLES=glibc.malloc.hugetlb=1/m, 'a foreground mount without malloc\'s huge pages says how to turn them on');
  t.notMatch(human, /\{"level"/, 'no JSON');
  const json = await run('--log-format json');
  t.match(json, /^\{"level":30,.*"bucket":"test".*"msg":"mounted"\}$/m, '--log-format json: one JSON object per line');
});

t.test('mount -t svcfs, an fstab line, svcfs unmount', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  await c.put('test', 'hello.txt', 'hi from the bucket');
  const helper = '/sbin/mount.svcfs';
  const hadHelper = fs.existsSync(helper);
  // a link left dangling (its checkout is gone) is put back as it was afterwards
  const dangling = !hadHelper && fs.lstatSync(helper, { throwIfNoEntry: false }) ? fs.readlinkSync(helper) : undefined;
  if (!hadHelper) {
    fs.rmSync(helper, { force: true });
    fs.symlinkSync(path.join(ROOT, 'bin', 'mount.svcfs'), helper);
  }
  const creds = credFile();
  const mnt = tmpDir('mnt-t');
  const cache = tmpDir('cache');
  t.teardown(async () => {
    await forceUnmount(mnt);
    if (!hadHelper) fs.rmSync(helper, { force: true });
    if (dangling) fs.symlinkSync(dangling, helper);
  });
  const opts = `endpoint=${s.url},credentials=${creds},cache_dir=${cache},allow_other`;
  await sh(`mount -t svcfs test ${mnt} -o ${opts}`);
  t.ok(mounted(mnt), 'mount -t svcfs mounted');
  t.equal(await sh(`cat ${mnt}/hello.txt`), 'hi from the bucket');
  t.match(fs.readFileSync('/proc/mounts', 'utf8'), new RegExp(`svcfs:test ${mnt} fuse.svcfs .*allow_other`));
  await sh(`${node} ${CLI} unmount ${mnt}`);
  t.notOk(mounted(mnt), 'svcfs unmount');

  const fstab = path.join(tmpDir('fstab'), 'fstab');
  fs.writeFileSync(fstab, `# test fstab\ntest:sub ${mnt} svcfs ${opts},_netdev,noauto,x-systemd.automount 0 0\n`);
  await c.put('test', 'sub/inner.txt', 'inside the prefix');
  await sh(`mount -T ${fstab} ${mnt}`);
  t.ok(mounted(mnt), 'mounted from an fstab line (with _netdev and a prefix)');
  t.equal(await sh(`cat ${mnt}/inner.txt`), 'inside the prefix');
  await sh(`echo written > ${mnt}/w.txt`);
  t.equal((await c.getBuffer('test', 'sub/w.txt')).toString(), 'written\n');
  await sh(`fusermount -u ${mnt}`);
  t.notOk(mounted(mnt), 'fusermount -u');
  await sleep(1500);
  t.equal((await shStatus(`pgrep -f "mount test:sub ${mnt}"`)).code, 1, 'the mount process exits after an outside unmount');
});

t.test('errors: a clear message and a non-zero exit code', async (t) => {
  const s = await startServer(t);
  const empty = tmpDir('mnt-e');
  const full = tmpDir('mnt-f');
  fs.writeFileSync(path.join(full, 'x'), 'x');
  const loose = credFile(0o644);
  const busy = tmpDir('mnt-busy');
  const cache = tmpDir('cache');
  t.teardown(() => forceUnmount(busy));
  await sh(`${envCreds} ${node} ${CLI} mount test ${busy} --endpoint ${s.url} -o cache_dir=${cache}`);
  const cases: Array<[string, string, RegExp, number]> = [
    ['unknown option', `${node} ${CLI} mount --bogus`, /unknown option '--bogus'/, 2],
    ['unknown command', `${node} ${CLI} frobnicate`, /unknown command/, 2],
    ['missing endpoint', `${envCreds} ${node} ${CLI} mount test ${empty}`, /needs --endpoint/, 2],
    ['bad endpoint', `${envCreds} ${node} ${CLI} mount test ${empty} --endpoint ftp://x`, /must be an http/, 2],
    ['bad bucket name', `${envCreds} ${node} ${CLI} mount Bad_Bucket ${empty} --endpoint ${s.url}`, /not a valid bucket name/, 2],
    ['unknown mount option', `${envCreds} ${node} ${CLI} mount test ${empty} --endpoint ${s.url} -o frob=1`, /unknown mount option "frob=1"/, 2],
    ['bad payload_hash', `${envCreds} ${node} ${CLI} mount test ${empty} --endpoint ${s.url} -o payload_hash=sometimes`, /payload_hash= takes auto, always or never/, 2],
    ['mount point missing', `${envCreds} ${node} ${CLI} mount test /nonexistent/dir --endpoint ${s.url}`, /does not exist/, 1],
    ['mount point not empty', `${envCreds} ${node} ${CLI} mount test ${full} --endpoint ${s.url}`, /not empty/, 1],
    ['already mounted', `${envCreds} ${node} ${CLI} mount test ${busy} --endpoint ${s.url}`, /already mounted/, 1],
    ['credentials file readable by others', `${node} ${CLI} mount test ${empty} --endpoint ${s.url} --credentials ${loose}`, /can be read by others/, 2],
    ['profile missing', `${node} ${CLI} mount test ${empty} --endpoint ${s.url} --credentials ${credFile()} --profile nope`, /no profile \[nope\]/, 2],
    ['server unreachable', `${envCreds} ${node} ${CLI} mount test ${empty} --endpoint http://127.0.0.1:1 -o retry_budget=1`, /cannot reach http:\/\/127\.0\.0\.1:1/, 1],
    ['bucket missing', `${envCreds} ${node} ${CLI} mount nosuchbucket ${empty} --endpoint ${s.url}`, /bucket "nosuchbucket" does not exist/, 1],
    ['unknown access key', `SVC_ACCESS_KEY_ID=NOSUCHKEY00000000000 SVC_SECRET_ACCESS_KEY=${ADMIN.secretAccessKey} ${node} ${CLI} mount test ${empty} --endpoint ${s.url}`, /access key ID is not known/, 1],
    ['wrong secret', `SVC_ACCESS_KEY_ID=${ADMIN.accessKeyId} SVC_SECRET_ACCESS_KEY=${'0'.repeat(64)} ${node} ${CLI} mount test ${empty} --endpoint ${s.url}`, /secret access key does not match/, 1],
    ['no credentials', `HOME=${tmpDir('home')} ${node} ${CLI} mount test ${empty} --endpoint ${s.url}`, /no credentials/, 2],
    ['presign expiry too long', `${envCreds} ${node} ${CLI} presign GET test/k --endpoint ${s.url} --expires 604801`, /expected a whole number from 1 to 604800/, 2],
    ['presign expiry zero', `${envCreds} ${node} ${CLI} presign GET test/k --endpoint ${s.url} --expires 0`, /from 1 to 604800/, 2],
    ['presign bad method', `${envCreds} ${node} ${CLI} presign POST test/k --endpoint ${s.url}`, /Allowed choices are GET, PUT, HEAD, DELETE/, 2],
    ['presign without key', `${envCreds} ${node} ${CLI} presign GET test --endpoint ${s.url}`, /BUCKET\/KEY/, 2],
    ['serve without bucket', `${node} ${CLI} serve --data ${tmpDir('d')}`, /serve needs a bucket: --bucket NAME/, 2],
    ['status of a non-mount', `${node} ${CLI} status ${empty}`, /not an svcfs mount/, 1],
    ['unmount of a non-mount', `${node} ${CLI} unmount ${empty}`, /is not mounted/, 1],
  ];
  for (const [name, cmd, msg, code] of cases) {
    const r = await shStatus(cmd);
    t.equal(r.code, code, `${name}: exit ${code}`);
    t.match(r.stderr, msg, `${name}: says so`);
    t.ok(r.stderr.trim().split('\n').length <= 3, `${name}: a short message`);
  }
  t.same(fs.readdirSync(empty), [], 'nothing mounted on failure');
});

t.test('presign: plain curl downloads, and not after expiry', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  await c.put('test', 'shared/report 2024.txt', 'the report');
  const url = (await sh(`${envCreds} ${node} ${CLI} presign GET "test/shared/report 2024.txt" --endpoint ${s.url} --expires 2`)).trim();
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/test\/shared\/report%202024\.txt\?X-Svc-Algorithm=SVC4-HMAC-SHA256&/);
  t.equal(await sh(`curl -sf '${url}'`), 'the report');
  const put = (await sh(`${envCreds} ${node} ${CLI} presign PUT test/up.txt --endpoint ${s.url} --expires 60`)).trim();
  await sh(`echo uploaded | curl -sf -T - '${put}' -H 'Content-Length: 9' || printf uploaded | curl -sf --data-binary @- -X PUT '${put}'`);
  t.match((await c.getBuffer('test', 'up.txt')).toString(), /^uploaded/);
  await sleep(3500);
  const late = await shStatus(`curl -s -o /dev/null -w '%{http_code}' '${url}'`);
  t.equal(late.stdout, '403', 'refused after expiry');
});

t.test('--help for every command, with examples', async (t) => {
  for (const cmd of ['', 'serve', 'mount', 'unmount', 'status', 'presign', 'demo']) {
    const r = await shStatus(`${node} ${CLI} ${cmd} --help`);
    t.equal(r.code, 0, `svcfs ${cmd} --help`);
    if (cmd) t.match(r.stdout, /Example/, `svcfs ${cmd} --help has examples`);
  }
});

t.test('a config file supplies endpoint, dialect and mount options; flags win', async (t) => {
  const s = await startServer(t);
  const dir = tmpDir('config');
  const cfg = path.join(dir, 'config');
  const cache = tmpDir('cache');
  fs.writeFileSync(cfg, `[default]\nendpoint = ${s.url}\ndialect = svc\noptions = cache_ttl=7,cache_dir=${cache}\n[aws]\nendpoint = ${s.url}\ndialect = aws\n`);
  const mnt = tmpDir('mnt-cfg');
  t.teardown(() => forceUnmount(mnt));
  await sh(`${envCreds} ${node} ${CLI} mount test ${mnt} --config ${cfg}`);
  t.ok(mounted(mnt), 'mounted with the endpoint from the config file');
  const st = JSON.parse(await sh(`${node} ${CLI} status ${mnt} --json`));
  t.equal(st.cache.ttlSec, 7, 'mount options from the config file');
  await sh(`${node} ${CLI} unmount ${mnt}`);
  await sh(`${envCreds} ${node} ${CLI} mount test ${mnt} --config ${cfg} -o cache_ttl=3`);
  t.equal(JSON.parse(await sh(`${node} ${CLI} status ${mnt} --json`)).cache.ttlSec, 3, '-o on the command line wins');
  await sh(`${node} ${CLI} unmount ${mnt}`);
  const creds = path.join(dir, 'credentials');
  fs.writeFileSync(creds, `[aws]\naccess_key_id = ${ADMIN.accessKeyId}\nsecret_access_key = ${ADMIN.secretAccessKey}\n`, { mode: 0o600 });
  const url = (await sh(`${node} ${CLI} presign GET test/x --config ${cfg} --credentials ${creds} --profile aws`)).trim();
  t.match(url, /X-Amz-Algorithm=AWS4-HMAC-SHA256/, 'presign takes endpoint and dialect from a profile');
  const bad = path.join(dir, 'bad');
  fs.writeFileSync(bad, '[default]\nendpiont = http://x\n');
  const r = await shStatus(`${envCreds} ${node} ${CLI} mount test ${mnt} --config ${bad}`);
  t.equal(r.code, 2);
  t.match(r.stderr, /unknown setting "endpiont"/);
});

t.test('install-helper links mount.svcfs for mount(8) and svcfs onto the PATH; again is harmless; a file in the way is refused', async (t) => {
  const root = tmpDir('install');
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  const first = await sh(`${node} ${CLI} install-helper --dir ${root}/sbin --bin ${root}/bin`);
  t.match(first, /linked .*sbin\/mount\.svcfs -> .*bin\/mount\.svcfs/);
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
  t.equal((await sh(`PATH=${root}/bin:$PATH svcfs --version`)).trim(), version, 'svcfs runs from the PATH through the link');
  t.equal(fs.realpathSync(`${root}/sbin/mount.svcfs`), path.join(ROOT, 'bin', 'mount.svcfs'), 'mount.svcfs points into this installation');
  const help = await shStatus(`${root}/sbin/mount.svcfs`);
  t.not(help.code, 0, 'the helper runs (and wants a source and a directory)');
  t.match(await sh(`${node} ${CLI} install-helper --dir ${root}/sbin --bin ${root}/bin`), /already there/, 'running it again changes nothing');
  fs.rmSync(`${root}/bin/svcfs`);
  fs.writeFileSync(`${root}/bin/svcfs`, 'not ours');
  const refused = await shStatus(`${node} ${CLI} install-helper --dir ${root}/sbin --bin ${root}/bin`);
  t.equal(refused.code, 1, 'a regular file in the way is refused');
  t.match(refused.stderr, /exists and is not a link/);
  t.equal(fs.readFileSync(`${root}/bin/svcfs`, 'utf8'), 'not ours', 'and left alone');
});
