// The filesystem's behaviour, one method per operation, promise-based and
// free of FUSE calling conventions (ops.ts adapts them). Paths are FUSE
// paths ('/a/b'); the Remote maps them to keys.
import { constants as C } from 'node:fs';
import type { Log } from '../cli/log';
import { Slots, SvcClient } from '../wire/client';
import { Attr, AttrDefaults, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, STAT_INTS, isSpecialType, metaFromAttr, writeStat } from './attrs';
import { MetaCache } from './cache';
import { Caller, DIRECT_IO, HANDLE_LIMIT, KEEP_CACHE } from './caller';
import { contentTypeFor } from './mime';
import { DirTimes, KEY_MAX, checkName, newOwner, parentOf } from './posix';
import { E, fsError } from './errors';
import { PageCacheKeeper, Reader, ReaderTuning, DEFAULT_TUNING } from './reader';
import { Remote } from './remote';
import { ConditionalMode } from './conditional';
import { Journal } from './journal';
import { Metadata } from './metadata';
import { Staged } from './staged';
import { WriteAddon, WriteOffload } from './offload';
import { UploadTuning } from './uploader';
import { MemoryBudget } from './budget';
import { DeleteBehind, DeleteStats } from './deletes';

/** Default bound of buffer memory: with Node's own ~90 MiB, the mount stays under 200 MiB resident. */
export const DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024;
import { Writer, WriterStats } from './writer';

/** how long the addon may use attributes readdir handed it (SVCFS_AC_LIFE_NS in scripts/patch-fuse-native.js) */
const FUSE_ATTR_LIFE_MS = 20_000;

/**
 * An open for reading confirms what the mount knows of the file when that is
 * older than this (one conditional HEAD): a file another client replaced
 * within the TTL is then read whole, not refused or cut at the old size.
 */
const OPEN_CONFIRM_MS = 1000;

/** the addon's mark of a directory made here ends this much before the directory's listing in the cache */
const COMPLETE_MARGIN_MS = 250;

export interface FsOptions {
  client: SvcClient;
  bucket: string;
  prefix: string;
  uid: number;
  gid: number;
  umask: number;
  readOnly: boolean;
  cacheTtlMs: number;
  journal: Journal;
  /** write-back: close returns once staged and journaled; the upload follows after this delay (0: upload on close) */
  writeBackMs: number;
  /**
   * Keep both versions when another writer got there first: conditional
   * uploads where the store honours them (probed at mount), else a HEAD
   * comparing ETags first; 'off' lets the last writer win.
   */
  conditional: ConditionalMode | Promise<ConditionalMode>;
  /** asks the mount to run its store probes now (an upload or a tag-keeping copy needs their answer) */
  wantProbes?: () => void;
  log: Log;
  upload?: UploadTuning;
  reader?: ReaderTuning;
  /** the addon can keep the kernel's page cache of a file across opens (patched fuse-native) */
  keepCache?: boolean;
  /** the addon can open a handle for direct I/O (patch 16 of fuse-native) */
  directIo?: boolean;
  /** hands the addon the chunk of an open file its last read came from (patched fuse-native: Fuse.svcfsWindow) */
  readWindow?: (fd: number, start: number, data: Buffer | null) => void;
  /** empties the addon's table of attributes (patched fuse-native: Fuse.svcfsForget) */
  forgetKnown?: () => void;
  /** bytes all read-ahead chunks and upload parts may hold together (-o memory_limit) */
  memoryLimit?: number;
  /** the addon writes a handle's data into its staging file itself (patched fuse-native: Fuse.svcfsWriteFile, offload.ts) */
  writeFiles?: WriteAddon;
  /** staging files' uploaded fronts leave the page cache (patched fuse-native: Fuse.svcfsRecycle; Writer.recycle) */
  recycle?: (fd: number, dropTo: number, writeFrom: number, writeTo: number) => void;
  /** every unlink waits for its own DELETE (-o sync_unlink; else deletes.ts) */
  syncUnlink?: boolean;
}

