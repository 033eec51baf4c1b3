// Attributes that live in an object's metadata: mode, owner and times
// (chmod, chown, utimens) and extended attributes (tags, user metadata, other
// user.* names). A change replaces the object's metadata in place (a copy onto
// itself); a staged file with pending bytes takes it with its upload instead.
import type { SvcClient } from '../wire/client';
import { Attr, S_IFMT, metaFromAttr } from './attrs';
import type { MetaCache } from './cache';
import { E, fsError } from './errors';
import { DirTimes, utimeArg } from './posix';
import type { Remote } from './remote';
import type { Writer } from './writer';
import * as xattr from './xattr';

export interface MetadataDeps {
  client: SvcClient;
  bucket: string;
  remote: Remote;
  cache: MetaCache;
  writer: Writer;
  dirTimes: DirTimes;
  getattr(path: string): Promise<Attr>;
  /** EROFS on a read-only mount */
  writable(): void;
  /** this mount changes the path: its own attributes win over a lookup in flight */
  changing(path: string): void;
  /** the mount root has no object: its attributes are kept in memory */
  setRoot(a: Attr): void;
}

export class Metadata {
  constructor(private readonly d: MetadataDeps) {}

  // ---- attributes that live in metadata ----

  /**
   * Change recorded attributes. A staged file with pending changes takes them
   * with its upload; otherwise the object's metadata is replaced in place
   * (copy onto itself), and an implicit directory gets a marker.
   */
  async setAttr(path: string, change: (a: Attr) => Attr): Promise<void> {
    this.d.changing(path);
    this.d.writable();
    const st = this.d.writer.get(path);
    if (st) {
      st.attr = change(st.attr);
      if (st.dirty) return;
    }
    const a = await this.d.getattr(path);
    const next = change(a);
    if (a.kind === 'dir') this.d.dirTimes.drop(path); // times set explicitly (rsync, tar) win over remembered ones
    if (path === '/') {
      this.d.setRoot(next);
      return;
    }
    const meta = await this.replaceMeta(path, a, (m) => ({ ...m, ...metaFromAttr(next) }));
    this.d.cache.set(path, { ...next, meta, fromMeta: true });
  }

  /** Replace an object's user metadata (copy onto itself); creates a directory marker if there is none. */
  private async replaceMeta(path: string, a: Attr, change: (m: Record<string, string>) => Record<string, string>): Promise<Record<string, string>> {
    const key = a.kind === 'dir' ? this.d.remote.dirKey(path) : this.d.remote.key(path);
    const info = await this.d.remote.head(key);
    if (!info) {
      if (a.kind !== 'dir') throw fsError(E.ENOENT);
      const meta = change(metaFromAttr(a));
      await this.d.client.put(this.d.bucket, key, Buffer.alloc(0), { meta, contentType: 'application/x-directory' });
      return meta;
    }
    const meta = change(info.meta);
    await this.d.remote.copy(key, key, { replaceMetadata: true, meta, contentType: info.contentType, ifSourceMatch: info.etag, tagCount: info.tagCount });
    return meta;
  }

  chmod(path: string, mode: number): Promise<void> {
    return this.setAttr(path, (a) => ({ ...a, mode: (a.mode & S_IFMT) | (mode & 0o7777), ctime: Date.now() }));
  }

  chown(path: string, uid: number, gid: number): Promise<void> {
    const keep = 0xffffffff;
    return this.setAttr(path, (a) => ({ ...a, uid: uid === keep || uid === -1 ? a.uid : uid, gid: gid === keep || gid === -1 ? a.gid : gid, ctime: Date.now() }));
  }

  /** utimensat(2): either time may be UTIME_NOW or UTIME_OMIT (see posix.utimeArg); the change time moves. */
  utimens(path: string, atime: number, mtime: number): Promise<void> {
    const now = Date.now();
    const at = utimeArg(atime, now);
    const mt = utimeArg(mtime, now);
    return this.setAttr(path, (a) => ({ ...a, atime: at ?? a.atime ?? a.mtime, mtime: mt ?? a.mtime, ctime: now }));
  }

  // ---- extended attributes ----

  private async settled(path: string): Promise<Attr> {
    const st = this.d.writer.get(path);
    if (st && st.dirty) await this.d.writer.upload(st);
    return this.d.getattr(path);
  }

  async getxattr(path: string, name: string): Promise<Buffer> {
    // other namespaces (security.*, system.posix_acl_*) are not supported, as setxattr says
    if (!name.startsWith('user.')) throw fsError(E.ENOTSUP);
    const a = await this.d.getattr(path);
    if (name.startsWith(xattr.TAG)) {
      const tags = await this.d.client.getTags(this.d.bucket, this.objectKey(path, a));
      const v = tags[name.slice(xattr.TAG.length)];
      if (v === undefined) throw fsError(E.ENODATA);
      return Buffer.from(v);
    }
    const v = xattr.get(a.meta, name);
    if (v === undefined) throw fsError(E.ENODATA);
    return v;
  }

  async listxattr(path: string): Promise<string[]> {
    const a = await this.d.getattr(path);
    const names = xattr.list(a.meta);
    if (path !== '/') {
      const tags = await this.d.client.getTags(this.d.bucket, this.objectKey(path, a)).catch(() => ({}));
      for (const k of Object.keys(tags)) names.push(xattr.TAG + k);
    }
    return names;
  }

  async setxattr(path: string, name: string, value: Buffer): Promise<void> {
    this.d.writable();
    if (!name.startsWith('user.')) throw fsError(E.ENOTSUP);
    const a = await this.settled(path);
    if (path === '/') throw fsError(E.ENOTSUP);
    if (name.startsWith(xattr.TAG)) {
      const key = this.objectKey(path, a);
      const tags = await this.d.client.getTags(this.d.bucket, key);
      tags[name.slice(xattr.TAG.length)] = value.toString('utf8');
      await this.d.client.putTags(this.d.bucket, key, tags);
      return;
    }
    const meta = await this.replaceMeta(path, a, (m) => xattr.set(m, name, value));
    this.d.cache.set(path, { ...a, meta });
  }

  async removexattr(path: string, name: string): Promise<void> {
    this.d.writable();
    if (!name.startsWith('user.')) throw fsError(E.ENOTSUP);
    const a = await this.settled(path);
    if (name.startsWith(xattr.TAG)) {
      const key = this.objectKey(path, a);
      const tags = await this.d.client.getTags(this.d.bucket, key);
      const k = name.slice(xattr.TAG.length);
      if (!(k in tags)) throw fsError(E.ENODATA);
      delete tags[k];
      if (Object.keys(tags).length) await this.d.client.putTags(this.d.bucket, key, tags);
      else await this.d.client.deleteTags(this.d.bucket, key);
      return;
    }
    if (xattr.get(a.meta, name) === undefined) throw fsError(E.ENODATA);
    const meta = await this.replaceMeta(path, a, (m) => xattr.remove(m, name));
    this.d.cache.set(path, { ...a, meta });
  }

  private objectKey(path: string, a: Attr): string {
    return a.kind === 'dir' ? this.d.remote.dirKey(path) : this.d.remote.key(path);
  }
}
