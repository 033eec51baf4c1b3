// The bucket as the filesystem sees it: paths mapped to keys under the mount's
// prefix, lookups (HEAD and a one-key listing in parallel), directory listings
// with the attributes of every entry, and the multi-request operations
// (directory rename, recursive delete) built from the client's operations.
import { SvcClient, ObjectInfo } from '../wire/client';
import { SvcError } from '../wire/errors';
import { Attr, AttrDefaults, attrFromObject, implicitDir } from './attrs';
import { PROBE_NAME } from './conditional';

export class Remote {
  readonly prefix: string;
  /**
   * Does the store put user metadata in listings (svcfs serve's metadata=true
   * extension)? Learned from the first listing with objects in it.
   */
  listingMeta?: boolean;
  /**
   * Does a server-side copy that replaces the metadata keep the object's tags?
   * S3 and svcfs serve: yes. Ceph RGW 16 drops them: probed once the mount
   * serves; a copy that needs the answer asks for the probe and waits for `probed`.
   */
  copyKeepsTags = true;
  probed: Promise<unknown> = Promise.resolve();
  wantProbes?: () => void;

  constructor(readonly client: SvcClient, readonly bucket: string, prefix: string, readonly defaults: AttrDefaults) {
    this.prefix = prefix === '' || prefix.endsWith('/') ? prefix : prefix + '/';
  }

  /** '/a/b' -> 'PREFIX/a/b' */
  key(path: string): string {
    return this.prefix + path.slice(1);
  }

  /** the prefix under which a directory's entries live: 'PREFIX/a/b/' ('PREFIX' for the root) */
  dirKey(path: string): string {
    return path === '/' ? this.prefix : this.key(path) + '/';
  }

  attrOf(info: ObjectInfo, isDirMarker = false): Attr {
    return attrFromObject(this.defaults, { size: info.size, lastModified: info.lastModified, etag: info.etag, meta: info.meta }, isDirMarker);
  }

  /** HEAD of one key; undefined when missing. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    const r = await this.client.head(this.bucket, key);
    return r === 'not-modified' ? undefined : r;
  }

  /**
   * What a path is: a directory (a marker, or keys below it), a file or
   * symlink, or nothing. A directory wins when both exist.
   */
  async stat(path: string): Promise<Attr | null> {
    if (path === '/') return implicitDir(this.defaults);
    const dk = this.dirKey(path);
    const [info, page] = await Promise.all([
      this.head(this.key(path)),
      this.client.listPage(this.bucket, { prefix: dk, maxKeys: 1, metadata: true }),
    ]);
    if (page.contents.length || page.prefixes.length) {
      const first = page.contents[0];
      if (first && first.key === dk) {
        const meta = first.meta ?? (await this.head(dk))?.meta ?? {};
        return attrFromObject(this.defaults, { size: 0, lastModified: first.lastModified, etag: first.etag, meta }, true);
      }
      return implicitDir(this.defaults);
    }
    return info ? this.attrOf(info) : null;
  }

  /** Every entry of a directory with its attributes (from the listing alone: no HEAD per entry). */
  async list(path: string): Promise<Map<string, Attr>> {
    const dk = this.dirKey(path);
    const out = new Map<string, Attr>();
    for await (const page of this.client.list(this.bucket, { prefix: dk, delimiter: '/', metadata: true })) {
      if (page.contents.length) this.listingMeta = page.contents.some((c) => c.meta !== undefined);
      for (const c of page.contents) {
        const name = c.key.slice(dk.length);
        if (!validName(name) || out.get(name)?.kind === 'dir' || name.startsWith(PROBE_NAME)) continue;
        const a = attrFromObject(this.defaults, { size: c.size, lastModified: c.lastModified, etag: c.etag, meta: c.meta ?? {} });
        out.set(name, c.meta === undefined ? { ...a, partial: true } : a);
      }
      for (const p of page.prefixes) {
        const name = p.slice(dk.length, -1);
        if (!validName(name)) continue;
        const marker = page.prefixMeta.get(p);
        // without the extension a prefix may still have a marker with a mode: partial until a HEAD tells
        out.set(name, marker ? attrFromObject(this.defaults, { size: 0, lastModified: new Date(this.defaults.mountTime), meta: marker }, true)
          : { ...implicitDir(this.defaults), partial: this.listingMeta !== true });
      }
    }
    return out;
  }

  /**
   * Server-side copy within the bucket (rename, metadata change) that keeps
   * the tags where the store's copy drops them. `tagCount` (from a HEAD) spares
   * the tag lookup when the object has none.
   */
  async copy(srcKey: string, dstKey: string, o: Parameters<SvcClient['copy']>[3] & { tagCount?: number } = {}): Promise<string> {
    const { tagCount, ...opts } = o;
    if (opts.replaceMetadata && tagCount !== 0) {
      this.wantProbes?.();
      await this.probed;
    }
    const tags = this.copyKeepsTags || !opts.replaceMetadata || tagCount === 0 ? undefined : await this.client.getTags(this.bucket, srcKey);
    const etag = await this.client.copy({ bucket: this.bucket, key: srcKey }, this.bucket, dstKey, opts);
    if (tags && Object.keys(tags).length) await this.client.putTags(this.bucket, dstKey, tags);
    return etag;
  }

  /**
   * The whole attributes of an entry a listing gave without metadata: a HEAD
   * of the object (or of the directory's marker; none: an implicit directory).
   */
  async complete(path: string, a: Attr): Promise<Attr | null> {
    if (a.kind === 'dir') {
      const info = await this.head(this.dirKey(path));
      return info ? this.attrOf(info, true) : implicitDir(this.defaults);
    }
    const info = await this.head(this.key(path));
    return info ? this.attrOf(info) : null;
  }

  /** Is anything below this directory besides its marker? */
  async hasChildren(path: string): Promise<boolean> {
    const dk = this.dirKey(path);
    const page = await this.client.listPage(this.bucket, { prefix: dk, maxKeys: 2 });
    return page.contents.some((c) => c.key !== dk) || page.prefixes.length > 0;
  }

  /** Every key below a directory (marker included), for recursive operations. */
  async allKeys(path: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const page of this.client.list(this.bucket, { prefix: this.dirKey(path) })) for (const c of page.contents) keys.push(c.key);
    return keys;
  }

  /**
   * Rename a directory: copy every key, then batch-delete the sources. On a
   * failure while copying, the sources stay (the copies made are removed).
   */
  async renameDir(from: string, to: string, concurrency = 8): Promise<number> {
    const src = this.dirKey(from);
    const dst = this.dirKey(to);
    const keys = await this.allKeys(from);
    const copied: string[] = [];
    let next = 0;
    let failure: unknown;
    await Promise.all(Array.from({ length: Math.min(concurrency, keys.length) }, async () => {
      while (next < keys.length && !failure) {
        const k = keys[next++];
        try {
          const target = dst + k.slice(src.length);
          await this.copy(k, target);
          copied.push(target);
        } catch (e) {
          failure ??= e;
        }
      }
    }));
    if (failure) {
      await this.client.deleteMany(this.bucket, copied).catch(() => undefined);
      throw failure;
    }
    const res = await this.client.deleteMany(this.bucket, keys);
    if (res.errors.length) throw new SvcError(res.errors[0].code, `could not delete ${res.errors.length} source keys, first ${res.errors[0].key}: ${res.errors[0].message}`);
    return keys.length;
  }
}

/** Keys whose last segment cannot be a file name are not shown. */
export function validName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && Buffer.byteLength(name) <= 255;
}
