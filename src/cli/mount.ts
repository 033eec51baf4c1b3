// `svcfs mount`, `svcfs unmount`, `svcfs status`.
import { spawn, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { dialectByName } from '../wire/dialect';
import { isMounted, MountError, statusSocket } from '../fs/mountpoint';
import { withHugePages } from '../fs/hugepages';
import { cacheDir, loadConfig, loadCredentials, parseMountOptions, UsageError } from './config';
import { LogFormat, makeLogger } from './log';
import { codeCacheStats } from './codecache';

// The client and the filesystem load only in the process that serves the mount: a
// background mount's parent, status and unmount start sooner without them.
const wire = () => require('../wire/client') as typeof import('../wire/client');
const mounting = () => require('../fs/mount') as typeof import('../fs/mount');

export interface MountCliOptions {
  endpoint?: string;
  region?: string;
  dialect?: string;
  signature?: string;
  config?: string;
  foreground?: boolean;
  o: string[];
  credentials?: string;
  profile?: string;
  ca?: string;
  logLevel: string;
  logFile?: string;
  logFormat?: LogFormat;
}

export function parseTarget(t: string): { bucket: string; prefix: string } {
  const at = t.indexOf(':');
  const bucket = at < 0 ? t : t.slice(0, at);
  const prefix = at < 0 ? '' : t.slice(at + 1).replace(/^\/+/, '');
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw new UsageError(`"${bucket}" is not a valid bucket name`);
  return { bucket, prefix };
}

export async function mountCommand(target: string, mountpoint: string, o: MountCliOptions): Promise<void> {
  const pre = parseMountOptions(o.o).passthrough;
  const cfg = loadConfig({ config: o.config, profile: pre.profile ?? o.profile });
  // the config file's options first, so that -o on the command line wins
  const opts = parseMountOptions([...(cfg.options ? [cfg.options] : []), ...o.o]);
  const p = opts.passthrough;
  const endpoint = o.endpoint ?? p.endpoint ?? cfg.endpoint;
  if (!endpoint) throw new UsageError('mount needs --endpoint URL (or -o endpoint=URL)');
  try {
    const u = new URL(endpoint);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new UsageError(`--endpoint must be an http:// or https:// URL, got "${endpoint}"`);
  }
  const { bucket, prefix } = parseTarget(target);
  let dialect;
  try {
    dialect = dialectByName(o.dialect ?? p.dialect ?? cfg.dialect ?? 'svc');
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const signature = o.signature ?? p.signature ?? cfg.signature ?? 'v4';
  const region = o.region ?? p.region ?? cfg.region ?? 'us-east-1';
  if (signature !== 'v4' && signature !== 'v2') throw new UsageError('--signature must be v4 or v2');
  const credentials = loadCredentials({ credentials: p.credentials ?? o.credentials, profile: p.profile ?? o.profile });
  const logFile = p.log_file ?? o.logFile;
  const caFile = p.ca ?? o.ca ?? cfg.ca;
  let ca: Buffer | undefined;
  try {
    ca = caFile ? fs.readFileSync(caFile) : undefined;
  } catch (e) {
    throw new UsageError(`cannot read the CA file ${caFile}: ${(e as Error).message}`);
  }
  if (!o.foreground) return daemonize(target, mountpoint, { ...o, endpoint, region, dialect: dialect.name, signature, ca: caFile && path.resolve(caFile) }, logFile);
  const log = makeLogger(p.log_level ?? o.logLevel, logFile, o.logFormat);
  const client = new (wire().SvcClient)({
    endpoint, credentials, region, dialect, signature, ca, payloadHash: opts.payloadHash,
    // the time budget, not a count, bounds a mount's retries (a server restart takes seconds)
    retryBudgetMs: (opts.retryBudget ?? 60) * 1000, maxAttempts: 1000,
    onRetry: (op, attempt, err) => log.warn({ op, attempt, err: (err as Error).message }, 'retrying'),
    onClockOffset: (ms) => log.warn({ offsetSec: ms / 1000 }, "this machine's clock is off from the store's: requests are signed with the store's time"),
  });
  await mounting().runMount({
    client, endpoint, bucket, prefix, mountpoint, readOnly: opts.readOnly, allowOther: opts.allowOther,
    uid: opts.uid ?? process.getuid!(), gid: opts.gid ?? process.getgid!(), umask: opts.umask ?? 0o022,
    cacheTtlSec: opts.cacheTtl ?? 30, cacheDir: opts.cacheDir ?? cacheDir(), nonEmpty: opts.nonEmpty, syncUnlink: opts.syncUnlink, log,
    writeBackSec: opts.writeBack ?? 0, conflictCheck: opts.conflictCheck, memoryLimitMiB: opts.memoryLimit,
    codeCache: codeCacheStats,
    onReady: () => process.stdout.write(`mounted ${bucket}${prefix ? ':' + prefix : ''} at ${path.resolve(mountpoint)}\n`),
  });
}

/** Default mode: run the mount in a detached child and return once it is up (or failed). */
async function daemonize(target: string, mountpoint: string, o: MountCliOptions, logFile?: string): Promise<void> {
  const log = logFile ?? path.join(cacheDir(), 'logs', `mount-${path.resolve(mountpoint).replace(/[^A-Za-z0-9]+/g, '_')}.log`);
  fs.mkdirSync(path.dirname(log), { recursive: true });
  const args = [process.argv[1], '--log-level', o.logLevel, '--log-file', log, 'mount', target, mountpoint, '--foreground',
    '--region', o.region!, '--dialect', o.dialect!, '--signature', o.signature!, ...o.o.flatMap((x) => ['-o', x])];
  if (o.config) args.push('--config', o.config);
  if (o.endpoint) args.push('--endpoint', o.endpoint);
  if (o.credentials) args.push('--credentials', o.credentials);
  if (o.profile) args.push('--profile', o.profile);
  if (o.ca) args.push('--ca', o.ca);
  const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: withHugePages(process.env) });
  let out = '';
  let err = '';
  const ready = await new Promise<boolean>((ok) => {
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('mounted ')) ok(true);
    });
    child.stderr!.on('data', (d) => { err += d; });
    child.once('exit', () => ok(false));
  });
  if (!ready) throw new MountError(err.trim().replace(/^svcfs: /, '') || `the mount process exited (see ${log})`);
  process.stdout.write(out.split('\n')[0] + ` (pid ${child.pid}, log ${log})\n`);
  child.stdout!.destroy();
  child.stderr!.destroy();
  child.unref();
}

