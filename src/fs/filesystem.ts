// The filesystem's behaviour, one method per operation, promise-based and
// free of FUSE calling conventions (ops.ts adapts them). Paths are FUSE
// paths ('/a/b'); the Remote maps them to keys.
import * as fs from 'node:fs';
import { constants as C } from 'node:fs';
import type { Logger } from 'pino';
import { SvcClient } from '../wire/client';
import { Attr, AttrDefaults, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, metaFromAttr } from './attrs';
import { MetaCache } from './cache';
import { E, fsError } from './errors';
import { Reader, ReaderTuning, DEFAULT_TUNING } from './reader';
import { Remote } from './remote';
import { Staged } from './staged';
import { DEFAULT_UPLOAD, UploadTuning, uploadFile } from './uploader';
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
  stagingDir: string;
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

  constructor(private readonly o: FsOptions) {
    this.client = o.client;
    this.log = o.log;
    this.defaults = { uid: o.uid, gid: o.gid, umask: o.umask, mountTime: Date.now() };
    this.remote = new Remote(o.client, o.bucket, o.prefix, this.defaults);
    this.cache = new MetaCache(o.cacheTtlMs);
    fs.mkdirSync(o.stagingDir, { recursive: true, mode: 0o700 });
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
    const a = await this.remote.stat(path);
    if (a) this.cache.set(path, a);
    else this.cache.setMissing(path);
    return a;
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
      st = await Staged.create(this.o.stagingDir, path, this.client, this.o.bucket, { key: this.key(path), size: a.size, etag: a.etag }, a);
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
    const st = await Staged.create(this.o.stagingDir, path, this.client, this.o.bucket, undefined, attr);
    this.staged.set(path, st);
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
    return h.staged.write(buf, len, h.flags & C.O_APPEND ? h.staged.size : pos);
  }

  /** close(2) and fsync(2): upload what is staged; the application gets EIO if that fails. */
  async flush(fd: number): Promise<void> {
    const h = this.handle(fd);
    if (h.staged) await this.upload(h.staged);
  }

  async release(fd: number): Promise<void> {
    const h = this.handles.get(fd);
    if (!h) return;
    this.handles.delete(fd);
    const st = h.staged;
    if (!st) return;
    st.refs--;
    if (st.dirty && !st.deleted) {
      try {
        await this.upload(st);
      } catch {
        // already logged and counted; the data stays staged for the next flush
      }
    }
    if (st.refs <= 0 && (!st.dirty || st.deleted)) await this.discard(st);
  }

  private async discard(st: Staged): Promise<void> {
    if (this.staged.get(st.path) === st) this.staged.delete(st.path);
    await st.close(true);
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
      const path = st.path;
      const key = this.key(path);
      st.uploading = (async () => {
        const started = Date.now();
        await st.fillAll();
        await st.sync();
        const meta = metaFromAttr(st.attr);
        const r = await uploadFile(this.client, this.o.bucket, key, st.file, st.size, { meta, contentType: contentTypeFor(path) }, this.o.upload ?? DEFAULT_UPLOAD);
        st.uploadedGen = gen;
        st.base = { key, size: st.size, etag: r.etag };
        st.attr = { ...st.attr, etag: r.etag, meta, fromMeta: true };
        this.cache.set(path, this.stagedAttr(st));
        this.uploads++;
        this.log.debug({ key, size: st.size, parts: r.parts, ms: Date.now() - started }, 'uploaded');
      })();
      try {
        await st.uploading;
        st.lastError = undefined;
      } catch (e) {
        st.lastError = e;
        this.uploadErrors++;
        this.lastUploadError = `${key}: ${(e as Error).message}`;
        this.log.error({ key, err: (e as Error).message }, 'upload failed; the data stays staged');
        throw fsError(E.EIO, (e as Error).message);
      } finally {
        st.uploading = undefined;
      }
    }
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
    await this.client.copy({ bucket: this.o.bucket, key: this.key(from) }, this.o.bucket, this.key(to));
    await this.client.delete(this.o.bucket, this.key(from));
    if (st) {
      this.staged.delete(from);
      const old = this.staged.get(to);
      if (old) await this.discard(old);
      st.path = to;
      st.base = st.base && { ...st.base, key: this.key(to) };
      this.staged.set(to, st);
    }
    const link = this.links.get(from);
    this.links.delete(from);
    if (link) this.links.set(to, link);
    this.cache.setMissing(from);
    this.cache.set(to, { ...a });
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
    };
  }

  /** Upload everything still pending (before unmount). Returns the paths that failed. */
  async flushAll(onProgress?: (left: number) => void): Promise<string[]> {
    const failed: string[] = [];
    const pending = [...this.staged.values()].filter((s) => s.dirty && !s.deleted);
    let left = pending.length;
    for (const st of pending) {
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