interface Handle {
  path: string;
  flags: number;
  staged?: Staged;
  reader?: Reader;
  /** attributes at open (what fstat answers once the file is unlinked) */
  attr?: Attr;
}

export interface FsStats extends WriterStats, DeleteStats {
  openFiles: number;
  /** writes the addon made into staging files without a hop here (offload.ts) */
  writesInFuseThread: number;
  /** the memory budget of buffers: limit, in use, peak (bytes) */
  buffers: { limit: number; used: number; peak: number; waiting: number };
  copyKeepsTags: boolean;
  revalidated: number;
}

export class SvcFs {
  readonly remote: Remote;
  readonly cache: MetaCache;
  private readonly client: SvcClient;
  private readonly log: Log;
  private readonly handles = new Map<number, Handle>();
  readonly writer: Writer;
  /** chmod, chown, utimens and extended attributes */
  readonly meta: Metadata;
  private readonly links = new Map<string, { etag?: string; target: string }>();
  private nextFd = 1;
  private readonly defaults: AttrDefaults;
  private revalidated = 0;
  /** files found at open with another size than the kernel may still hold, until its attribute timeout: read with direct I/O */
  private readonly resized = new Map<string, number>();
  /** HEADs completing entries that a listing gave without metadata: one per path, 16 at a time */
  private readonly completing = new Map<string, Promise<Attr | null>>();
  private readonly headSlots = new Slots(16);
  private readonly dirTimes = new DirTimes();
  private readonly pages: PageCacheKeeper;
  /** the mount root has no object of its own: chmod, chown and utimens of it last as long as the mount */
  private root?: Attr;
  /** files unlinked while open for reading: their objects go when the last reader closes */
  private readonly orphans = new Map<string, string>();
  private readonly budget: MemoryBudget;
  readonly offload?: WriteOffload;
  /** unlinks whose DELETE is on its way (deletes.ts) */
  private readonly deletes: DeleteBehind;

  constructor(private readonly o: FsOptions) {
    this.client = o.client;
    this.log = o.log;
    this.defaults = { uid: o.uid, gid: o.gid, umask: o.umask, mountTime: Date.now() };
    this.remote = new Remote(o.client, o.bucket, o.prefix, this.defaults);
    this.remote.wantProbes = o.wantProbes;
    this.cache = new MetaCache(o.cacheTtlMs);
    this.pages = new PageCacheKeeper(o.keepCache === true);
    this.budget = new MemoryBudget(o.memoryLimit ?? DEFAULT_MEMORY_LIMIT);
    this.writer = new Writer({
      client: o.client, remote: this.remote, cache: this.cache, journal: o.journal, log: o.log, writeBackMs: o.writeBackMs,
      conditional: o.conditional, wantProbes: o.wantProbes, upload: o.upload, budget: this.budget, treeChanged: o.forgetKnown,
      // pages of a file written here (write-through) hold what was uploaded: the next read may keep them
      uploaded: (path, etag) => this.pages.note(path, etag),
      recycle: o.recycle,
    });
    if (o.writeFiles) this.offload = new WriteOffload(o.writeFiles, (st) => this.writer.touched(st));
    this.deletes = new DeleteBehind({
      client: o.client, bucket: o.bucket, log: o.log, enabled: !o.syncUnlink,
      failed: (path) => {
        this.cache.invalidate(path);
        this.cache.invalidateParent(path);
        o.forgetKnown?.();
      },
    });
    this.meta = new Metadata({
      client: o.client, bucket: o.bucket, remote: this.remote, cache: this.cache, writer: this.writer, dirTimes: this.dirTimes,
      getattr: (p) => this.getattr(p), writable: () => this.writable(), changing: (p) => this.changing(p), setRoot: (a) => { this.root = a; },
    });
  }

  private writable(): void {
    if (this.o.readOnly) throw fsError(E.EROFS);
  }

  private key(path: string): string {
    return this.remote.key(path);
  }

