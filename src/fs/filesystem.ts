// The filesystem's behaviour, one method per operation, promise-based and
// free of FUSE calling conventions (ops.ts adapts them). Paths are FUSE
// paths ('/a/b'); the Remote maps them to keys.
import * as fs from 'node:fs';
import { constants as C } from 'node:fs';
import type { Logger } from 'pino';
import { SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';
import { Attr, AttrDefaults, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, metaFromAttr } from './attrs';
import { MetaCache } from './cache';
import { E, fsError } from './errors';
import { Reader, ReaderTuning, DEFAULT_TUNING } from './reader';
import { Remote } from './remote';
import { Journal, JournalRecord } from './journal';
import { Staged } from './staged';
import { ConflictError, DEFAULT_UPLOAD, UploadResult, UploadTuning, uploadFile } from './uploader';
import { contentTypeFor } from './mime';
import * as xattr from './xattr';

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
   * Keep both versions when another writer got there first: 'on' uploads
   * conditionally (If-Match / If-None-Match); 'head' compares ETags with a HEAD
   * first, for stores without conditional writes; 'off' lets the last writer win.
   */
  conflictCheck: 'on' | 'head' | 'off';
  log: Logger;
  upload?: UploadTuning;
  reader?: ReaderTuning;
}

interface Handle {
  path: string;
  flags: number;
  staged?: Staged;
  reader?: Reader;
}

export interface FsStats {
  openFiles: number;
  staged: number;
  pendingUploads: number;
  pendingBytes: number;
  uploads: number;
  uploadErrors: number;
  lastUploadError?: string;
  conflicts: number;
  revalidated: number;
  recovered: number;
  writeBackSec: number;
}

export class SvcFs {
  readonly remote: Remote;
  readonly cache: MetaCache;
  private readonly client: SvcClient;
  private readonly log: Logger;
  private readonly handles = new Map<number, Handle>();
  private readonly staged = new Map<string, Staged>();
  private readonly links = new Map<string, { etag?: string; target: string }>();
  private nextFd = 1;
  private readonly defaults: AttrDefaults;
  private uploads = 0;
  private uploadErrors = 0;
  private lastUploadError?: string;
  private conflicts = 0;
  private revalidated = 0;
  private recovered = 0;
  private readonly journal: Journal;

  constructor(private readonly o: FsOptions) {
    this.client = o.client;
    this.log = o.log;
    this.defaults = { uid: o.uid, gid: o.gid, umask: o.umask, mountTime: Date.now() };
    this.remote = new Remote(o.client, o.bucket, o.prefix, this.defaults);
    this.cache = new MetaCache(o.cacheTtlMs);
    this.journal = o.journal;
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
    const st = this.staged.get(path);
    if (st && !st.deleted) return this.stagedAttr(st);
    const cached = this.cache.get(path);
    if (cached !== undefined) return cached;
    const a = (await this.revalidate(path)) ?? (await this.remote.stat(path));
    if (a) this.cache.set(path, a);
    else this.cache.setMissing(path);
    return a;
  }

  /**
   * An entry past its TTL that was a file: one conditional HEAD (304 means it is
   * unchanged) instead of a full lookup. Undefined when that does not settle it.
   */
  private async revalidate(path: string): Promise<Attr | undefined> {
    const prev = this.cache.lastKnown(path);
    if (!prev || prev.kind === 'dir' || !prev.etag) return undefined;
    const r = await this.client.head(this.o.bucket, this.key(path), { ifNoneMatch: prev.etag });
    if (r === 'not-modified') {
      this.revalidated++;
      return prev;
    }
    return r ? this.remote.attrOf(r) : undefined;
  }

  async getattr(path: string): Promise<Attr> {
    const a = await this.lookup(path);
    if (!a) throw fsError(E.ENOENT);
    return a;
  }

