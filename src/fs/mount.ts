// Running a mount: check the mount point and the bucket, start FUSE with the
// right options, answer `svcfs status` on a local socket, and on SIGINT/SIGTERM
// (or an external unmount) upload what is pending, unmount and exit.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Log } from '../cli/log';
import { SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';
import { ConditionalMode, describeMode, probeConditionalWrites, probeCopyKeepsTags } from './conditional';
import { patched, patchLevel, recordCallers, setFallbackCaller } from './caller';
import { SvcFs } from './filesystem';
import type { WriteAddon } from './offload';
import { hugePagesOn } from './hugepages';
import { Journal, JournalLockedError } from './journal';
import { isMounted, MountError, statusSocket } from './mountpoint';
import { OpStats, operations } from './ops';

// fuse-native ships no types
// eslint-disable-next-line @typescript-eslint/no-var-requires
const Fuse: (new (mnt: string, ops: object, opts: object) => FuseInstance) & { svcfsWindow?: (fd: number, start: number, data: Buffer | null) => void; svcfsForget?: () => void; svcfsNegative?: (ms: number) => void; svcfsRecycle?: (fd: number, dropTo: number, writeFrom: number, writeTo: number) => void } & Partial<WriteAddon> = require('fuse-native');

interface FuseInstance {
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: Error | null) => void): void;
  _fuseOptions(): string;
}

export interface MountConfig {
  client: SvcClient;
  endpoint: string;
  bucket: string;
  prefix: string;
  mountpoint: string;
  readOnly: boolean;
  allowOther: boolean;
  uid: number;
  gid: number;
  umask: number;
  cacheTtlSec: number;
  cacheDir: string;
  /** write-back delay in seconds (0: upload on close) */
  writeBackSec: number;
  conflictCheck: 'on' | 'head' | 'off';
  /** bound of buffer memory in MiB (default DEFAULT_MEMORY_LIMIT) */
  memoryLimitMiB?: number;
  /** allow mounting over a non-empty directory */
  nonEmpty: boolean;
  /** every unlink waits for its own DELETE (else deletes.ts: answered first, sent in batches) */
  syncUnlink?: boolean;
  log: Log;
  /** called once the mount is up (daemon mode tells its parent) */
  onReady?: () => void;
  /** how the process's modules were compiled (src/cli/codecache.ts), for `svcfs status` */
  codeCache?: () => unknown;
}

/** The process's memory in MiB: resident now and at its peak, what V8 and Buffers hold, and the huge pages (asked for, and in use). */
function memoryNow(): { rssMiB: number; peakRssMiB: number; heapMiB: number; buffersMiB: number; hugePages: boolean; hugePagesMiB: number } {
  const MiB = 1024 * 1024;
  const m = process.memoryUsage();
  const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  let huge: RegExpExecArray | null = null;
  try {
    huge = /AnonHugePages:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'));
  } catch { /* a kernel without it */ }
  const r = (n: number) => Math.round(n * 10) / 10;
  return {
    rssMiB: r(m.rss / MiB), peakRssMiB: r(hwm ? Number(hwm[1]) / 1024 : m.rss / MiB), heapMiB: r(m.heapUsed / MiB), buffersMiB: r(m.arrayBuffers / MiB),
    hugePages: hugePagesOn(), hugePagesMiB: huge ? r(Number(huge[1]) / 1024) : 0,
  };
}

function checkMountpoint(c: MountConfig): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(c.mountpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOTCONN') {
      throw new MountError(`${c.mountpoint} is a dead mount (its process is gone: "Transport endpoint is not connected"); clean it up with: svcfs unmount ${c.mountpoint}`);
    }
    throw new MountError(`mount point ${c.mountpoint} does not exist`);
  }
  if (!st.isDirectory()) throw new MountError(`mount point ${c.mountpoint} is not a directory`);
  if (isMounted(c.mountpoint)) throw new MountError(`${c.mountpoint} is already mounted`);
  if (!c.nonEmpty && fs.readdirSync(c.mountpoint).length > 0) throw new MountError(`mount point ${c.mountpoint} is not empty (use -o nonempty to mount over it)`);
}