  // ---- attributes ----

  private stagedAttr(st: Staged): Attr {
    return { ...st.attr, kind: 'file', size: st.size };
  }

  /** Attributes of a path, or null: staged files first, then the cache, then the bucket. */
  async lookup(path: string): Promise<Attr | null> {
    checkName(path, this.key(path));
    if (this.orphans.has(path)) return null;
    const a = await this.find(path);
    return a && a.kind === 'dir' ? this.dirTimes.apply(path, a) : a;
  }

  private async find(path: string): Promise<Attr | null> {
    if (path === '/' && this.root) return this.root;
    const st = this.writer.get(path);
    if (st) return this.stagedAttr(st);
    if (this.deletes.size && this.deletes.has(this.key(path))) return null;
    const cached = this.cache.get(path);
    if (cached?.partial) return this.complete(path, cached);
    if (cached !== undefined) return cached;
    // (a directory is there while keys below it are)
    if (this.deletes.size) await this.deletes.settledBelow(this.remote.dirKey(path));
    const a = (await this.revalidate(path)) ?? (await this.remote.stat(path));
    if (a) this.cache.set(path, a);
    else this.cache.setMissing(path);
    return a;
  }

  /**
   * An entry past its TTL that was a file (or one an open confirms): one
   * conditional HEAD (304 means it is unchanged, and `prev` comes back) instead
   * of a full lookup. Undefined when that does not settle it.
   */
  private async revalidate(path: string, prev = this.cache.lastKnown(path)): Promise<Attr | undefined> {
    if (!prev || prev.kind === 'dir' || !prev.etag) return undefined;
    const r = await this.client.head(this.o.bucket, this.key(path), { ifNoneMatch: prev.etag });
    if (r === 'not-modified') {
      this.revalidated++;
      return prev;
    }
    return r ? this.remote.attrOf(r) : undefined;
  }

  /** An entry from a listing without metadata, made whole by a HEAD (shared by concurrent callers). */
  private complete(path: string, a: Attr): Promise<Attr | null> {
    let p = this.completing.get(path);
    if (!p) {
      p = (async () => {
        await this.headSlots.take();
        try {
          const full = await this.remote.complete(path, a);
          if (this.completing.get(path) === p) {
            if (full) this.cache.set(path, full);
            else this.cache.setMissing(path);
          }
          return full;
        } finally {
          this.headSlots.give();
          if (this.completing.get(path) === p) this.completing.delete(path);
        }
      })();
      this.completing.set(path, p);
    }
    return p;
  }

  /** This mount changes these paths: its own attributes win over a HEAD still in flight. */
  private changing(...paths: string[]): void {
    for (const p of paths) this.completing.delete(p);
  }

  async getattr(path: string): Promise<Attr> {
    const a = await this.lookup(path);
    if (!a) throw fsError(E.ENOENT);
    return a;
  }

  /** fstat(2): from the open file, which may have been unlinked (nlink 0) and then has no path. */
  async fgetattr(path: string, fd: number): Promise<Attr> {
    const h = this.handles.get(fd);
    if (!h) return this.getattr(path);
    if (h.staged) return { ...this.stagedAttr(h.staged), ...(h.staged.deleted ? { nlink: 0 } : {}) };
    if (this.orphans.has(h.path) || path === '') return { ...h.attr!, nlink: 0 };
    return this.getattr(h.path);
  }

  /**
   * What getattr of a path would answer from the cache alone, when that stays
   * true for FUSE_ATTR_LIFE_MS more: readdir hands these to the FUSE layer, which
   * answers the lookup that follows (`ls -l`) without a trip to JavaScript.
   * Undefined for files being written, completions and anything uncached.
   */
  known(path: string): Attr | undefined {
    if (this.orphans.has(path) || this.writer.get(path)) return undefined;
    const a = this.cache.fresh(path, FUSE_ATTR_LIFE_MS);
    if (!a || a.partial) return undefined;
    return a.kind === 'dir' ? this.dirTimes.apply(path, a) : a;
  }