  async readdir(path: string): Promise<string[]> {
    let entries = this.cache.listing(path)?.entries;
    if (!entries) {
      const a = await this.lookup(path);
      if (!a) throw fsError(E.ENOENT);
      if (a.kind !== 'dir') throw fsError(E.ENOTDIR);
      entries = await this.remote.list(path);
      this.cache.setListing(path, entries);
    }
    const names = new Set(entries.keys());
    const pre = path === '/' ? '/' : path + '/';
    for (const [p, st] of this.staged) {
      const rest = p.slice(pre.length);
      if (!p.startsWith(pre) || rest.includes('/')) continue;
      if (st.deleted) names.delete(rest);
      else names.add(rest);
    }
    return ['.', '..', ...names];
  }

  // ---- open files ----

  private addHandle(h: Handle): number {
    while (this.handles.has(this.nextFd)) this.nextFd = (this.nextFd % 0x7fffffff) + 1;
    const fd = this.nextFd;
    this.nextFd = (this.nextFd % 0x7fffffff) + 1;
    this.handles.set(fd, h);
    return fd;
  }

  private handle(fd: number): Handle {
    const h = this.handles.get(fd);
    if (!h) throw fsError(E.EBADF);
    return h;
  }

  /** The staged file of a path, created from the existing object when there is none. */
  private async stage(path: string, a: Attr): Promise<Staged> {
    let st = this.staged.get(path);
    if (!st) {
      st = await Staged.create(this.journal.stagingDir, path, this.client, this.o.bucket, { key: this.key(path), size: a.size, etag: a.etag }, a);
      this.staged.set(path, st);
    }
    return st;
  }

  async open(path: string, flags: number): Promise<number> {
    const write = (flags & 3) !== C.O_RDONLY;
    if (write) this.writable();
    const st = this.staged.get(path);
    if (!write) {
      if (st && !st.deleted) {
        st.refs++;
        return this.addHandle({ path, flags, staged: st });
      }
      const a = await this.getattr(path);
      if (a.kind === 'dir') throw fsError(E.EISDIR);
      return this.addHandle({ path, flags, reader: new Reader(this.client, this.o.bucket, this.key(path), a.size, a.etag, this.o.reader ?? DEFAULT_TUNING) });
    }
    const a = st && !st.deleted ? this.stagedAttr(st) : await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    const s = await this.stage(path, a);
    s.refs++;
    if (flags & C.O_TRUNC) await s.truncate(0);
    return this.addHandle({ path, flags, staged: s });
  }

  async create(path: string, mode: number): Promise<number> {
    this.writable();
    const now = Date.now();
    const attr: Attr = { kind: 'file', mode: S_IFREG | (mode & 0o7777), uid: this.o.uid, gid: this.o.gid, size: 0, mtime: now, ctime: now, meta: {}, fromMeta: true };
    const old = this.staged.get(path);
    if (old) await this.discard(old);
    const st = await Staged.create(this.journal.stagingDir, path, this.client, this.o.bucket, undefined, attr);
    this.staged.set(path, st);
    this.note(st, 'open');
    st.refs++;
    this.cache.set(path, attr);
    return this.addHandle({ path, flags: C.O_RDWR, staged: st });
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
    if (!st.journaled) this.note(st, 'open');
    return n;
  }

  /**
   * close(2) and fsync(2). Upload on close: upload what is staged, and the
   * application gets EIO if that fails. Write-back: make the staged bytes
   * durable and journaled, and let the upload follow after the delay.
   */
  async flush(fd: number): Promise<void> {
    const h = this.handle(fd);
    const st = h.staged;
    if (!st || !st.dirty || st.deleted) return;
    if (this.o.writeBackMs > 0) {
      await this.commitLocal(st);
      this.schedule(st, this.o.writeBackMs);
      return;
    }
    await this.upload(st);
  }

