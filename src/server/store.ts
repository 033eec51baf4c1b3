// Persistent object store: an index in SQLite and content in blob files named
// by generated ids (never by key). A blob is written under tmp/, verified,
// fsync'd and renamed into blobs/ before the index row that refers to it is
// committed, so a crash leaves the old object or the new one, never a part.
// Anything in tmp/ or blobs/ that no row refers to is swept at start-up.
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface Segment {
  id: string;
  size: number;
}

export interface ObjectRow {
  bucket: string;
  key: string;
  segments: Segment[];
  size: number;
  etag: string; // unquoted
  contentType: string;
  mtime: number; // ms since epoch
  meta: Record<string, string>; // user metadata, names lower-case without prefix
  tags: Array<[string, string]>;
  publicRead: boolean;
  headers: Record<string, string>; // stored standard headers: cache-control, content-encoding, ...
}

export interface UploadRow {
  uploadId: string;
  bucket: string;
  key: string;
  created: number;
  contentType: string;
  meta: Record<string, string>;
  tags: Array<[string, string]>;
  publicRead: boolean;
  headers: Record<string, string>;
}

export interface PartRow {
  uploadId: string;
  partNumber: number;
  blob: string;
  size: number;
  etag: string;
  mtime: number;
}

export interface ListEntry {
  key: string;
  size: number;
  etag: string;
  mtime: number;
  /** JSON of the user metadata */
  meta: string;
}

export interface ListResult {
  contents: ListEntry[];
  prefixes: string[];
  /** for common prefixes that have a marker object (`dir/`), its metadata JSON */
  markers: Map<string, string>;
  truncated: boolean;
  /** the last key or common prefix returned: where the next page starts after */
  last?: string;
}

const COMPLETED_KEPT_MS = 24 * 3600 * 1000;

export function newId(): string {
  return randomBytes(16).toString('hex');
}

/** The smallest string above every string that starts with p (UTF-8 binary order). */
export function prefixSuccessor(p: string): string {
  const cps = [...p];
  const last = cps.pop()!;
  return cps.join('') + String.fromCodePoint(last.codePointAt(0)! + 1);
}

export class Store {
  readonly db: Database.Database;
  private readonly blobDir: string;
  private readonly tmpDir: string;
  private readonly st: Record<string, Database.Statement>;