  /**
   * What create, mkdir, unlink and rmdir hand the addon as they end: the
   * attributes of the path (when it still exists) and of its parent, where the
   * cache keeps them FUSE_ATTR_LIFE_MS more, in fuse-native's array form
   * (zeros: not known). libfuse's lookup after create and the kernel's
   * permission check of the directory that follows then need no hop here.
   */
  afterChange(path: string): Uint32Array | undefined {
    const st = this.writer.get(path);
    // a file just created is what its staged file says until the next change (which empties the addon's table)
    const self = st ? this.stagedAttr(st) : this.known(path);
    const parent = path === '/' ? undefined : this.known(parentOf(path));
    if (!self && !parent) return undefined;
    const out = new Uint32Array(2 * STAT_INTS);
    if (self) writeStat(self, out, 0);
    if (parent) writeStat(parent, out, STAT_INTS);
    return out;
  }

  /**
   * mkdir's hand-back: afterChange's two blocks, then (patched fuse-native 17)
   * how long the new directory's listing, empty, stays cached, and the
   * longest path the store takes a key for: until then the addon answers
   * lookups of names this mount did not make there ENOENT, as lookup would.
   * Nothing when something is staged below the path (a file recovered from the
   * journal is there for lookup, not in the listing).
   */
  afterMkdir(path: string): Uint32Array {
    const out = new Uint32Array(3 * STAT_INTS);
    const two = this.afterChange(path);
    if (two) out.set(two);
    // (the addon's mark ends a little before the listing, never after it)
    const ms = this.cache.listingLeftMs(path) - COMPLETE_MARGIN_MS;
    if (ms > 0 && !this.writer.hasBelow(path)) {
      out[2 * STAT_INTS] = Math.min(ms, 0x7fffffff);
      out[2 * STAT_INTS + 1] = KEY_MAX + 1 - Buffer.byteLength(this.key('/'));
    }
    return out;
  }

  async readdir(path: string): Promise<string[]> {
    let entries = this.cache.listing(path)?.entries;
    if (!entries) {
      const a = await this.lookup(path);
      if (!a) throw fsError(E.ENOENT);
      if (a.kind !== 'dir') throw fsError(E.ENOTDIR);
      await this.deletes.settledBelow(this.remote.dirKey(path));
      entries = await this.remote.list(path);
      this.cache.setListing(path, entries);
      // `ls -l` asks for each entry next: complete what the listing left partial ahead of it (bounded)
      let ahead = 0;
      for (const [name, a] of entries) {
        if (!a.partial || ahead++ >= 1000) continue;
        void this.complete(path === '/' ? `/${name}` : `${path}/${name}`, a).catch(() => undefined);
      }
    }
    const names = new Set(entries.keys());
    const pre = path === '/' ? '/' : path + '/';
    for (const p of this.orphans.keys()) if (p.startsWith(pre)) names.delete(p.slice(pre.length));
    for (const [p, st] of this.writer.entries()) {
      const rest = p.slice(pre.length);
      if (!p.startsWith(pre) || rest.includes('/')) continue;
      if (st.deleted) names.delete(rest);
      else names.add(rest);
    }
    return ['.', '..', ...names];
  }

  // ---- open files ----

  private addHandle(h: Handle): number {
    // handles stay below the bits open adds for the addon (KEEP_CACHE, DIRECT_IO)
    while (this.handles.has(this.nextFd)) this.nextFd = (this.nextFd % (HANDLE_LIMIT - 1)) + 1;
    const fd = this.nextFd;
    this.nextFd = (this.nextFd % (HANDLE_LIMIT - 1)) + 1;
    this.handles.set(fd, h);
    return fd;
  }

  private handle(fd: number): Handle {
    const h = this.handles.get(fd);
    if (!h) throw fsError(E.EBADF);
    return h;
  }