  async release(fd: number): Promise<void> {
    const h = this.handles.get(fd);
    if (!h) return;
    this.handles.delete(fd);
    const st = h.staged;
    if (!st) return;
    st.refs--;
    if (st.dirty && !st.deleted) {
      if (this.o.writeBackMs > 0) {
        await this.commitLocal(st).catch(() => undefined);
        if (!st.timer) this.schedule(st, this.o.writeBackMs);
        return;
      }
      try {
        await this.upload(st);
      } catch {
        // Already logged and reported to the application (close returned EIO).
        // The bytes stay staged and journaled; keep trying in the background.
        st.failures++;
        if (!st.timer) this.schedule(st, this.backoff(st.failures));
        return;
      }
    }
    if (st.refs <= 0 && (!st.dirty || st.deleted)) await this.discard(st);
  }

  private backoff(failures: number): number {
    return Math.min(1000 * 2 ** Math.min(failures, 6), 60_000);
  }

  /** Forget a staged file: its timer, its unfinished multipart upload, its journal record and bytes. */
  private async discard(st: Staged): Promise<void> {
    if (this.staged.get(st.path) === st) this.staged.delete(st.path);
    if (st.timer) clearTimeout(st.timer);
    st.timer = undefined;
    if (st.multipart) {
      const mp = st.multipart;
      st.multipart = undefined;
      await this.client.abortMultipart(this.o.bucket, st.base?.key ?? this.key(st.path), mp.uploadId).catch(() => undefined);
    }
    this.journal.remove(st.id);
    st.journaled = undefined;
    await st.close(true);
  }

  /** Write (or rewrite) the journal record of a staged file. */
  private note(st: Staged, state: 'open' | 'pending'): void {
    const rec: JournalRecord = {
      id: st.id, path: st.path, key: this.key(st.path), bucket: this.o.bucket, file: st.file, size: st.size,
      baseEtag: st.base?.etag, meta: metaFromAttr(st.attr), contentType: contentTypeFor(st.path), state, updated: Date.now(),
      multipart: st.multipart,
    };
    this.journal.write(rec);
    st.journaled = state;
  }

  /** Every byte the upload needs, on local disk: what is left of the base, fetched. */
  private async fill(st: Staged): Promise<void> {
    try {
      await st.fillAll();
    } catch (e) {
      if (e instanceof SvcError && e.status === 412) {
        throw new Error('the object changed on the server before the unchanged parts of this edit were read; the edit stays staged');
      }
      throw e;
    }
  }

  /** Filled, fsync'd and journaled as pending: the bytes survive a crash of the mount. */
  private async commitLocal(st: Staged): Promise<void> {
    await this.fill(st);
    await st.sync();
    this.note(st, 'pending');
  }

  /** Write-back: upload after a delay (a file written again meanwhile is uploaded once). */
  private schedule(st: Staged, delayMs: number): void {
    if (st.timer) clearTimeout(st.timer);
    st.timer = setTimeout(() => {
      st.timer = undefined;
      this.upload(st).then(
        async () => {
          st.failures = 0;
          if (st.refs <= 0 && !st.dirty && this.staged.get(st.path) === st) await this.discard(st);
        },
        () => {
          st.failures++;
          if (!st.deleted && st.dirty) this.schedule(st, this.backoff(st.failures));
        },
      );
    }, delayMs);
  }

  /** Where our version goes when another writer's is in the way: `name.conflict-<UTC time>`. */
  private conflictPath(path: string): string {
    const ts = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
    return `${path}.conflict-${ts}`;
  }

