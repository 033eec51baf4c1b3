// svcfs serve driven by programs nobody here wrote: Debian's rclone (Go SDK),
// boto3 (Python), s3fs (C++, libcurl) and curl. Each speaks the aws dialect.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { forceUnmount, sh, shStatus, sleep, startMount } from './helpers/mount';
import { ADMIN, startServer, tmpDir } from './helpers/server';

const MiB = 1024 * 1024;
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

function rcloneEnv(url: string): NodeJS.ProcessEnv {
  // rclone 1.60 cannot load AWS_CA_BUNDLE into its transport: leave it out
  const env = { ...process.env };
  delete env.AWS_CA_BUNDLE;
  return {
    ...env,
    RCLONE_CONFIG_S_TYPE: 's3', RCLONE_CONFIG_S_PROVIDER: 'Other', RCLONE_CONFIG_S_ENDPOINT: url, RCLONE_CONFIG_S_REGION: 'us-east-1',
    RCLONE_CONFIG_S_ACCESS_KEY_ID: ADMIN.accessKeyId, RCLONE_CONFIG_S_SECRET_ACCESS_KEY: ADMIN.secretAccessKey, RCLONE_CONFIG_S_FORCE_PATH_STYLE: 'true',
  };
}

async function run(cmd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  const { execFile } = await import('node:child_process');
  return new Promise((ok) => execFile('bash', ['-c', cmd], { env, maxBuffer: 64 * MiB, timeout: 300_000 }, (e, stdout, stderr) => {
    ok({ code: e ? (typeof (e as any).code === 'number' ? (e as any).code : 1) : 0, stdout, stderr });
  }));
}

/** Mount bucket `test` of a server with s3fs (unmounted at teardown); a scratch directory beside it. */
async function mountS3fs(t: { teardown(fn: () => unknown): void }, url: string, extra = ''): Promise<{ mnt: string; work: string }> {
  const mnt = tmpDir('s3fs-mnt');
  const work = tmpDir('s3fs-work');
  const passwd = path.join(work, 'passwd');
  fs.writeFileSync(passwd, `${ADMIN.accessKeyId}:${ADMIN.secretAccessKey}\n`, { mode: 0o600 });
  t.teardown(async () => {
    await forceUnmount(mnt);
    fs.rmSync(mnt, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });
  await sh(`s3fs test ${mnt} -o url=${url},use_path_request_style,passwd_file=${passwd},${extra}endpoint=us-east-1,sigv4,stat_cache_expire=1`);
  for (let i = 0; i < 50 && !fs.readFileSync('/proc/mounts', 'utf8').includes(mnt); i++) await sleep(100);
  return { mnt, work };
}

t.test('rclone (Go): multipart copy, sync, check, cat, delete', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const env = rcloneEnv(s.url);
  const local = tmpDir('rclone');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  const big = randomBytes(23 * MiB + 5);
  fs.writeFileSync(`${local}/big`, big);
  // above the cutoff: a multipart upload whose completion lists ETags as &#34;...&#34;
  const cp = await run(`rclone copyto ${local}/big s:test/rc/big --s3-upload-cutoff 5M --s3-chunk-size 5M`, env);
  t.equal(cp.code, 0, `rclone multipart copy: ${cp.stderr.slice(-500)}`);
  const info = await c.head('test', 'rc/big');
  t.match(typeof info === 'object' && info.etag, /-5$/, 'a 5-part upload');
  t.equal(md5(await c.getBuffer('test', 'rc/big')), md5(big), 'content');
  const cat = await run(`rclone cat s:test/rc/big | md5sum`, env);
  t.equal(cat.stdout.split(' ')[0], md5(big), 'rclone cat reads it back');

  await sh(`mkdir -p ${local}/tree/a/b && for i in $(seq 1 40); do head -c $((i * 97)) /dev/urandom > ${local}/tree/a/f$i; done && echo deep > ${local}/tree/a/b/deep && echo 'ünï' > "${local}/tree/a/b/ünï 漢字.txt"`);
  const sync = await run(`rclone sync ${local}/tree s:test/rc/tree --transfers 8`, env);
  t.equal(sync.code, 0, `rclone sync: ${sync.stderr.slice(-500)}`);
  const check = await run(`rclone check ${local}/tree s:test/rc/tree`, env);
  t.equal(check.code, 0, 'rclone check: no differences');
  t.match(check.stderr, /0 differences found/);
  t.match(check.stderr, /42 matching files/);
  fs.rmSync(`${local}/tree/a/f1`);
  fs.writeFileSync(`${local}/tree/a/f2`, 'changed');
  const resync = await run(`rclone sync ${local}/tree s:test/rc/tree`, env);
  t.equal(resync.code, 0);
  t.equal(await c.head('test', 'rc/tree/a/f1'), undefined, 'a deleted file is deleted by sync');
  t.equal((await c.getBuffer('test', 'rc/tree/a/f2')).toString(), 'changed', 'a changed file is uploaded again');
  t.equal((await run(`rclone check ${local}/tree s:test/rc/tree`, env)).code, 0, 'check after resync');
  const lsf = await run(`rclone lsf -R s:test/rc/tree | sort`, env);
  t.match(lsf.stdout, /a\/b\/ünï 漢字\.txt/, 'unicode names listed');
  const purge = await run(`rclone purge s:test/rc`, env);
  t.equal(purge.code, 0);
  t.equal((await c.listPage('test', { prefix: 'rc/' })).contents.length, 0, 'rclone purge removed everything');
});