/** Ask the mount process to finish pending uploads and unmount; fall back to fusermount. */
export async function unmountCommand(mountpoint: string, o: { force?: boolean; timeout: number }): Promise<void> {
  const abs = path.resolve(mountpoint);
  if (!isMounted(abs)) throw new MountError(`${abs} is not mounted`);
  let pid: number | undefined;
  try {
    pid = (await getStatus(abs)).pid;
  } catch {
    pid = undefined;
  }
  if (pid && !o.force) {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + o.timeout * 1000;
    let shown = -1;
    while (Date.now() < deadline) {
      let alive = true;
      try {
        process.kill(pid, 0);
      } catch {
        alive = false;
      }
      if (!alive && !isMounted(abs)) return;
      const st = await getStatus(abs).catch(() => undefined);
      if (st && st.pendingUploads !== shown) {
        shown = st.pendingUploads;
        if (shown > 0) process.stderr.write(`waiting for ${shown} pending upload(s), ${st.pendingBytes} bytes\n`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new MountError(`${abs} did not unmount within ${o.timeout}s (pending uploads?); use --force to unmount anyway`);
  }
  const dead = !pid && isDead(abs);
  try {
    execFileSync('fusermount', ['-u', abs], { stdio: 'pipe' });
  } catch {
    execFileSync('umount', ['-l', abs], { stdio: 'pipe' });
  }
  if (dead) {
    process.stdout.write(`${abs} was a dead mount (its svcfs process was gone); unmounted it. ` +
      'Writes it had not uploaded are still in its staging area and go up at the next mount of the same bucket.\n');
  }
}

/** A FUSE mount whose process is gone answers every call with ENOTCONN. */
function isDead(mountpoint: string): boolean {
  try {
    fs.statSync(mountpoint);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOTCONN';
  }
}

export function getStatus(mountpoint: string): Promise<any> {
  return new Promise((ok, ko) => {
    const req = http.get({ socketPath: statusSocket(mountpoint), path: '/status', timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        try {
          ok(JSON.parse(body));
        } catch (e) {
          ko(e);
        }
      });
    });
    req.on('error', ko);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

export async function statusCommand(mountpoint: string, o: { json?: boolean }): Promise<void> {
  const abs = path.resolve(mountpoint);
  let s;
  try {
    s = await getStatus(abs);
  } catch {
    throw new MountError(isMounted(abs) ? `${abs} is mounted, but its svcfs process does not answer` : `${abs} is not an svcfs mount`);
  }
  if (o.json) {
    process.stdout.write(JSON.stringify(s, null, 2) + '\n');
    return;
  }
  const req = Object.entries(s.requests as Record<string, number>).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  const ops = Object.entries((s.operations ?? {}) as Record<string, { count: number; errors: number; avgMs: number; maxMs: number }>);
  const opLine = ops.map(([k, v]) => `${k} ${v.count} (avg ${v.avgMs} ms, max ${v.maxMs} ms${v.errors ? `, ${v.errors} failed` : ''})`).join(', ') || 'none';
  process.stdout.write([
    `${s.mountpoint}: ${s.bucket}${s.prefix ? ':' + s.prefix : ''} at ${s.endpoint} (pid ${s.pid}, up ${s.uptimeSec}s)`,
    `cache: ${s.cache.entries} entries, hit rate ${(s.cache.hitRate * 100).toFixed(1)}% (${s.cache.hits} hits, ${s.cache.misses} misses), ttl ${s.cache.ttlSec}s`,
    `requests: ${req}; retries ${s.retries}${s.clockOffsetSec ? `; signed with the store's clock, ${s.clockOffsetSec} s from this machine's` : ''}`,
    `operations: ${opLine}${s.writesInFuseThread ? `; writes made in the FUSE thread ${s.writesInFuseThread}` : ''}`,
    `memory: ${s.memory.rssMiB} MiB resident (peak ${s.memory.peakRssMiB}); buffers ${(s.buffers.used / 1048576).toFixed(0)} of ${(s.buffers.limit / 1048576).toFixed(0)} MiB in use (peak ${(s.buffers.peak / 1048576).toFixed(0)}); streamed parts ${s.streamedParts}`,
    `open files ${s.openFiles}; pending uploads ${s.pendingUploads} (${s.pendingBytes} bytes); uploads ${s.uploads}, failed ${s.uploadErrors}${s.lastUploadError ? ` (last: ${s.lastUploadError})` : ''}`,
    `deletes behind their unlink ${s.deletesBehind ?? 0} in ${s.deleteBatches ?? 0} batches, on their way ${s.deletesPending ?? 0}, failed ${s.deleteErrors ?? 0}`,
    `write-back ${s.writeBackSec ? `${s.writeBackSec}s` : 'off (upload on close)'}; conflicts kept ${s.conflicts}; revalidated ${s.revalidated}; recovered at start ${s.recovered}`,
    `conflict check: ${s.conditionalWrites}${s.copyKeepsTags === false ? '; the store drops tags when a copy replaces metadata: svcfs carries them over' : ''}`,
  ].join('\n') + '\n');
}