  /** Upload a staged file until what is in the bucket matches it (one upload at a time per file). */
  private async upload(st: Staged): Promise<void> {
    while (st.dirty && !st.deleted) {
      if (st.uploading) {
        await st.uploading.catch(() => undefined);
        if (st.lastError) throw fsError(E.EIO, String(st.lastError));
        continue;
      }
      const gen = st.gen;
      st.uploading = (async () => {
        const started = Date.now();
        // Upload on close promises nothing until the upload is done, so the staged
        // bytes need not be made durable first; after a failure they are (below).
        if (this.o.writeBackMs > 0 || st.journaled === 'pending') await this.commitLocal(st);
        else await this.fill(st);
        const path = st.path;
        const key = this.key(path);
        const meta = metaFromAttr(st.attr);
        const t = this.o.upload ?? DEFAULT_UPLOAD;
        const cond = this.o.conflictCheck !== 'on' ? {} : st.base?.etag ? { ifMatch: st.base.etag } : { ifNoneMatch: '*' };
        // a multipart upload begun for other bytes is of no use any more
        if (st.multipart && st.multipart.gen !== gen) {
          await this.client.abortMultipart(this.o.bucket, key, st.multipart.uploadId).catch(() => undefined);
          st.multipart = undefined;
        }
        const hooks = {
          resume: st.multipart,
          onState: (m: { uploadId: string; partSize: number; etags: Array<string | null> } | undefined) => {
            st.multipart = m && { ...m, gen };
            if (st.journaled === 'pending') this.note(st, 'pending');
          },
        };
        let target = key;
        let r: UploadResult;
        try {
          if (this.o.conflictCheck === 'head') {
            const now = await this.remote.head(key);
            if (st.base?.etag ? now?.etag !== st.base.etag : now !== undefined) throw new ConflictError(key);
          }
          r = await uploadFile(this.client, this.o.bucket, key, st.file, st.size, { meta, contentType: contentTypeFor(path), ...cond }, t, hooks);
        } catch (e) {
          if (!(e instanceof ConflictError)) {
            await this.commitLocal(st).catch(() => undefined); // keep the bytes safe for the retries to come
            throw e;
          }
          // Keep both: theirs stays at the path, ours goes next to it.
          const other = this.conflictPath(path);
          target = this.key(other);
          r = await uploadFile(this.client, this.o.bucket, target, st.file, st.size, { meta, contentType: contentTypeFor(other) }, t);
          this.conflicts++;
          this.log.warn({ key, keptAs: target }, 'conflict: the object changed on the server during this edit; both versions kept');
          this.cache.invalidate(path);
          this.cache.invalidateParent(path);
          if (this.staged.get(path) === st) this.staged.delete(path);
          st.path = other;
          this.staged.set(other, st);
        }
        st.uploadedGen = gen;
        st.base = { key: target, size: 0, etag: r.etag };
        st.attr = { ...st.attr, etag: r.etag, meta, fromMeta: true };
        if (!st.dirty) {
          this.journal.remove(st.id);
          st.journaled = undefined;
        }
        this.cache.set(st.path, this.stagedAttr(st));
        this.uploads++;
        this.log.debug({ key: target, size: st.size, parts: r.parts, ms: Date.now() - started }, 'uploaded');
      })();
      try {
        await st.uploading;
        st.lastError = undefined;
      } catch (e) {
        st.lastError = e;
        this.uploadErrors++;
        this.lastUploadError = `${this.key(st.path)}: ${(e as Error).message}`;
        this.log.error({ key: this.key(st.path), err: (e as Error).message }, 'upload failed; the data stays staged');
        throw fsError(E.EIO, (e as Error).message);
      } finally {
        st.uploading = undefined;
      }
    }
  }

  /**
   * After a crash: every journaled file that was closed goes back to the staged
   * table (so its path shows the staged bytes, not the bucket's) and is
   * uploaded in the background; files never closed are set aside.
   */
  async recover(): Promise<number> {
    const live = new Set<string>();
    let n = 0;
    for (const r of this.journal.records()) {
      if (r.bucket !== this.o.bucket || !fs.existsSync(r.file)) {
        this.journal.remove(r.id);
        continue;
      }
      if (r.state !== 'pending') {
        const where = this.journal.setAside(r);
        this.log.warn({ path: r.path, keptAt: where }, 'a file that was never closed before the crash was set aside, not uploaded');
        continue;
      }
      const now = Date.now();
      const attr = { ...this.remote.attrOf({ key: r.key, size: r.size, etag: r.baseEtag ?? '', lastModified: new Date(now), meta: r.meta }), etag: r.baseEtag };
      const st = await Staged.adopt(r.file, r.path, this.client, this.o.bucket, r.key, r.size, r.baseEtag, attr);
      st.multipart = r.multipart;
      this.staged.set(r.path, st);
      live.add(r.file);
      this.schedule(st, 0);
      n++;
    }
    const swept = this.journal.sweepStaging(live);
    this.recovered = n;
    if (n || swept) this.log.info({ recovered: n, swept }, 'recovered staged files from the journal; uploading them');
    return n;
  }

