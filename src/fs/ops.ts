// The FUSE operation table: each handler only adapts fuse-native's callback
// convention to a SvcFs method (errors become negative errno values). Handlers
// that create entries read the caller synchronously, before any await.
import type { Log } from '../cli/log';
import { STAT_INTS, toStat, writeStat } from './attrs';
import { caller } from './caller';
import { E, toErrno } from './errors';
import { SvcFs } from './filesystem';

/**
 * The attributes of a listing's entries in fuse-native's array form, STAT_INTS
 * per entry in one array (the patched addon takes it whole; all zero: not known).
 */
function knownStats(fs: SvcFs, path: string, names: string[]): Uint32Array {
  const all = new Uint32Array(names.length * STAT_INTS);
  names.forEach((n, i) => {
    const a = n === '.' || n === '..' ? undefined : fs.known(path === '/' ? `/${n}` : `${path}/${n}`);
    if (a) writeStat(a, all, i * STAT_INTS);
  });
  return all;
}

type Cb = (code: number, ...rest: any[]) => void;

export interface OpSummary {
  count: number;
  /** answers other than success, ENOENT and ENODATA (which are ordinary answers) */
  errors: number;
  avgMs: number;
  maxMs: number;
}

/** Count, errors and latency of each FUSE operation, for `svcfs status`. */
export class OpStats {
  private readonly ops = new Map<string, { count: number; errors: number; totalMs: number; maxMs: number }>();

  record(op: string, ms: number, errno = 0): void {
    let o = this.ops.get(op);
    if (!o) this.ops.set(op, (o = { count: 0, errors: 0, totalMs: 0, maxMs: 0 }));
    o.count++;
    o.totalMs += ms;
    if (ms > o.maxMs) o.maxMs = ms;
    if (errno < 0 && errno !== -E.ENOENT && errno !== -E.ENODATA) o.errors++;
  }

  snapshot(): Record<string, OpSummary> {
    const out: Record<string, OpSummary> = {};
    for (const [op, o] of [...this.ops].sort((a, b) => b[1].count - a[1].count)) {
      out[op] = { count: o.count, errors: o.errors, avgMs: Math.round((o.totalMs / o.count) * 100) / 100, maxMs: o.maxMs };
    }
    return out;
  }
}

