// svcfs as a user installs it: `npm pack`, then `npm install -g` of the tarball
// into a scratch prefix; every check runs the installed commands (svcfs,
// mount.svcfs, the manual page), not the checkout.
import t from 'tap';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { forceUnmount, sh, shStatus, sleep } from './helpers/mount';
import { ADMIN, ROOT, startServer, tmpDir } from './helpers/server';

const mounted = (m: string) => fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === m);

t.test('npm pack and npm install -g: svcfs, mount.svcfs and svcfs(1) installed and working', { timeout: 900_000 }, async (t) => {
  const work = tmpDir('pkg');
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const tgz = (await sh(`cd ${ROOT} && npm pack --pack-destination ${work} --silent 2>/dev/null`)).trim().split('\n').pop()!;
  t.match(tgz, /^svcfs-[\d.]+\.tgz$/, `npm pack made ${tgz}`);
  const prefix = path.join(work, 'prefix');
  const inst = await shStatus(`npm install -g --prefix ${prefix} ${work}/${tgz} --no-audit --no-fund --loglevel=error 2>&1`);
  t.equal(inst.code, 0, `npm install -g of the tarball ${inst.stdout.slice(-2000)}`);
  const svcfs = `${prefix}/bin/svcfs`;
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
  t.equal((await sh(`${svcfs} --version`)).trim(), version, 'the installed svcfs runs');
  t.ok(fs.existsSync(`${prefix}/bin/mount.svcfs`), 'mount.svcfs is installed beside it');
  const man = await sh(`MANPATH=${prefix}/share/man man -P cat svcfs 2>/dev/null`);
  t.match(man, /SVCFS\(1\)/, 'man svcfs shows the manual page');
  t.match(man, /svcfs serve user add/, 'made from the same text as --help (the admin commands are in it)');
  t.match(man, /install-helper/);

  t.test('the demo, and what it suggests, from the installed command', async (t) => {
    const cwd = tmpDir('pkg-demo');
    const mnt = path.join(cwd, 'mnt');
    const p = spawn(svcfs, ['demo', '--data', path.join(cwd, 'data'), '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(async () => {
      if (p.exitCode === null) p.kill('SIGKILL');
      await forceUnmount(mnt);
      fs.rmSync(cwd, { recursive: true, force: true });
    });
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.stderr!.on('data', (d) => (out += d));
    for (let i = 0; i < 300 && !out.includes('Press Ctrl-C'); i++) await sleep(100);
    t.match(out, /mounted at .*mnt/, 'the demo mounts');
    t.match(await sh(`ls ${mnt}`), /README\.txt/);
    // every command it suggests, exactly as printed, with the installed svcfs on the PATH
    const block = out.slice(out.indexOf('Try, in another terminal:')).split('\n').slice(1).filter((l) => l.startsWith('  ')).map((l) => l.trim());
    t.ok(block.some((l) => l.startsWith('svcfs status')), `it suggests commands, svcfs status among them: ${block.join(' | ')}`);
    for (const cmd of block) {
      const r = await shStatus(`cd ${cwd} && PATH=${prefix}/bin:$PATH ${cmd.replace(/^curl /, 'curl -sS ')}`);
      t.equal(r.code, 0, `${cmd} works as printed ${r.stderr}`);
    }
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGINT');
    t.equal(await exited, 0, 'Ctrl-C stops it');
    t.notOk(mounted(mnt));
  });

  t.test('mount -t svcfs through the installed mount.svcfs', async (t) => {
    const s = await startServer(t);
    const helper = '/sbin/mount.svcfs';
    const before = fs.existsSync(helper) ? fs.readlinkSync(helper) : undefined;
    const mnt = tmpDir('pkg-mnt');
    const cred = path.join(tmpDir('pkg-cred'), 'credentials');
    fs.writeFileSync(cred, `[default]\naccess_key_id = ${ADMIN.accessKeyId}\nsecret_access_key = ${ADMIN.secretAccessKey}\n`, { mode: 0o600 });
    t.teardown(async () => {
      await forceUnmount(mnt);
      fs.rmSync(helper, { force: true });
      if (before) fs.symlinkSync(before, helper);
    });
    t.match(await sh(`${svcfs} install-helper`), /linked \/sbin\/mount\.svcfs -> .*prefix/, 'install-helper links the installed helper');
    await sh(`mount -t svcfs test ${mnt} -o endpoint=${s.url},credentials=${cred},cache_dir=${tmpDir('pkg-cache')}`);
    t.ok(mounted(mnt), 'mount -t svcfs mounted');
    await sh(`echo through-mount-t > ${mnt}/pkg.txt`);
    t.equal((await s.client().getBuffer('test', 'pkg.txt')).toString(), 'through-mount-t\n');
    await sh(`${svcfs} unmount ${mnt}`);
    t.notOk(mounted(mnt), 'svcfs unmount');
  });
});