  async truncate(path: string, size: number): Promise<void> {
    this.writable();
    const open = this.staged.get(path);
    if (open && !open.deleted) return open.truncate(size);
    const a = await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    const st = await this.stage(path, a);
    try {
      await st.truncate(size);
      await this.upload(st);
    } finally {
      if (st.refs <= 0 && !st.dirty) await this.discard(st);
    }
  }

  async ftruncate(fd: number, size: number): Promise<void> {
    const h = this.handle(fd);
    if (!h.staged) throw fsError(E.EBADF);
    await h.staged.truncate(size);
  }

  // ---- namespace ----

  async unlink(path: string): Promise<void> {
    this.writable();
    const a = await this.getattr(path);
    if (a.kind === 'dir') throw fsError(E.EISDIR);
    const st = this.staged.get(path);
    if (st) {
      st.deleted = true;
      if (st.timer) clearTimeout(st.timer);
      this.journal.remove(st.id);
      if (st.refs <= 0) await this.discard(st);
      else this.staged.delete(path);
    }
    await this.client.delete(this.o.bucket, this.key(path));
    this.cache.setMissing(path);
    this.links.delete(path);
  }

  async mkdir(path: string, mode: number): Promise<void> {
    this.writable();
    if (await this.lookup(path)) throw fsError(E.EEXIST);
    const now = Date.now();
    const attr: Attr = { kind: 'dir', mode: S_IFDIR | (mode & 0o7777), uid: this.o.uid, gid: this.o.gid, size: 4096, mtime: now, ctime: now, meta: {}, fromMeta: true };
    const meta = metaFromAttr(attr);
    const etag = await this.client.put(this.o.bucket, this.remote.dirKey(path), Buffer.alloc(0), { meta, contentType: 'application/x-directory' });
    this.cache.set(path, { ...attr, meta, etag });
  }

  private hasStagedBelow(path: string): boolean {
    const pre = path + '/';
    for (const [p, st] of this.staged) if (p.startsWith(pre) && !st.deleted) return true;
    return false;
  }

  async rmdir(path: string): Promise<void> {
    this.writable();
    if (path === '/') throw fsError(E.EBUSY);
    const a = await this.getattr(path);
    if (a.kind !== 'dir') throw fsError(E.ENOTDIR);
    if (this.hasStagedBelow(path) || (await this.remote.hasChildren(path))) throw fsError(E.ENOTEMPTY);
    await this.client.delete(this.o.bucket, this.remote.dirKey(path));
    this.cache.invalidate(path, true);
    this.cache.setMissing(path);
  }

  async rename(from: string, to: string): Promise<void> {
    this.writable();
    if (from === to) return;
    if (to.startsWith(from + '/')) throw fsError(E.EINVAL);
    const a = await this.getattr(from);
    const b = await this.lookup(to);
    if (a.kind === 'dir') {
      if (b && b.kind !== 'dir') throw fsError(E.ENOTDIR);
      if (b && (this.hasStagedBelow(to) || (await this.remote.hasChildren(to)))) throw fsError(E.ENOTEMPTY);
      // what is staged below goes first, so that the copy takes the latest bytes
      for (const [p, st] of this.staged) if (p.startsWith(from + '/')) await this.upload(st);
      const n = await this.remote.renameDir(from, to);
      for (const [p, st] of [...this.staged]) {
        if (!p.startsWith(from + '/')) continue;
        this.staged.delete(p);
        st.path = to + p.slice(from.length);
        this.staged.set(st.path, st);
      }
      this.cache.invalidate(from, true);
      this.cache.invalidate(to, true);
      this.cache.invalidateParent(from);
      this.cache.invalidateParent(to);
      this.log.debug({ from, to, keys: n }, 'renamed directory');
      return;
    }
    if (b && b.kind === 'dir') throw fsError(E.EISDIR);
    const st = this.staged.get(from);
    if (st) await this.upload(st);
    const etag = await this.client.copy({ bucket: this.o.bucket, key: this.key(from) }, this.o.bucket, this.key(to));
    await this.client.delete(this.o.bucket, this.key(from));
    if (st) {
      this.staged.delete(from);
      const old = this.staged.get(to);
      if (old) await this.discard(old);
      st.path = to;
      st.base = { key: this.key(to), size: 0, etag };
      this.staged.set(to, st);
    }
    const link = this.links.get(from);
    this.links.delete(from);
    if (link) this.links.set(to, link);
    this.cache.setMissing(from);
    this.cache.set(to, { ...a, etag });
  }

