// Start a real `svcfs serve` child process for a test, and stop it at teardown.
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SVC, AWS, Dialect } from '../../src/wire/dialect';
import { SvcClient } from '../../src/wire/client';

export const ROOT = path.resolve(__dirname, '..', '..');
export const CLI = path.join(ROOT, 'bin', 'svcfs.js');

export const ADMIN = { accessKeyId: 'ADMINKEY000000000001', secretAccessKey: 'a'.repeat(64) };
export const READER = { accessKeyId: 'READERKEY00000000002', secretAccessKey: 'b'.repeat(64) };

export interface TestServer {
  url: string;
  port: number;
  dataDir: string;
  proc: ChildProcess;
  logs: string[];
  /** everything the server printed on stdout */
  stdout: string;
  client(o?: { dialect?: Dialect; creds?: typeof ADMIN; signature?: 'v4' | 'v2' }): SvcClient;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** start again on the same data directory and port */
  restart(): Promise<void>;
}

const scratch: string[] = [];

export function tmpDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `svcfs-${prefix}-`));
  scratch.push(d);
  return d;
}

// Every scratch directory (servers' data, caches, mount points) goes when the
// test process ends: a run left ~1.4 GB in /tmp. One that is, or holds, a mount
// point still up is left alone, so that nothing is deleted through a mount.
process.on('exit', () => {
  const mounts = fs.readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1]?.replace(/\\040/g, ' ')).filter(Boolean) as string[];
  for (const d of scratch) {
    if (mounts.some((m) => m === d || m.startsWith(d + '/'))) continue;
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      // (a file a child process still writes: left behind)
    }
  }
});

interface Tap {
  teardown(fn: () => unknown): void;
}

export async function startServer(t: Tap, o: { buckets?: string[]; dataDir?: string; extraArgs?: string[]; env?: Record<string, string> } = {}): Promise<TestServer> {
  const dataDir = o.dataDir ?? tmpDir('data');
  const users = {
    users: [
      { name: 'admin', ...ADMIN, read: ['*'], write: ['*'] },
      { name: 'reader', ...READER, read: ['*'], write: [] },
    ],
  };
  const usersFile = path.join(dataDir, 'users.json');
  if (!fs.existsSync(usersFile)) fs.writeFileSync(usersFile, JSON.stringify(users), { mode: 0o600 });
  const buckets = o.buckets ?? ['test', 'other'];
  const clients: SvcClient[] = [];
  const s: TestServer = {
    url: '', port: 0, dataDir, proc: undefined as never, logs: [], stdout: '',
    client: (c = {}) => {
      const cl = new SvcClient({ endpoint: s.url, credentials: c.creds ?? ADMIN, dialect: c.dialect ?? SVC, signature: c.signature, maxAttempts: 1 });
      clients.push(cl);
      return cl;
    },
    stop: async (signal = 'SIGTERM') => {
      if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
      const exited = new Promise((r) => s.proc.once('exit', r));
      s.proc.kill(signal);
      await exited;
    },
    restart: async () => {
      await launch(s.port);
    },
  };
  const launch = async (port: number) => {
    const args = [CLI, '--log-format', 'json', 'serve', '--data', dataDir, '--port', String(port), ...buckets.flatMap((b) => ['--bucket', b]), ...(o.extraArgs ?? [])];
    const env = { ...process.env, ...o.env };
    delete env.SVC_ACCESS_KEY_ID;
    delete env.SVC_SECRET_ACCESS_KEY;
    const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    s.proc = proc;
    proc.stderr!.on('data', (d) => s.logs.push(String(d)));
    const url = await new Promise<string>((ok, ko) => {
      let out = '';
      proc.stdout!.on('data', (d) => {
        out += d;
        s.stdout += d;
        const m = /listening on (\S+)/.exec(out);
        if (m) ok(m[1]);
      });
      proc.once('exit', (code) => ko(new Error(`svcfs serve exited (${code}): ${s.logs.join('')}`)));
    });
    s.url = url;
    s.port = Number(new URL(url).port);
  };
  await launch(0);
  t.teardown(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await s.stop('SIGKILL');
  });
  return s;
}

/**
 * The environment that runs a process with its clock `offset` off (libfaketime's
 * syntax: '+40m', '-1h'), monotonic time left alone; undefined when libfaketime
 * is not installed (scripts/test.sh installs it).
 */
export function clockOffEnv(offset: string): Record<string, string> | undefined {
  const lib = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib']
    .map((d) => path.join(d, 'faketime', 'libfaketimeMT.so.1')).find((f) => fs.existsSync(f));
  return lib && { LD_PRELOAD: lib, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}

export { SVC, AWS };