/** One request to the bucket, to fail early and clearly: unreachable, missing bucket, wrong keys. */
export async function checkBucket(client: SvcClient, endpoint: string, bucket: string): Promise<void> {
  try {
    await client.listPage(bucket, { maxKeys: 1 });
  } catch (e) {
    if (e instanceof SvcError) {
      if (e.code === 'NoSuchBucket') throw new MountError(`bucket "${bucket}" does not exist at ${endpoint}`);
      if (e.code === 'InvalidAccessKeyId') throw new MountError(`the access key ID is not known to ${endpoint} (check SVC_ACCESS_KEY_ID or the credentials file)`);
      if (e.code === 'SignatureDoesNotMatch') throw new MountError(`the secret access key does not match the access key ID (check SVC_SECRET_ACCESS_KEY or the credentials file)`);
      if (e.code === 'RequestTimeTooSkewed') throw new MountError(`this machine's clock differs from the server's by more than 15 minutes`);
      if (e.code === 'AccessDenied') throw new MountError(`access to bucket "${bucket}" is denied for these keys`);
      throw new MountError(`${endpoint}: ${e.code}: ${e.message}`);
    }
    const why = (e as Error).message || (e as Error).name;
    const hint = /certificate|CERT_|self.signed/i.test(why) ? ' (to trust a private CA or a self-signed server, pass its certificate with --ca FILE, or -o ca=FILE)' : '';
    throw new MountError(`cannot reach ${endpoint}: ${why}${hint}`);
  }
}

/** when the probes run if nothing asked for them sooner */
const PROBE_DELAY_MS = 1000;

const TIMEOUTS = {
  default: 60_000,
  // Uploads happen at close and fsync, a directory rename copies every key:
  // these may take as long as the data needs.
  flush: false, fsync: false, release: false, rename: false, truncate: false, ftruncate: false,
  read: 300_000, write: 300_000, open: 120_000, create: 120_000, readdir: 300_000,
};

/** conflict_check=on: what the store really does, found by a probe; head and off as asked. */
async function chooseConditionalMode(c: MountConfig, prefix: string): Promise<ConditionalMode> {
  if (c.conflictCheck === 'off') return { kind: 'off', reason: 'conflict_check=off' };
  if (c.conflictCheck === 'head') return { kind: 'head', reason: 'conflict_check=head' };
  if (c.readOnly) return { kind: 'off', reason: 'read-only mount' };
  return probeConditionalWrites(c.client, c.bucket, prefix, c.log);
}

/** The kernel's read-ahead for this mount, in KiB (its default for FUSE is 128). */
export const READ_AHEAD_KB = 1024;

/**
 * With the default 128 KiB the kernel asks for the next pages only when a
 * reader needs them, so a program that computes between reads (md5sum, gzip)
 * waits for each round trip: cold md5sum of 256 MiB took 1.19 s, 0.91 s with
 * 1 MiB. The knob is the mount's backing device in sysfs, found through
 * /proc/self/mountinfo (never a stat of the mount from the process serving it).
 * Root only; others keep the kernel's default. Raised only, never lowered.
 */
function raiseReadAhead(mountpoint: string, log: Log): void {
  try {
    const target = path.resolve(mountpoint);
    const line = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.split(' ')[4] === target).pop();
    const dev = line?.split(' ')[2];
    if (!dev || !/^\d+:\d+$/.test(dev)) return;
    const knob = `/sys/class/bdi/${dev}/read_ahead_kb`;
    if (Number(fs.readFileSync(knob, 'utf8')) >= READ_AHEAD_KB) return;
    fs.writeFileSync(knob, String(READ_AHEAD_KB));
    log.debug({ dev, kb: READ_AHEAD_KB }, 'read-ahead raised');
  } catch (e) {
    log.debug({ err: (e as Error).message }, 'read-ahead left at the kernel default');
  }
}