  // ---- attributes that live in metadata ----

  /**
   * Change recorded attributes. A staged file with pending changes takes them
   * with its upload; otherwise the object's metadata is replaced in place
   * (copy onto itself), and an implicit directory gets a marker.
   */
  private async setAttr(path: string, change: (a: Attr) => Attr): Promise<void> {
    this.writable();
    const st = this.staged.get(path);
    if (st && !st.deleted) {
      st.attr = change(st.attr);
      if (st.dirty) return;
    }
    const a = await this.getattr(path);
    const next = change(a);
    if (path === '/') return;
    const meta = await this.replaceMeta(path, a, (m) => ({ ...m, ...metaFromAttr(next) }));
    this.cache.set(path, { ...next, meta, fromMeta: true });
  }

  /** Replace an object's user metadata (copy onto itself); creates a directory marker if there is none. */
  private async replaceMeta(path: string, a: Attr, change: (m: Record<string, string>) => Record<string, string>): Promise<Record<string, string>> {
    const key = a.kind === 'dir' ? this.remote.dirKey(path) : this.key(path);
    const info = await this.remote.head(key);
    if (!info) {
      if (a.kind !== 'dir') throw fsError(E.ENOENT);
      const meta = change(metaFromAttr(a));
      await this.client.put(this.o.bucket, key, Buffer.alloc(0), { meta, contentType: 'application/x-directory' });
      return meta;
    }
    const meta = change(info.meta);
    await this.client.copy({ bucket: this.o.bucket, key }, this.o.bucket, key, { replaceMetadata: true, meta, contentType: info.contentType, ifSourceMatch: info.etag });
    return meta;
  }

  chmod(path: string, mode: number): Promise<void> {
    return this.setAttr(path, (a) => ({ ...a, mode: (a.mode & S_IFMT) | (mode & 0o7777) }));
  }

  chown(path: string, uid: number, gid: number): Promise<void> {
    const keep = 0xffffffff;
    return this.setAttr(path, (a) => ({ ...a, uid: uid === keep || uid === -1 ? a.uid : uid, gid: gid === keep || gid === -1 ? a.gid : gid }));
  }

  utimens(path: string, _atime: number, mtime: number): Promise<void> {
    // fuse-native 2.2.6 hands over atime in both arguments, and UTIME_NOW/UTIME_OMIT
    // arrive as a time within the first seconds of 1970: take those as now.
    const t = mtime < 10_000 ? Date.now() : mtime;
    return this.setAttr(path, (a) => ({ ...a, mtime: t, ctime: Date.now() }));
  }

  // ---- symlinks ----