export function operations(fs: SvcFs, log: Log, stats = new OpStats()): Record<string, (...args: any[]) => void> {
  /** Run an operation; answer cb(0, result) or cb(-errno). */
  const run = <T>(op: string, path: string, cb: Cb, f: () => Promise<T>, ok: (r: T) => unknown[] = (r) => (r === undefined ? [] : [r])) => {
    const started = Date.now();
    f().then(
      (r) => {
        stats.record(op, Date.now() - started);
        cb(0, ...ok(r));
      },
      (e) => {
        const errno = toErrno(e);
        stats.record(op, Date.now() - started, errno);
        if (errno !== -E.ENOENT && errno !== -E.ENODATA) log.debug({ op, path, errno, err: (e as Error).message, ms: Date.now() - started }, 'operation failed');
        cb(errno);
      },
    );
  };
  // read/write answer with a byte count where other operations answer 0
  const io = (op: string, path: string, cb: Cb, f: () => Promise<number>) => {
    const started = Date.now();
    f().then((n) => {
      stats.record(op, Date.now() - started);
      cb(n);
    }, (e) => {
      const errno = toErrno(e);
      stats.record(op, Date.now() - started, errno);
      log.debug({ op, path, err: (e as Error).message }, 'operation failed');
      cb(errno);
    });
  };

  return {
    init: (cb: Cb) => cb(0),
    access: (path: string, _mode: number, cb: Cb) => run('access', path, cb, () => fs.getattr(path), () => []),
    statfs: (_path: string, cb: Cb) => cb(0, { bsize: 1 << 20, frsize: 1 << 20, blocks: 1 << 30, bfree: 1 << 30, bavail: 1 << 30, files: 1 << 30, ffree: 1 << 30, favail: 1 << 30, fsid: 0, flag: 0, namemax: 255 }),
    getattr: (path: string, cb: Cb) => run('getattr', path, cb, () => fs.getattr(path), (a) => [toStat(a)]),
    fgetattr: (path: string, fd: number, cb: Cb) => run('fgetattr', path, cb, () => fs.fgetattr(path, fd), (a) => [toStat(a)]),
    // with each entry, its attributes when the cache holds them (mode 0: none), for the lookups that follow
    readdir: (path: string, cb: Cb) => run('readdir', path, cb, () => fs.readdir(path), (names) => [names, knownStats(fs, path, names)]),
    open: (path: string, flags: number, cb: Cb) => run('open', path, cb, () => fs.open(path, flags), (fd) => [fd]),
    // (these four hand the addon the attributes they leave behind: fs.afterChange)
    create: (path: string, mode: number, cb: Cb) => run('create', path, cb, () => fs.create(path, mode, caller()), (fd) => [fd, fs.afterChange(path)]),
    read: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => io('read', path, cb, () => fs.read(fd, buf, len, pos)),
    write: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => io('write', path, cb, () => fs.write(fd, buf, len, pos)),
    flush: (path: string, fd: number, cb: Cb) => run('flush', path, cb, () => fs.flush(fd), () => []),
    fsync: (path: string, _datasync: boolean, fd: number, cb: Cb) => run('fsync', path, cb, () => fs.flush(fd), () => []),
    fsyncdir: (path: string, _datasync: boolean, _fd: number, cb: Cb) => run('fsyncdir', path, cb, () => fs.fsyncdir(path), () => []),
    release: (path: string, fd: number, cb: Cb) => run('release', path, cb, () => fs.release(fd), () => []),
    truncate: (path: string, size: number, cb: Cb) => run('truncate', path, cb, () => fs.truncate(path, size), () => []),
    ftruncate: (path: string, fd: number, size: number, cb: Cb) => run('ftruncate', path, cb, () => fs.ftruncate(fd, size), () => []),
    unlink: (path: string, cb: Cb) => run('unlink', path, cb, () => fs.unlink(path), () => [fs.afterChange(path)]),
    mkdir: (path: string, mode: number, cb: Cb) => run('mkdir', path, cb, () => fs.mkdir(path, mode, caller()), () => [fs.afterMkdir(path)]),
    mknod: (path: string, mode: number, dev: number, cb: Cb) => run('mknod', path, cb, () => fs.mknod(path, mode, dev, caller()), () => []),
    link: (from: string, to: string, cb: Cb) => run('link', to, cb, () => fs.link(from, to), () => []),
    rmdir: (path: string, cb: Cb) => run('rmdir', path, cb, () => fs.rmdir(path), () => [fs.afterChange(path)]),
    rename: (src: string, dest: string, cb: Cb) => run('rename', src, cb, () => fs.rename(src, dest), () => []),
    chmod: (path: string, mode: number, cb: Cb) => run('chmod', path, cb, () => fs.meta.chmod(path, mode), () => []),
    chown: (path: string, uid: number, gid: number, cb: Cb) => run('chown', path, cb, () => fs.meta.chown(path, uid, gid), () => []),
    utimens: (path: string, atime: number, mtime: number, cb: Cb) => run('utimens', path, cb, () => fs.meta.utimens(path, atime, mtime), () => []),
    symlink: (target: string, path: string, cb: Cb) => run('symlink', path, cb, () => fs.symlink(target, path, caller()), () => []),
    readlink: (path: string, cb: Cb) => run('readlink', path, cb, () => fs.readlink(path), (t) => [t]),
    getxattr: (path: string, name: string, _pos: number, cb: Cb) => run('getxattr', path, cb, () => fs.meta.getxattr(path, name), (v) => [v]),
    listxattr: (path: string, cb: Cb) => run('listxattr', path, cb, () => fs.meta.listxattr(path), (l) => [l]),
    setxattr: (path: string, name: string, value: Buffer, _pos: number, _flags: number, cb: Cb) =>
      run('setxattr', path, cb, () => fs.meta.setxattr(path, name, Buffer.from(value)), () => []),
    removexattr: (path: string, name: string, cb: Cb) => run('removexattr', path, cb, () => fs.meta.removexattr(path, name), () => []),
    opendir: (_path: string, _flags: number, cb: Cb) => cb(0, 0),
    releasedir: (_path: string, _fd: number, cb: Cb) => cb(0),
  };
}