  async open(path: string, flags: number): Promise<number> {
    const write = (flags & 3) !== C.O_RDONLY;
    if (write) this.writable();
    const st = this.writer.get(path);
    if (!write) {
      if (st) {
        st.refs++;
        const fd = this.addHandle({ path, flags, staged: st });
        // an uploaded, unchanged staged file holds its object's bytes: pages read through it are that
        // ETag's (close(2) returns before the kernel's RELEASE, so the next open can land here)
        return !st.dirty && this.pages.keep(path, st.attr.etag) ? fd | KEEP_CACHE : fd;
      }
      const a = await this.confirmAtOpen(path, await this.getattr(path));
      if (a.kind === 'dir') throw fsError(E.EISDIR);
      const reader = new Reader(this.client, this.o.bucket, this.key(path), a.size, a.etag, this.o.reader ?? DEFAULT_TUNING, this.budget);
      const fd = this.addHandle({ path, flags, attr: a, reader });
      const win = this.o.readWindow;
      if (win) reader.onWindow = (start, data) => win(fd, start, data);
      if (this.kernelSizeStale(path)) {
        this.pages.forget(path);
        return fd | DIRECT_IO;
      }
      return this.pages.keep(path, a.etag) ? fd | KEEP_CACHE : fd;
    }
    this.pages.forget(path);
    const a = st ? this.stagedAttr(st) : await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    const s = await this.writer.stage(path, a);
    s.refs++;
    if (flags & C.O_TRUNC) await s.truncate(0);
    return this.offloaded(this.addHandle({ path, flags, staged: s }));
  }

  /**
   * What the mount knows of a file, confirmed with the store when older than
   * OPEN_CONFIRM_MS (304: unchanged). Only for reading: a writer's appends
   * would land where the kernel's old size says, so a write open keeps the
   * known version (its upload then meets the change as a conflict).
   */
  private async confirmAtOpen(path: string, a: Attr): Promise<Attr> {
    if (a.kind !== 'file' || !a.etag) return a;
    const age = this.cache.age(path);
    // (no age: just fetched, or no cache)
    if (age === undefined || age < OPEN_CONFIRM_MS) return a;
    const current = await this.revalidate(path, a);
    // the cache's entry starts again: confirmed now
    if (current === a) {
      this.cache.set(path, a);
      return a;
    }
    // (the addon's table may answer the next getattr with the old attributes)
    this.o.forgetKnown?.();
    if (!current) {
      this.cache.setMissing(path);
      throw fsError(E.ENOENT);
    }
    this.cache.set(path, current);
    // The kernel keeps the size it was given for its attribute timeout (the TTL): it would cut reads
    // there, or fill what a shorter file lacks with zeros. Direct reads end where the file ends.
    if (current.size !== a.size && this.o.directIo) {
      const t = Date.now();
      if (this.resized.size >= 1024) for (const [p, until] of this.resized) if (until <= t) this.resized.delete(p);
      this.resized.set(path, t + this.cache.ttlMs);
    }
    return current;
  }

  /** Might the kernel still hold another size than the file has (see confirmAtOpen)? */
  private kernelSizeStale(path: string): boolean {
    const until = this.resized.get(path);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.resized.delete(path);
    return false;
  }

  /** A handle writing a file with no byte left to fetch has its writes made by the addon (offload.ts), unless it appends. */
  private offloaded(fd: number): number {
    const h = this.handles.get(fd)!;
    if (this.offload && h.staged && !h.staged.hasBaseBytes && !(h.flags & C.O_APPEND)) this.offload.attach(fd, h.staged);
    return fd;
  }

  async create(path: string, mode: number, who: Caller): Promise<number> {
    this.changing(path);
    this.writable();
    checkName(path, this.key(path));
    const now = Date.now();
    const owner = newOwner(await this.parentAttr(path), who, S_IFREG | (mode & 0o7777));
    const attr: Attr = { kind: 'file', ...owner, size: 0, mtime: now, ctime: now, meta: {}, fromMeta: true };
    // (its upload must not meet a DELETE of the name's last object still on the way)
    await this.deletes.settled(this.key(path));
    const st = await this.writer.create(path, attr);
    st.refs++;
    this.born(path);
    this.cache.set(path, attr);
    return this.offloaded(this.addHandle({ path, flags: C.O_RDWR, staged: st }));
  }