  async symlink(target: string, path: string): Promise<void> {
    this.writable();
    if (await this.lookup(path)) throw fsError(E.EEXIST);
    const now = Date.now();
    const attr: Attr = { kind: 'symlink', mode: S_IFLNK | 0o777, uid: this.o.uid, gid: this.o.gid, size: Buffer.byteLength(target), mtime: now, ctime: now, meta: {}, fromMeta: true };
    const meta = metaFromAttr(attr);
    const etag = await this.client.put(this.o.bucket, this.key(path), target, { meta, contentType: 'application/octet-stream' });
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

  // ---- extended attributes ----

  private async settled(path: string): Promise<Attr> {
    const st = this.staged.get(path);
    if (st && st.dirty) await this.upload(st);
    return this.getattr(path);
  }

  async getxattr(path: string, name: string): Promise<Buffer> {
    if (!name.startsWith('user.')) throw fsError(E.ENODATA);
    const a = await this.getattr(path);
    if (name.startsWith(xattr.TAG)) {
      const tags = await this.client.getTags(this.o.bucket, this.objectKey(path, a));
      const v = tags[name.slice(xattr.TAG.length)];
      if (v === undefined) throw fsError(E.ENODATA);
      return Buffer.from(v);
    }
    const v = xattr.get(a.meta, name);
    if (v === undefined) throw fsError(E.ENODATA);
    return v;
  }

  async listxattr(path: string): Promise<string[]> {
    const a = await this.getattr(path);
    const names = xattr.list(a.meta);
    if (path !== '/') {
      const tags = await this.client.getTags(this.o.bucket, this.objectKey(path, a)).catch(() => ({}));
      for (const k of Object.keys(tags)) names.push(xattr.TAG + k);
    }
    return names;
  }

  async setxattr(path: string, name: string, value: Buffer): Promise<void> {
    this.writable();
    if (!name.startsWith('user.')) throw fsError(E.ENOTSUP);
    const a = await this.settled(path);
    if (path === '/') throw fsError(E.ENOTSUP);
    if (name.startsWith(xattr.TAG)) {
      const key = this.objectKey(path, a);
      const tags = await this.client.getTags(this.o.bucket, key);
      tags[name.slice(xattr.TAG.length)] = value.toString('utf8');
      await this.client.putTags(this.o.bucket, key, tags);
      return;
    }
    const meta = await this.replaceMeta(path, a, (m) => xattr.set(m, name, value));
    this.cache.set(path, { ...a, meta });
  }

  async removexattr(path: string, name: string): Promise<void> {
    this.writable();
    if (!name.startsWith('user.')) throw fsError(E.ENOTSUP);
    const a = await this.settled(path);
    if (name.startsWith(xattr.TAG)) {
      const key = this.objectKey(path, a);
      const tags = await this.client.getTags(this.o.bucket, key);
      const k = name.slice(xattr.TAG.length);
      if (!(k in tags)) throw fsError(E.ENODATA);
      delete tags[k];
      if (Object.keys(tags).length) await this.client.putTags(this.o.bucket, key, tags);
      else await this.client.deleteTags(this.o.bucket, key);
      return;
    }
    if (xattr.get(a.meta, name) === undefined) throw fsError(E.ENODATA);
    const meta = await this.replaceMeta(path, a, (m) => xattr.remove(m, name));
    this.cache.set(path, { ...a, meta });
  }

  private objectKey(path: string, a: Attr): string {
    return a.kind === 'dir' ? this.remote.dirKey(path) : this.key(path);
  }

  // ---- state ----

  stats(): FsStats {
    let pending = 0;
    let bytes = 0;
    for (const st of this.staged.values()) {
      if (st.dirty && !st.deleted) {
        pending++;
        bytes += st.size;
      }
    }
    return {
      openFiles: this.handles.size, staged: this.staged.size, pendingUploads: pending, pendingBytes: bytes,
      uploads: this.uploads, uploadErrors: this.uploadErrors, lastUploadError: this.lastUploadError,
      conflicts: this.conflicts, revalidated: this.revalidated, recovered: this.recovered, writeBackSec: this.o.writeBackMs / 1000,
    };
  }

  /** Upload everything still pending (before unmount). Returns the paths that failed. */
  async flushAll(onProgress?: (left: number) => void): Promise<string[]> {
    const failed: string[] = [];
    const pending = [...this.staged.values()].filter((s) => s.dirty && !s.deleted);
    let left = pending.length;
    for (const st of pending) {
      if (st.timer) clearTimeout(st.timer);
      st.timer = undefined;
      try {
        await this.upload(st);
      } catch {
        failed.push(st.path);
      }
      onProgress?.(--left);
    }
    return failed;
  }
}