  constructor(readonly dataDir: string) {
    this.blobDir = path.join(dataDir, 'blobs');
    this.tmpDir = path.join(dataDir, 'tmp');
    fs.mkdirSync(this.blobDir, { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.tmpDir, { recursive: true, mode: 0o700 });
    this.db = new Database(path.join(dataDir, 'index.sqlite3'));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS objects (
        bucket TEXT NOT NULL, key TEXT NOT NULL, segments TEXT NOT NULL, size INTEGER NOT NULL,
        etag TEXT NOT NULL, content_type TEXT NOT NULL, mtime INTEGER NOT NULL, meta TEXT NOT NULL,
        tags TEXT NOT NULL, public_read INTEGER NOT NULL, headers TEXT NOT NULL,
        PRIMARY KEY (bucket, key)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS uploads (
        upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, created INTEGER NOT NULL,
        content_type TEXT NOT NULL, meta TEXT NOT NULL, tags TEXT NOT NULL, public_read INTEGER NOT NULL,
        headers TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS parts (
        upload_id TEXT NOT NULL, part_number INTEGER NOT NULL, blob TEXT NOT NULL, size INTEGER NOT NULL,
        etag TEXT NOT NULL, mtime INTEGER NOT NULL, PRIMARY KEY (upload_id, part_number)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS completed (
        upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, etag TEXT NOT NULL, completed INTEGER NOT NULL);
    `);
    const p = (sql: string) => this.db.prepare(sql);
    this.st = {
      get: p('SELECT * FROM objects WHERE bucket = ? AND key = ?'),
      put: p(`INSERT OR REPLACE INTO objects (bucket, key, segments, size, etag, content_type, mtime, meta, tags, public_read, headers)
              VALUES (@bucket, @key, @segments, @size, @etag, @content_type, @mtime, @meta, @tags, @public_read, @headers)`),
      del: p('DELETE FROM objects WHERE bucket = ? AND key = ?'),
      setTags: p('UPDATE objects SET tags = ? WHERE bucket = ? AND key = ?'),
      list: p(`SELECT key, size, etag, mtime, meta FROM objects WHERE bucket = ? AND key > ? AND key >= ? ORDER BY key LIMIT ?`),
      getUpload: p('SELECT * FROM uploads WHERE upload_id = ?'),
      putUpload: p(`INSERT INTO uploads (upload_id, bucket, key, created, content_type, meta, tags, public_read, headers)
                    VALUES (@upload_id, @bucket, @key, @created, @content_type, @meta, @tags, @public_read, @headers)`),
      delUpload: p('DELETE FROM uploads WHERE upload_id = ?'),
      listUploads: p('SELECT * FROM uploads WHERE bucket = ? AND key >= ? ORDER BY key, created LIMIT 1000'),
      getPart: p('SELECT * FROM parts WHERE upload_id = ? AND part_number = ?'),
      putPart: p(`INSERT OR REPLACE INTO parts (upload_id, part_number, blob, size, etag, mtime)
                  VALUES (?, ?, ?, ?, ?, ?)`),
      listParts: p('SELECT * FROM parts WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?'),
      allParts: p('SELECT * FROM parts WHERE upload_id = ? ORDER BY part_number'),
      delParts: p('DELETE FROM parts WHERE upload_id = ?'),
      getCompleted: p('SELECT * FROM completed WHERE upload_id = ?'),
      putCompleted: p('INSERT OR REPLACE INTO completed (upload_id, bucket, key, etag, completed) VALUES (?, ?, ?, ?, ?)'),
      expireCompleted: p('DELETE FROM completed WHERE completed < ?'),
    };
  }

  close(): void {
    this.db.close();
  }

  // ---- blobs ----

  /** A fresh temporary file path for an incoming body. */
  tempPath(): string {
    return path.join(this.tmpDir, newId());
  }

  blobPath(id: string): string {
    return path.join(this.blobDir, id.slice(0, 2), id);
  }

  /** Move a verified, fsync'd temporary file into blobs/; returns its id. */
  adoptTemp(tmp: string): string {
    const id = newId();
    const dest = this.blobPath(id);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.renameSync(tmp, dest);
    return id;
  }

  /** Remove blobs no longer referenced (after the row that replaced them committed). */
  dropBlobs(ids: Iterable<string>): void {
    for (const id of ids) fs.rm(this.blobPath(id), { force: true }, () => undefined);
  }

  /** Open every segment now, so that a concurrent overwrite cannot unlink them under a reader. */
  openSegments(row: ObjectRow): number[] {
    const fds: number[] = [];
    try {
      for (const s of row.segments) fds.push(fs.openSync(this.blobPath(s.id), 'r'));
    } catch (e) {
      for (const fd of fds) fs.closeSync(fd);
      throw e;
    }
    return fds;
  }

  /** Delete temporaries and blobs that no index row refers to. Returns how many were swept. */
  sweep(): number {
    let n = 0;
    for (const f of fs.readdirSync(this.tmpDir)) {
      fs.rmSync(path.join(this.tmpDir, f), { force: true });
      n++;
    }
    const live = new Set<string>();
    for (const r of this.db.prepare('SELECT segments FROM objects').iterate() as Iterable<{ segments: string }>) {
      for (const s of JSON.parse(r.segments) as Segment[]) live.add(s.id);
    }
    for (const r of this.db.prepare('SELECT blob FROM parts').iterate() as Iterable<{ blob: string }>) live.add(r.blob);
    for (const d of fs.readdirSync(this.blobDir)) {
      const dir = path.join(this.blobDir, d);
      for (const f of fs.readdirSync(dir)) {
        if (!live.has(f)) {
          fs.rmSync(path.join(dir, f), { force: true });
          n++;
        }
      }
    }
    return n;
  }

  // ---- objects ----

  get(bucket: string, key: string): ObjectRow | undefined {
    const r = this.st.get.get(bucket, key) as any;
    return r ? rowToObject(r) : undefined;
  }

  /** Insert or replace; returns the blobs of the replaced object, for the caller to drop. */
  put(o: ObjectRow, check?: (old: ObjectRow | undefined) => void): Segment[] {
    return this.db.transaction(() => {
      const old = this.get(o.bucket, o.key);
      check?.(old);
      this.st.put.run({
        bucket: o.bucket, key: o.key, segments: JSON.stringify(o.segments), size: o.size, etag: o.etag,
        content_type: o.contentType, mtime: o.mtime, meta: JSON.stringify(o.meta), tags: JSON.stringify(o.tags),
        public_read: o.publicRead ? 1 : 0, headers: JSON.stringify(o.headers),
      });
      if (!old) return [];
      const keep = new Set(o.segments.map((s) => s.id));
      return old.segments.filter((s) => !keep.has(s.id));
    })();
  }

  /** Delete; returns the blobs to drop (none when the key did not exist). */
  delete(bucket: string, key: string): Segment[] {
    return this.db.transaction(() => {
      const old = this.get(bucket, key);
      if (!old) return [];
      this.st.del.run(bucket, key);
      return old.segments;
    })();
  }

  /**
   * Delete many keys in one transaction (batch delete): one commit, and so one
   * sync of the log, for the lot instead of one per key. Returns the blobs to drop.
   */
  deleteMany(bucket: string, keys: string[]): Segment[] {
    return this.db.transaction(() => keys.flatMap((k) => this.delete(bucket, k)))();
  }

  setTags(bucket: string, key: string, tags: Array<[string, string]>): boolean {
    return this.st.setTags.run(JSON.stringify(tags), bucket, key).changes > 0;
  }

  /**
   * One page of a listing in UTF-8 binary key order. `after` is exclusive;
   * with a delimiter, keys below a common prefix collapse into it.
   */
  list(bucket: string, prefix: string, delimiter: string, after: string, maxKeys: number): ListResult {
    const out: ListResult = { contents: [], prefixes: [], markers: new Map(), truncated: false };
    let excl = after;
    let incl = prefix;
    // Resuming after a common prefix (the last thing a page returned) skips everything below it.
    if (delimiter && after.startsWith(prefix)) {
      const rest = after.slice(prefix.length);
      const at = rest.indexOf(delimiter);
      if (at >= 0 && at + delimiter.length === rest.length) {
        const next = prefixSuccessor(after);
        if (next > incl) incl = next;
        excl = '';
      }
    }
    if (maxKeys <= 0) {
      const probe = this.st.list.all(bucket, excl, incl, 1) as ListEntry[];
      out.truncated = probe.length > 0 && probe[0].key.startsWith(prefix);
      return out;
    }
    for (;;) {
      // no more rows than the page can still take, and one to tell whether it is truncated
      const want = Math.min(1000, maxKeys - out.contents.length - out.prefixes.length + 1);
      const rows = this.st.list.all(bucket, excl, incl, want) as ListEntry[];
      if (rows.length === 0) return out;
      for (const r of rows) {
        if (!r.key.startsWith(prefix)) return out;
        if (out.contents.length + out.prefixes.length >= maxKeys) {
          out.truncated = true;
          return out;
        }
        const rest = r.key.slice(prefix.length);
        const at = delimiter ? rest.indexOf(delimiter) : -1;
        if (at >= 0) {
          const cp = prefix + rest.slice(0, at + delimiter.length);
          out.prefixes.push(cp);
          if (r.key === cp) out.markers.set(cp, r.meta); // the marker sorts first below its prefix
          out.last = cp;
          incl = prefixSuccessor(cp);
          excl = '';
          break; // re-query past the whole common prefix
        }
        out.contents.push(r);
        out.last = r.key;
        excl = r.key;
      }
    }
  }

  // ---- multipart ----

  createUpload(u: UploadRow): void {
    this.st.putUpload.run({
      upload_id: u.uploadId, bucket: u.bucket, key: u.key, created: u.created, content_type: u.contentType,
      meta: JSON.stringify(u.meta), tags: JSON.stringify(u.tags), public_read: u.publicRead ? 1 : 0,
      headers: JSON.stringify(u.headers),
    });
  }

  getUpload(uploadId: string): UploadRow | undefined {
    const r = this.st.getUpload.get(uploadId) as any;
    return r ? rowToUpload(r) : undefined;
  }

  listUploads(bucket: string, prefix: string): UploadRow[] {
    return (this.st.listUploads.all(bucket, prefix) as any[]).map(rowToUpload).filter((u) => u.key.startsWith(prefix));
  }

  /** Record a part; returns the blob of a part it replaced. */
  putPart(p: PartRow): string | undefined {
    return this.db.transaction(() => {
      if (!this.st.getUpload.get(p.uploadId)) return p.blob; // aborted meanwhile: drop the new blob
      const old = this.st.getPart.get(p.uploadId, p.partNumber) as PartRow | undefined;
      this.st.putPart.run(p.uploadId, p.partNumber, p.blob, p.size, p.etag, p.mtime);
      return old?.blob;
    })();
  }

  listParts(uploadId: string, after: number, max: number): PartRow[] {
    return (this.st.listParts.all(uploadId, after, max) as any[]).map(rowToPart);
  }

  allParts(uploadId: string): PartRow[] {
    return (this.st.allParts.all(uploadId) as any[]).map(rowToPart);
  }

  /** Remove an upload and its parts; returns the part blobs to drop. */
  abortUpload(uploadId: string): string[] {
    return this.db.transaction(() => {
      const parts = this.allParts(uploadId);
      this.st.delParts.run(uploadId);
      this.st.delUpload.run(uploadId);
      return parts.map((p) => p.blob);
    })();
  }

  /**
   * Turn an upload into an object in one transaction. The object's segments are
   * the chosen parts' blobs (no copy); returns blobs to drop (unused parts and
   * the replaced object's content).
   */
  completeUpload(uploadId: string, o: ObjectRow, check?: (old: ObjectRow | undefined) => void): string[] {
    return this.db.transaction(() => {
      const used = new Set(o.segments.map((s) => s.id));
      const unused = this.allParts(uploadId).map((p) => p.blob).filter((b) => !used.has(b));
      const replaced = this.put(o, check).map((s) => s.id);
      this.st.delParts.run(uploadId);
      this.st.delUpload.run(uploadId);
      this.st.putCompleted.run(uploadId, o.bucket, o.key, o.etag, o.mtime);
      this.st.expireCompleted.run(o.mtime - COMPLETED_KEPT_MS);
      return [...unused, ...replaced];
    })();
  }

  /**
   * A completed upload, remembered for a day: a client whose completion reply
   * was lost sends the same completion again and gets the same answer (as S3).
   */
  getCompleted(uploadId: string): { bucket: string; key: string; etag: string } | undefined {
    const r = this.st.getCompleted.get(uploadId) as any;
    return r && r.completed >= Date.now() - COMPLETED_KEPT_MS ? { bucket: r.bucket, key: r.key, etag: r.etag } : undefined;
  }
}

function rowToObject(r: any): ObjectRow {
  return {
    bucket: r.bucket, key: r.key, segments: JSON.parse(r.segments), size: r.size, etag: r.etag,
    contentType: r.content_type, mtime: r.mtime, meta: JSON.parse(r.meta), tags: JSON.parse(r.tags),
    publicRead: r.public_read === 1, headers: JSON.parse(r.headers),
  };
}

function rowToUpload(r: any): UploadRow {
  return {
    uploadId: r.upload_id, bucket: r.bucket, key: r.key, created: r.created, contentType: r.content_type,
    meta: JSON.parse(r.meta), tags: JSON.parse(r.tags), publicRead: r.public_read === 1, headers: JSON.parse(r.headers),
  };
}

function rowToPart(r: any): PartRow {
  return { uploadId: r.upload_id, partNumber: r.part_number, blob: r.blob, size: r.size, etag: r.etag, mtime: r.mtime };
}
