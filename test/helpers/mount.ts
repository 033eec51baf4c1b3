// Run `svcfs mount --foreground` as a separate process (as users do) and drive
// the mount with real commands. Teardown always unmounts, also on failure.
import { ChildProcess, execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { promisify } from 'node:util';
import { ADMIN, CLI, TestServer, tmpDir } from './server';
import { withHugePages } from '../../src/fs/hugepages';

const execFileP = promisify(execFile);

export interface TestMount {
  mnt: string;
  cacheDir: string;
  proc: ChildProcess;
  logs: string[];
  status(): Promise<any>;
  stop(): Promise<void>;
}

function mounted(mnt: string): boolean {
  return fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === mnt);
}

/** Unmount whatever is left at mnt: fusermount -u, then umount -l. */
export async function forceUnmount(mnt: string): Promise<void> {
  if (!mounted(mnt)) return;
  await execFileP('fusermount', ['-u', mnt]).catch(() => undefined);
  if (mounted(mnt)) await execFileP('umount', ['-l', mnt]).catch(() => undefined);
}

interface Tap {
  teardown(fn: () => unknown): void;
}

export interface MountOptions {
  target?: string;
  options?: string[];
  args?: string[];
  /** talk to this URL instead of the server's own (a fault proxy) */
  endpoint?: string;
  /** reuse a cache directory (to remount after a crash) and a mount point */
  cacheDir?: string;
  mnt?: string;
  /** more environment for the mount process */
  env?: Record<string, string>;
}

/** What a mount talks to: a TestServer (bucket `test`), or a Backend (its bucket, keys and dialect). */
export interface MountTarget {
  url: string;
  bucket?: string;
  creds?: { accessKeyId: string; secretAccessKey: string };
  mountArgs?: string[];
}

export async function startMount(t: Tap, s: MountTarget | TestServer, o: MountOptions = {}): Promise<TestMount> {
  const b = s as MountTarget;
  const mnt = o.mnt ?? tmpDir('mnt');
  const cache = o.cacheDir ?? tmpDir('cache');
  const options = ['cache_ttl=2', `cache_dir=${cache}`, 'retry_budget=3', ...(o.options ?? [])];
  const creds = b.creds ?? ADMIN;
  // (in the environment `svcfs mount` gives the mount process it starts)
  const env = withHugePages({ ...process.env, SVC_ACCESS_KEY_ID: creds.accessKeyId, SVC_SECRET_ACCESS_KEY: creds.secretAccessKey, ...o.env });
  const proc = spawn(process.execPath, [CLI, '--log-level', 'debug', '--log-format', 'json', 'mount', o.target ?? b.bucket ?? 'test', mnt, '--endpoint', o.endpoint ?? s.url, '--foreground',
    '-o', options.join(','), ...(b.mountArgs ?? []), ...(o.args ?? [])], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  proc.stderr!.on('data', (d) => logs.push(String(d)));
  const m: TestMount = {
    mnt, cacheDir: cache, proc, logs,
    status: async () => JSON.parse((await execFileP(process.execPath, [CLI, 'status', mnt, '--json'])).stdout),
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      }
      await forceUnmount(mnt);
    },
  };
  t.teardown(async () => {
    await m.stop();
    if (!o.mnt) fs.rmSync(mnt, { recursive: true, force: true });
    if (!o.cacheDir) fs.rmSync(cache, { recursive: true, force: true });
  });
  await new Promise<void>((ok, ko) => {
    let out = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('mounted ')) ok();
    });
    proc.once('exit', (code) => ko(new Error(`svcfs mount exited (${code}): ${logs.join('')}`)));
  });
  return m;
}

/** Run a command; resolves with stdout, rejects with stderr on failure. */
export async function sh(cmd: string, opts: { cwd?: string; timeout?: number } = {}): Promise<string> {
  const r = await execFileP('bash', ['-c', cmd], { cwd: opts.cwd, timeout: opts.timeout ?? 300_000, maxBuffer: 64 * 1024 * 1024 });
  return r.stdout;
}

/** Run a command and return its exit code and output, without throwing. */
export async function shStatus(cmd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await execFileP('bash', ['-c', cmd], { timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e: any) {
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Stepper {
  /** settles once the script has called said(name) */
  reached(name: string): Promise<void>;
  /** lets the script past wait(name) */
  go(name: string): void;
  done: Promise<{ code: number; stdout: string; stderr: string }>;
}

/**
 * A Python script in its own process that the test drives step by step:
 * `said(name)` tells the test it got somewhere, `wait(name)` blocks until the
 * test calls go(name). For writes that must be caught half-way (a file still
 * open while something happens to the mount or the server).
 */
export function stepper(script: string): Stepper {
  const dir = tmpDir('step');
  const prelude = [
    'import os, sys, time',
    `D = ${JSON.stringify(dir)}`,
    'def said(n): open(os.path.join(D, n), "w").close()',
    'def wait(n):',
    '    while not os.path.exists(os.path.join(D, n)): time.sleep(0.02)',
  ].join('\n');
  fs.writeFileSync(`${dir}/script.py`, `${prelude}\n${script}\n`);
  const done = shStatus(`python3 ${dir}/script.py`).finally(() => fs.rmSync(dir, { recursive: true, force: true }));
  let finished = false;
  void done.then(() => { finished = true; });
  return {
    reached: async (name) => {
      while (!fs.existsSync(`${dir}/${name}`)) {
        if (finished) throw new Error(`the script ended before ${name}: ${(await done).stderr}`);
        await sleep(20);
      }
    },
    go: (name) => fs.writeFileSync(`${dir}/${name}`, ''),
    done,
  };
}