t.test('boto3 (Python): transfers, copies, tagging, batch delete, listings, presigned URLs, framing', async (t) => {
  const s = await startServer(t);
  const work = tmpDir('boto3');
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const script = path.join(__dirname, 'interop', 'boto3_check.py');
  const r = await run(`python3 ${script} ${s.url} test ${ADMIN.accessKeyId} ${ADMIN.secretAccessKey} ${work}`, process.env);
  const lines = r.stdout.split('\n').filter((l) => /^(PASS|FAIL) /.test(l));
  t.ok(lines.length >= 13, `every check reported (${lines.length}); stderr: ${r.stderr.slice(-1500)}`);
  for (const l of lines) t.ok(l.startsWith('PASS '), l);
  t.equal(r.code, 0, 'the script ran to its end');
});

t.test('s3fs (C++): mount svcfs serve, write above its multipart size, read back, rename, remove', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const { mnt, work } = await mountS3fs(t, s.url, 'multipart_size=5,');
  const big = randomBytes(17 * MiB + 3);
  fs.writeFileSync(`${work}/big`, big);
  await sh(`cp ${work}/big ${mnt}/s3fs-big`);
  const info = await c.head('test', 's3fs-big');
  t.match(typeof info === 'object' && info.etag, /-\d+$/, 'uploaded by s3fs as a multipart upload');
  t.equal(md5(await c.getBuffer('test', 's3fs-big')), md5(big), 'in the bucket byte for byte');
  t.equal((await sh(`md5sum < ${mnt}/s3fs-big`)).split(' ')[0], md5(big), 'read back through s3fs');
  await sh(`mkdir ${mnt}/dir && echo hello > ${mnt}/dir/a.txt && mv ${mnt}/dir/a.txt ${mnt}/dir/b.txt`);
  t.equal((await c.getBuffer('test', 'dir/b.txt')).toString(), 'hello\n', 'rename through s3fs (server-side copy)');
  t.equal(await c.head('test', 'dir/a.txt'), undefined);
  await c.put('test', 'dir/from-client.txt', 'written by svcfs client');
  await sleep(1500);
  t.equal(await sh(`cat ${mnt}/dir/from-client.txt`), 'written by svcfs client', 'an object written by the svcfs client, read by s3fs');
  await sh(`rm -r ${mnt}/dir ${mnt}/s3fs-big`);
  t.equal((await c.listPage('test', { prefix: '' })).contents.length, 0, 'rm -r through s3fs leaves nothing');
  t.equal((await shStatus(`fusermount -u ${mnt}`)).code, 0, 'unmounted');
});

t.test('s3fs and the svcfs mount on one bucket: modes, owners, times and special files read the same both ways', async (t) => {
  const s = await startServer(t);
  const { mnt } = await mountS3fs(t, s.url);
  const m = await startMount(t, s, { options: ['cache_ttl=1'] });
  const S = mnt;
  const M = m.mnt;
  const show = (dir: string, names: string[]) => sh(`cd ${dir} && stat -c '%n %F %a %u:%g %Y' ${names.join(' ')}`);

  await sh(`cd ${S} && mkdir from-s3fs && echo s > from-s3fs/file && chmod 640 from-s3fs/file && chown 123:456 from-s3fs/file && touch -d '2021-05-06 07:08:09Z' from-s3fs/file && mkfifo from-s3fs/fifo && ln -s file from-s3fs/link`);
  await sleep(1500);
  const names = ['from-s3fs/file', 'from-s3fs/fifo', 'from-s3fs/link'];
  t.equal(await show(M, names), await show(S, names), 'what s3fs wrote (a file with mode, owner and time, a fifo, a symlink) looks the same through svcfs');

  await sh(`cd ${M} && mkdir from-svcfs && echo v > from-svcfs/file && chmod 604 from-svcfs/file && chown 321:654 from-svcfs/file && touch -d '2022-03-04 05:06:07Z' from-svcfs/file && mkfifo from-svcfs/fifo && mknod from-svcfs/dev c 1 3 && ln -s file from-svcfs/link`);
  await sleep(2500);
  const ours = ['from-svcfs/file', 'from-svcfs/fifo', 'from-svcfs/dev', 'from-svcfs/link'];
  const seen = await show(S, ours);
  t.equal(seen.split('\n').slice(0, 2).join('\n'), (await show(M, ours)).split('\n').slice(0, 2).join('\n'), 'what svcfs wrote (file, fifo) looks the same through s3fs');
  t.match(seen, /from-svcfs\/dev character special file 644 0:0/, 'a device made by svcfs is a device to s3fs');
  t.match(seen, /from-svcfs\/link symbolic link 777/, 'and a symlink a symlink');
  t.equal((await sh(`readlink ${S}/from-svcfs/link`)).trim(), 'file');
});