export async function runMount(c: MountConfig): Promise<void> {
  checkMountpoint(c);
  await checkBucket(c.client, c.endpoint, c.bucket);
  const key = createHash('sha256').update(`${c.endpoint}\0${c.bucket}\0${c.prefix}`).digest('hex').slice(0, 16);
  const journal = new Journal(path.join(c.cacheDir, key));
  try {
    journal.lock();
  } catch (e) {
    if (e instanceof JournalLockedError) throw new MountError(e.message);
    throw e;
  }
  // The probes (a dozen small requests) run once the mount serves, when an
  // upload or a tag-keeping copy first needs their answer, or PROBE_DELAY_MS
  // after the mount, whichever comes first. Begun before the mount, their CPU
  // delayed it; begun with it, they slowed the first listing by half (ls -l of
  // 500 entries just after the mount: 0.16 -> 0.11 s). A mount that fails leaves
  // no probe keys behind.
  const probePrefix = c.prefix === '' || c.prefix.endsWith('/') ? c.prefix : c.prefix + '/';
  let go!: () => void;
  let probesStarted = false;
  const startProbes = () => {
    if (probesStarted) return;
    probesStarted = true;
    go();
  };
  const wanted = new Promise<void>((ok) => { go = ok; });
  const conditional = wanted.then(() => chooseConditionalMode(c, probePrefix));
  const copyKeepsTags = c.readOnly ? Promise.resolve(true) : wanted.then(() => probeCopyKeepsTags(c.client, c.bucket, probePrefix));
  const probed = Promise.all([conditional, copyKeepsTags]).then(([mode, keeps]) => {
    c.log.info({ mode: describeMode(mode) }, 'conflict check');
    if (!keeps) c.log.info('this store drops tags when a copy replaces metadata: metadata changes carry them over');
  }, (e) => c.log.warn({ err: (e as Error).message }, 'probing the store failed'));
  const fsys = new SvcFs({
    client: c.client, bucket: c.bucket, prefix: c.prefix, uid: c.uid, gid: c.gid, umask: c.umask, readOnly: c.readOnly,
    cacheTtlMs: c.cacheTtlSec * 1000, journal, writeBackMs: c.writeBackSec * 1000, conditional, wantProbes: startProbes, log: c.log, keepCache: patched(), directIo: patchLevel() >= 19,
    readWindow: typeof Fuse.svcfsWindow === 'function' ? Fuse.svcfsWindow : undefined,
    forgetKnown: typeof Fuse.svcfsForget === 'function' ? Fuse.svcfsForget : undefined,
    writeFiles: typeof Fuse.svcfsWriteFile === 'function' ? (Fuse as WriteAddon) : undefined,
    recycle: typeof Fuse.svcfsRecycle === 'function' ? Fuse.svcfsRecycle : undefined,
    memoryLimit: c.memoryLimitMiB ? c.memoryLimitMiB * 1024 * 1024 : undefined, syncUnlink: c.syncUnlink,
  });
  fsys.remote.probed = copyKeepsTags.then((keeps) => { fsys.remote.copyKeepsTags = keeps; });
  // Staged files a crash left behind are served and uploaded before the bucket's versions of those paths.
  const recovered = await fsys.recover();
  const ttl = Math.max(0, c.cacheTtlSec);
  // hard_remove: an unlinked file that is still open is kept by SvcFs itself (libfuse would rename it to .fuse_hidden*)
  const negative = Math.min(ttl, 5);
  const extra = ['big_writes', 'max_write=131072', 'atomic_o_trunc', 'default_permissions', 'hard_remove', `negative_timeout=${negative}`];
  // the addon answers a second lookup of a name just found missing as the kernel would (an O_EXCL create asks again)
  Fuse.svcfsNegative?.(negative * 1000);
  if (c.readOnly) extra.push('ro');
  if (c.nonEmpty) extra.push('nonempty');
  class SvcFuse extends Fuse {
    // fuse-native has no switch for these libfuse options; its option string carries them.
    override _fuseOptions(): string {
      const base: string = super._fuseOptions();
      return (base ? base + ',' : '-o') + extra.join(',');
    }
  }
  const opStats = new OpStats();
  const fuse = new SvcFuse(c.mountpoint, operations(fsys, c.log, opStats), {
    timeout: TIMEOUTS, allowOther: c.allowOther, fsname: `svcfs:${c.bucket}`, subtype: 'svcfs',
    entryTimeout: ttl, attrTimeout: ttl, force: false, mkdir: false,
  });
  setFallbackCaller(c.uid, c.gid);
  if (!recordCallers(fuse as unknown as Parameters<typeof recordCallers>[0])) {
    c.log.warn('fuse-native is not patched (scripts/patch-fuse-native.js): new files belong to the mount\'s owner, whoever creates them');
  }
  await new Promise<void>((ok, ko) => {
    // fuse-native reports the mount at the kernel's INIT; unmounted before that (`fusermount -u`
    // right after the mount appeared), it never would, and this process would wait for ever
    const t0 = Date.now();
    let seen = false;
    const early = setInterval(() => {
      if (isMounted(c.mountpoint)) seen = true;
      else if (seen || Date.now() - t0 > 10_000) {
        clearInterval(early);
        ko(new MountError('unmounted before the mount was ready'));
      }
    }, 50);
    fuse.mount((err: Error | null) => {
      clearInterval(early);
      if (err) ko(new MountError(`mount failed: ${err.message}`));
      else ok();
    });
  });
  // (files recovered from the journal are uploaded at once, and need the probes' answer)
  if (recovered > 0) startProbes();
  else setTimeout(startProbes, PROBE_DELAY_MS).unref();
  c.log.info({ bucket: c.bucket, prefix: c.prefix, mountpoint: c.mountpoint, endpoint: c.endpoint }, 'mounted');
  if (!hugePagesOn()) c.log.info('started without GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (svcfs mount sets it; --foreground under a service manager needs it in the environment): first reads fault memory in page by page, slower on VMs');
  // after the kernel's INIT exchange, which sets the read-ahead to what libfuse 2 negotiates (128 KiB)
  for (const ms of [200, 1000]) setTimeout(() => raiseReadAhead(c.mountpoint, c.log), ms).unref();

  const started = Date.now();
  const status = () => {
    const hits = fsys.cache.hits;
    const misses = fsys.cache.misses;
    return {
      mountpoint: path.resolve(c.mountpoint), bucket: c.bucket, prefix: c.prefix, endpoint: c.endpoint, pid: process.pid,
      uptimeSec: Math.round((Date.now() - started) / 1000),
      cache: { entries: fsys.cache.size, hits, misses, hitRate: hits + misses ? hits / (hits + misses) : 0, ttlSec: c.cacheTtlSec },
      requests: Object.fromEntries([...c.client.counts].sort()),
      retries: c.client.retries,
      clockOffsetSec: c.client.clockOffsetMs / 1000,
      // ranged GETs read in place (null: through undici)
      directGets: c.client.directGets() ?? null,
      operations: opStats.snapshot(),
      memory: memoryNow(),
      codeCache: c.codeCache?.(),
      ...fsys.stats(),
    };
  };
  const sock = statusSocket(c.mountpoint);
  fs.mkdirSync(path.dirname(sock), { recursive: true, mode: 0o700 });
  fs.rmSync(sock, { force: true });
  const control = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    // (what the probes found is part of the answer)
    startProbes();
    void probed.then(() => res.end(JSON.stringify(status())));
  });
  await new Promise<void>((ok) => control.listen(sock, ok));

  let stopping = false;
  const stop = async (why: string, unmount: boolean) => {
    if (stopping) {
      // asked twice (Ctrl-C reaches a whole process group): stop now; what is pending stays journaled for the next mount
      const pending = fsys.stats().pendingUploads;
      if (pending > 0) c.log.warn({ pending }, 'stopping without waiting for pending uploads; they stay in the journal and go up at the next mount');
      if (unmount) fuse.unmount(() => process.exit(1));
      setTimeout(() => process.exit(1), 2000);
      return;
    }
    stopping = true;
    clearInterval(watch);
    c.log.info({ why }, 'stopping: uploading what is pending');
    const failed = await fsys.flushAll((left) => c.log.info({ left }, 'pending uploads'));
    // a probe still running removes its scratch keys before the process goes (one never started needs nothing)
    if (probesStarted) await Promise.race([probed, new Promise((ok) => setTimeout(ok, 10_000))]);
    if (failed.length) c.log.error({ failed }, 'uploads failed; the data stays in the staging area');
    if (unmount) {
      await new Promise<void>((ok) => fuse.unmount((err: Error | null) => {
        if (err) c.log.error({ err: err.message }, 'unmount failed');
        ok();
      }));
    }
    control.close();
    fs.rmSync(sock, { force: true });
    journal.unlock();
    await c.client.close().catch(() => undefined);
    c.log.info('unmounted');
    c.log.flush?.();
    setTimeout(() => process.exit(failed.length ? 1 : 0), 50);
  };
  process.on('SIGINT', () => void stop('SIGINT', true));
  process.on('SIGTERM', () => void stop('SIGTERM', true));
  // `fusermount -u` from outside: notice, finish, exit.
  const watch = setInterval(() => {
    if (!isMounted(c.mountpoint)) void stop('unmounted from outside', false);
  }, 1000);
  c.onReady?.();
}