  /**
   * The parent of a new entry (for its set-group-ID bit), as known; the kernel
   * looked it up just before. Not worth failing the creation over: unknown
   * counts as a plain directory.
   */
  private async parentAttr(path: string): Promise<Attr | null> {
    const parent = parentOf(path);
    return this.cache.get(parent) ?? (await this.lookup(parent).catch(() => null));
  }

  /** A new entry at path: an orphan of the same name stays invisible, the parent's times move. */
  private born(path: string): void {
    this.orphans.delete(path);
    this.dirTimes.touch(parentOf(path));
  }

  async read(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
    const h = this.handle(fd);
    if (h.staged) return h.staged.read(buf, len, pos);
    return h.reader!.read(buf, len, pos);
  }

  async write(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
    const h = this.handle(fd);
    if (!h.staged) throw fsError(E.EBADF);
    const st = h.staged;
    const n = await st.write(buf, len, h.flags & C.O_APPEND ? st.size : pos);
    this.writer.touched(st);
    return n;
  }

  /** close(2) and fsync(2): see Writer.flush. */
  async flush(fd: number): Promise<void> {
    const st = this.handle(fd).staged;
    if (st) await this.writer.flush(st);
  }

  async release(fd: number): Promise<void> {
    const h = this.handles.get(fd);
    if (!h) return;
    this.handles.delete(fd);
    this.offload?.detach(fd);
    h.reader?.close();
    if (h.staged) await this.writer.release(h.staged);
    const orphan = this.orphans.get(h.path);
    if (h.reader && orphan !== undefined && !this.readersOf(h.path).length) {
      this.orphans.delete(h.path);
      await this.client.delete(this.o.bucket, orphan);
    }
  }

  private readersOf(path: string): Handle[] {
    return [...this.handles.values()].filter((h) => h.path === path && h.reader);
  }

  async truncate(path: string, size: number): Promise<void> {
    this.writable();
    const open = this.writer.get(path);
    if (open) return open.truncate(size);
    const a = await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    await this.writer.truncateClosed(path, a, size);
  }

  async ftruncate(fd: number, size: number): Promise<void> {
    const h = this.handle(fd);
    if (!h.staged) throw fsError(E.EBADF);
    await h.staged.truncate(size);
  }

  // ---- namespace ----

  async unlink(path: string): Promise<void> {
    this.changing(path);
    this.writable();
    const a = await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    await this.writer.unlinked(path);
    // open for reading: the object stays (hidden) until the last reader closes, as an unlinked inode does
    this.pages.forget(path);
    if (this.readersOf(path).length) this.orphans.set(path, this.key(path));
    else await this.deletes.remove(path, this.key(path));
    this.cache.setMissing(path);
    this.links.delete(path);
    this.dirTimes.touch(parentOf(path));
  }

  async mkdir(path: string, mode: number, who: Caller): Promise<void> {
    this.changing(path);
    this.writable();
    if (await this.lookup(path)) throw fsError(E.EEXIST);
    checkName(path, this.remote.dirKey(path));
    const now = Date.now();
    const owner = newOwner(await this.parentAttr(path), who, S_IFDIR | (mode & 0o7777));
    const attr: Attr = { kind: 'dir', ...owner, size: 4096, mtime: now, ctime: now, meta: {}, fromMeta: true };
    const meta = metaFromAttr(attr);
    await this.deletes.settled(this.key(path));
    const etag = await this.client.put(this.o.bucket, this.remote.dirKey(path), Buffer.alloc(0), { meta, contentType: 'application/x-directory' });
    this.dirTimes.forget(path);
    this.born(path);
    this.cache.set(path, { ...attr, meta, etag });
    // nothing can be below a directory that did not exist: lookups of new names in it need no request
    this.cache.setListing(path, new Map());
  }

