// `svcfs demo`: the embedded default. A server on a data directory kept between
// runs, a bucket `demo` with a few sample files, mounted at ./mnt by a separate
// `svcfs mount --foreground` process (as users run it); Ctrl-C flushes,
// unmounts and stops the server.
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Log } from './log';
import { SVC } from '../wire/dialect';
import { SvcClient } from '../wire/client';
import { encodePath, presignedUrlString } from '../wire/signer';
import { SvcServer } from '../server/server';
import { generateUser, Users } from '../server/users';
import { isMounted } from '../fs/mountpoint';
import { UsageError } from './config';

export interface DemoOptions {
  data?: string;
  port: number;
  mountpoint: string;
}

const SAMPLES: Record<string, string> = {
  'README.txt': 'This is the svcfs demo bucket, mounted as a directory.\nEvery file here is an object in the bucket "demo".\n',
  'docs/getting-started.md': '# Getting started\n\nCopy files in with cp, edit them, rename them with mv: each change lands in the bucket.\n',
  'docs/notes/todo.txt': '- try ls -l\n- try cp and mv\n- try setfattr -n user.svc.tag.project -v demo\n',
  'data/numbers.csv': 'n,square\n' + Array.from({ length: 20 }, (_, i) => `${i},${i * i}`).join('\n') + '\n',
};

function step(msg: string): void {
  process.stdout.write(`svcfs demo: ${msg}\n`);
}

/** fusermount and libfuse are needed; as root on Debian, install them (saying so). */
function ensureFuse(): void {
  const have = (cmd: string) => {
    try {
      execFileSync('which', [cmd], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (have('fusermount') && fs.existsSync('/dev/fuse')) return;
  if (!fs.existsSync('/dev/fuse')) throw new UsageError('/dev/fuse is missing: this machine (or container) cannot mount FUSE filesystems', 1);
  if (process.getuid?.() !== 0 || !have('apt-get')) throw new UsageError('fusermount is missing: install the packages fuse and libfuse2 (apt-get install fuse libfuse2)', 1);
  step('installing Debian packages fuse and libfuse2 (apt-get) ...');
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
  execFileSync('apt-get', ['install', '-y', '-qq', 'fuse', 'libfuse2'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

export async function demo(o: DemoOptions, log: Log): Promise<void> {
  ensureFuse();
  const data = o.data ?? path.join(process.env.XDG_DATA_HOME || path.join(os.homedir(), '.local', 'share'), 'svcfs', 'demo');
  const mnt = path.resolve(o.mountpoint);
  if (isMounted(mnt)) throw new UsageError(`${mnt} is already mounted (svcfs unmount ${o.mountpoint})`, 1);
  fs.mkdirSync(mnt, { recursive: true });
  if (fs.readdirSync(mnt).length) throw new UsageError(`${mnt} is not empty: give the demo an empty directory (svcfs demo DIR)`, 1);
  fs.mkdirSync(data, { recursive: true, mode: 0o700 });

  const usersFile = path.join(data, 'users.json');
  const first = !fs.existsSync(usersFile);
  if (first) {
    step(`first start: creating ${data}`);
    const u = new Users([generateUser('demo')]);
    u.save(usersFile);
  }
  const users = Users.load(usersFile);
  const user = users.all()[0];
  const server = new SvcServer({ dataDir: path.join(data, 'store'), port: o.port, buckets: ['demo'], users, logger: log });
  let url: string;
  try {
    url = await server.listen();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    await server.close();
    const again = new SvcServer({ dataDir: path.join(data, 'store'), port: 0, buckets: ['demo'], users, logger: log });
    url = await again.listen();
    return run(again, url);
  }
  return run(server, url);

  async function run(srv: SvcServer, endpoint: string): Promise<void> {
    step(`server listening on ${endpoint} (data in ${data})`);
    const creds = { accessKeyId: user.accessKeyId, secretAccessKey: user.secretAccessKey };
    const client = new SvcClient({ endpoint, credentials: creds });
    const page = await client.listPage('demo', { maxKeys: 1 });
    if (page.contents.length === 0 && page.prefixes.length === 0) {
      step('adding sample files to bucket "demo"');
      for (const [k, v] of Object.entries(SAMPLES)) await client.put('demo', k, v, { contentType: k.endsWith('.md') ? 'text/markdown' : 'text/plain' });
    }
    await client.close();

    step(`mounting bucket "demo" at ${mnt} ...`);
    const env = { ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey };
    const child: ChildProcess = spawn(process.execPath, [process.argv[1], '--log-level', 'warn', 'mount', 'demo', mnt, '--endpoint', endpoint, '--foreground'],
      { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const ok = await new Promise<boolean>((res) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('mounted ')) res(true);
      });
      child.once('exit', () => res(false));
    });
    if (!ok) {
      await srv.close();
      throw new UsageError('the mount did not come up (see the messages above)', 1);
    }
    const link = presignedUrlString({ dialect: SVC, credentials: creds, region: 'us-east-1', method: 'GET', url: new URL(endpoint),
      path: encodePath('/demo/README.txt'), expiresSeconds: 3600 });
    const rel = path.relative(process.cwd(), mnt) || '.';
    process.stdout.write(`
The bucket "demo" is mounted at ${mnt}. Try, in another terminal:
  ls -l ${rel}
  cat ${rel}/README.txt
  cp /etc/hostname ${rel}/ && mv ${rel}/hostname ${rel}/docs/
  svcfs status ${rel}
A link to README.txt that works for an hour, in a browser or with curl:
  curl '${link}'
Keys for other clients: SVC_ACCESS_KEY_ID=${creds.accessKeyId} (secret in ${usersFile})
Press Ctrl-C to unmount and stop.
`);
    await new Promise<void>((res) => {
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        step('stopping: uploading pending changes and unmounting ...');
        child.kill('SIGTERM');
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
      child.once('exit', () => res());
    });
    if (isMounted(mnt)) {
      try {
        execFileSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
      } catch {
        execFileSync('umount', ['-l', mnt], { stdio: 'ignore' });
      }
    }
    await srv.close();
    step('stopped; the bucket is kept for next time');
  }
}