  /**
   * mknod(2) and mkfifo(3): fifos, sockets and devices are empty objects with
   * the type in their mode (and rdev), as s3fs keeps them; a regular file is an
   * empty object.
   */
  async mknod(path: string, mode: number, rdev: number, who: Caller): Promise<void> {
    this.changing(path);
    this.writable();
    if (await this.lookup(path)) throw fsError(E.EEXIST);
    const type = mode & S_IFMT;
    if (type !== 0 && type !== S_IFREG && !isSpecialType(type)) throw fsError(E.EINVAL);
    const now = Date.now();
    const owner = newOwner(await this.parentAttr(path), who, (type || S_IFREG) | (mode & 0o7777));
    const special = isSpecialType(type);
    const attr: Attr = { kind: special ? 'special' : 'file', ...owner, size: 0, mtime: now, ctime: now, rdev: special ? rdev : undefined, meta: {}, fromMeta: true };
    const meta = metaFromAttr(attr);
    await this.deletes.settled(this.key(path));
    const etag = await this.client.put(this.o.bucket, this.key(path), Buffer.alloc(0), { meta, contentType: special ? 'application/octet-stream' : contentTypeFor(path) });
    this.born(path);
    this.cache.set(path, { ...attr, meta, etag });
  }

  /** Hard links cannot exist on an object store: EPERM (what link(2) answers where a filesystem has none), after the usual checks. */
  async link(from: string, to: string): Promise<void> {
    if (!(await this.lookup(from))) throw fsError(E.ENOENT);
    if (await this.lookup(to)) throw fsError(E.EEXIST);
    this.writable();
    throw fsError(E.EPERM, 'hard links are not supported');
  }

  async rmdir(path: string): Promise<void> {
    this.changing(path);
    this.writable();
    if (path === '/') throw fsError(E.EBUSY);
    const a = await this.getattr(path);
    if (a.kind !== 'dir') throw fsError(E.ENOTDIR);
    await this.deletes.settledBelow(this.remote.dirKey(path));
    // a delete that failed after its unlink was answered left the file there: say why (once)
    const failed = this.deletes.takeFailure(path);
    if (this.writer.hasStagedBelow(path) || (await this.remote.hasChildren(path))) throw failed ?? fsError(E.ENOTEMPTY);
    await this.client.delete(this.o.bucket, this.remote.dirKey(path));
    this.cache.invalidate(path, true);
    this.cache.setMissing(path);
    this.dirTimes.forget(path);
    this.dirTimes.touch(parentOf(path));
  }

  async rename(from: string, to: string): Promise<void> {
    this.changing(from, to);
    this.writable();
    if (from === to) return;
    if (to.startsWith(from + '/')) throw fsError(E.EINVAL);
    const a = await this.getattr(from);
    const b = await this.lookup(to);
    checkName(to, this.key(to) + (a.kind === 'dir' ? '/' : ''));
    // (nothing the rename writes may meet a DELETE still on its way)
    await this.deletes.settled(this.key(to));
    if (a.kind === 'dir') await Promise.all([this.deletes.settledBelow(this.remote.dirKey(from)), this.deletes.settledBelow(this.remote.dirKey(to))]);
    this.born(to);
    this.dirTimes.touch(parentOf(from));
    if (a.kind === 'dir') {
      if (b && b.kind !== 'dir') throw fsError(E.ENOTDIR);
      if (b && (this.writer.hasStagedBelow(to) || (await this.remote.hasChildren(to)))) throw fsError(E.ENOTEMPTY);
      // what is staged below goes first, so that the copy takes the latest bytes
      await this.writer.settleBelow(from);
      const n = await this.remote.renameDir(from, to);
      this.writer.movedDir(from, to);
      this.retarget(from, to, undefined, true);
      this.dirTimes.forget(from);
      this.cache.invalidate(from, true);
      this.cache.invalidate(to, true);
      this.cache.invalidateParent(from);
      this.cache.invalidateParent(to);
      this.log.debug({ from, to, keys: n }, 'renamed directory');
      return;
    }
    if (b && b.kind === 'dir') throw fsError(E.EISDIR);
    const st = this.writer.get(from);
    if (st) await this.writer.upload(st);
    // The copy keeps the object as it is (metadata, content type, tags); the
    // change time a rename moves shows in this mount (storing it would mean
    // replacing the metadata, and with it a content type set by another client).
    const moved = { ...(st ? this.stagedAttr(st) : await this.getattr(from)), ctime: Date.now() };
    const etag = await this.remote.copy(this.key(from), this.key(to));
    await this.client.delete(this.o.bucket, this.key(from));
    await this.writer.moved(from, to, etag);
    const staged = this.writer.get(to);
    if (staged) staged.attr = { ...staged.attr, ctime: moved.ctime, etag };
    this.retarget(from, to, etag, false);
    const link = this.links.get(from);
    this.links.delete(from);
    if (link) this.links.set(to, { ...link, etag });
    this.cache.setMissing(from);
    this.cache.set(to, { ...moved, etag });
  }

  /** Open handles follow a rename: readers read the same bytes from the new key. */
  private retarget(from: string, to: string, etag: string | undefined, below: boolean): void {
    for (const h of this.handles.values()) {
      if (h.path === from) h.path = to;
      else if (below && h.path.startsWith(from + '/')) h.path = to + h.path.slice(from.length);
      else continue;
      h.reader?.retarget(this.key(h.path), below ? undefined : etag);
    }
  }

  /** fsync(2) of a directory: the deletes below it have landed; what failed (once) is the answer. */
  async fsyncdir(path: string): Promise<void> {
    await this.deletes.settledBelow(this.remote.dirKey(path));
    const failed = this.deletes.takeFailure(path);
    if (failed) throw failed;
  }

  // ---- symlinks ----

  async symlink(target: string, path: string, who: Caller): Promise<void> {
    this.changing(path);
    this.writable();
    if (await this.lookup(path)) throw fsError(E.EEXIST);
    const now = Date.now();
    const owner = newOwner(await this.parentAttr(path), who, S_IFLNK | 0o777);
    const attr: Attr = { kind: 'symlink', ...owner, size: Buffer.byteLength(target), mtime: now, ctime: now, meta: {}, fromMeta: true };
    const meta = metaFromAttr(attr);
    await this.deletes.settled(this.key(path));
    const etag = await this.client.put(this.o.bucket, this.key(path), target, { meta, contentType: 'application/octet-stream' });
    this.born(path);
    this.cache.set(path, { ...attr, meta, etag });
    this.links.set(path, { etag, target });
  }

  async readlink(path: string): Promise<string> {
    const a = await this.getattr(path);
    if (a.kind !== 'symlink') throw fsError(E.EINVAL);
    const known = this.links.get(path);
    if (known && known.etag === a.etag) return known.target;
    const target = (await this.client.getBuffer(this.o.bucket, this.key(path))).toString('utf8');
    this.links.set(path, { etag: a.etag, target });
    return target;
  }

  // ---- state ----

  stats(): FsStats {
    return {
      openFiles: this.handles.size, writesInFuseThread: this.offload?.writes ?? 0, revalidated: this.revalidated, copyKeepsTags: this.remote.copyKeepsTags,
      buffers: this.budget.stats(), ...this.writer.stats(), ...this.deletes.stats(),
    };
  }

  recover(): Promise<number> {
    return this.writer.recover();
  }

  /** Everything pending goes to the bucket (the unmount): uploads, then deletes. Returns the paths whose upload failed. */
  async flushAll(onProgress?: (left: number) => void): Promise<string[]> {
    const failed = await this.writer.flushAll(onProgress);
    await this.deletes.settledBelow('');
    return failed;
  }
}
