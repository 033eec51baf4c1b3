// The write side of the mount: the table of staged files (one per path being
// written), their journal records, and their way into the bucket: upload on
// close or after the write-back delay, retries with backoff, the conflict rule
// (another writer's version stays, ours goes next to it), and recovery after a
// crash. The namespace and the open handles only ask it for what is staged.
import * as fs from 'node:fs';
import type { Log } from '../cli/log';
import { SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';
import { Attr, metaFromAttr } from './attrs';
import { MetaCache } from './cache';
import { ConditionalMode, describeMode } from './conditional';
import { E, fsError } from './errors';
import { Journal, JournalRecord } from './journal';
import { contentTypeFor } from './mime';
import { Remote } from './remote';
import { Staged } from './staged';
import { checkUnchanged, ConflictError, DEFAULT_UPLOAD, partSizeFor, UntrustedConditionError, UploadResult, UploadTuning, uploadFile } from './uploader';
import { MemoryBudget, UNBOUNDED } from './budget';
import { PartStreamer, withoutTimes } from './streamer';

/** CopyObject's limit: a streamed object whose metadata must change afterwards is copied onto itself only up to this. */
const MAX_COPY = 5 * 1024 ** 3;
/** the uploaded front of a staging file is recycled in steps of this size (Writer.recycle) */
const RECYCLE_STEP = 16 * 1024 * 1024;

/** how long a file stays open being written before its journal record says so (Writer.noteOpenSoon) */
export const OPEN_RECORD_MS = 1000;

export interface WriterOptions {
  client: SvcClient;
  remote: Remote;
  cache: MetaCache;
  journal: Journal;
  log: Log;
  /** write-back: close returns once staged and journaled; the upload follows after this delay (0: upload on close) */
  writeBackMs: number;
  /**
   * How uploads keep another writer's version: probed while the mount already
   * serves (uploads wait for the answer); may be demoted at run time.
   */
  conditional: ConditionalMode | Promise<ConditionalMode>;
  /** asks the mount to run its probes now: an upload needs their answer */
  wantProbes?: () => void;
  upload?: UploadTuning;
  /** every buffer of an upload comes from this budget */
  budget?: MemoryBudget;
  /** send the parts of a new file while it is being written (upload on close only; default on) */
  streaming?: boolean;
  /** a directory gained an entry outside any operation on it (a conflict copy): the addon's attributes go */
  treeChanged?: () => void;
  /** the object at path now holds exactly the bytes written through the mount (the kernel's pages for it) */
  uploaded?: (path: string, etag: string) => void;
  /** write back [writeFrom, writeTo) of a staging file and drop [0, dropTo) from the page cache (patched fuse-native: Fuse.svcfsRecycle) */
  recycle?: (fd: number, dropTo: number, writeFrom: number, writeTo: number) => void;
}

export interface WriterStats {
  staged: number;
  pendingUploads: number;
  pendingBytes: number;
  uploads: number;
  /** parts sent while their files were still being written */
  streamedParts: number;
  /** MiB of staging files dropped from the page cache once uploaded as parts */
  recycledMiB: number;
  uploadErrors: number;
  lastUploadError?: string;
  conflicts: number;
  recovered: number;
  writeBackSec: number;
  conditionalWrites: string;
}

export class Writer {
  private readonly staged = new Map<string, Staged>();
  private readonly client: SvcClient;
  private readonly remote: Remote;
  private readonly journal: Journal;
  private readonly log: Log;
  private uploads = 0;
  private streamedParts = 0;
  private recycled = 0;
  private uploadErrors = 0;
  private lastUploadError?: string;
  private conflicts = 0;
  private recovered = 0;
  /** the conditional mode; 'probing' until the mount's probe answers (uploads wait for `probed`) */
  private mode: ConditionalMode | 'probing' = 'probing';
  private readonly probed: Promise<void>;

  constructor(private readonly o: WriterOptions) {
    this.client = o.client;
    this.remote = o.remote;
    this.journal = o.journal;
    this.log = o.log;
    this.probed = Promise.resolve(o.conditional).then((m) => { this.mode = m; });
  }

  get writeBack(): boolean {
    return this.o.writeBackMs > 0;
  }

  // ---- the table of staged files ----

  /** The staged file of a path, unless it was deleted. */
  get(path: string): Staged | undefined {
    const st = this.staged.get(path);
    return st && !st.deleted ? st : undefined;
  }

  entries(): IterableIterator<[string, Staged]> {
    return this.staged.entries();
  }

  hasStagedBelow(path: string): boolean {
    const pre = path + '/';
    for (const [p, st] of this.staged) if (p.startsWith(pre) && !st.deleted) return true;
    return false;
  }

  /** The staged file of a path, created from the existing object when there is none. */
  async stage(path: string, a: Attr): Promise<Staged> {
    let st = this.get(path);
    if (!st) {
      const old = this.staged.get(path);
      if (old) await this.discard(old);
      st = await Staged.create(this.journal.stagingDir, path, this.client, this.remote.bucket, { key: this.remote.key(path), size: a.size, etag: a.etag }, a);
      this.staged.set(path, st);
    }
    return st;
  }

  /** A new, empty file (create(2)); whatever was staged at the path goes. */
  async create(path: string, attr: Attr): Promise<Staged> {
    const old = this.staged.get(path);
    if (old) await this.discard(old);
    const st = await Staged.create(this.journal.stagingDir, path, this.client, this.remote.bucket, undefined, attr);
    this.staged.set(path, st);
    this.noteOpenSoon(st);
    return st;
  }

  /** The path was unlinked: forget its staged bytes (now, or when the last handle closes). */
  async unlinked(path: string): Promise<void> {
    const st = this.staged.get(path);
    if (!st) return;
    st.deleted = true;
    if (st.timer) clearTimeout(st.timer);
    this.journal.remove(st.id);
    if (st.refs <= 0) await this.discard(st);
    else this.staged.delete(path);
  }

  /** A file was renamed on the server: its staged file (if any) moves with it. */
  async moved(from: string, to: string, etag: string): Promise<void> {
    // a file renamed over may still be open (editors save this way): it lives on until closed, and is not uploaded
    await this.unlinked(to);
    const st = this.staged.get(from);
    if (!st) return;
    this.staged.delete(from);
    st.path = to;
    st.base = { key: this.remote.key(to), size: 0, etag };
    this.staged.set(to, st);
  }

  /** A directory was renamed: what was staged below it now lives below the new name. */
  movedDir(from: string, to: string): void {
    for (const [p, st] of [...this.staged]) {
      if (!p.startsWith(from + '/')) continue;
      this.staged.delete(p);
      st.path = to + p.slice(from.length);
      this.staged.set(st.path, st);
    }
  }

  /** Is anything staged below a directory? */
  hasBelow(path: string): boolean {
    for (const p of this.staged.keys()) if (p.startsWith(path + '/')) return true;
    return false;
  }

  /** Upload what is staged below a directory (before the directory is copied). */
  async settleBelow(path: string): Promise<void> {
    for (const [p, st] of this.staged) if (p.startsWith(path + '/')) await this.upload(st);
  }

  /** Record that a staged file was written to (its journal record says it is open). */
  touched(st: Staged): void {
    if (!st.journaled) this.noteOpenSoon(st);
    if (!st.streamer) this.maybeStream(st);
  }

  private get tuning(): UploadTuning {
    return this.o.upload ?? DEFAULT_UPLOAD;
  }

  /**
   * A new file (nothing of an older object in it) that has grown past the
   * multipart threshold starts sending its parts while it is written. Not in
   * write-back mode, whose point is to wait.
   */
  private maybeStream(st: Staged): void {
    const t = this.tuning;
    if (this.writeBack || this.o.streaming === false || st.deleted || st.hasBaseBytes || st.size <= t.multipartThreshold) return;
    const s = new PartStreamer({
      client: this.client, bucket: this.remote.bucket, key: this.remote.key(st.path), partSize: t.partSize, maxParts: t.maxParts,
      concurrency: t.concurrency, budget: this.o.budget ?? UNBOUNDED, read: (b, n, p) => st.readStaged(b, n, p),
      create: { meta: withoutTimes(metaFromAttr(st.attr)), contentType: contentTypeFor(st.path) },
      // the multipart upload it starts is in the record at once, for a crash to abort
      started: () => { if (st.journaled !== 'pending' && st.streamer === s) this.note(st, 'open'); },
      sentThrough: (end) => this.recycle(st, end),
    });
    st.streamer = s;
    s.wrote(0, 0, st.size);
  }

  /**
   * The front of a big staging file that went up as parts while the file is
   * written: its write-back starts, and the front started a step earlier
   * (written back by now, mostly) leaves the page cache. A big file then
   * holds a window of memory, not its size, and what was dropped is read back
   * from the disk if needed (an edit of a part already sent, a read).
   */
  private recycle(st: Staged, end: number): void {
    if (!this.o.recycle || end - st.recycleStarted < RECYCLE_STEP) return;
    let fd: number;
    try {
      fd = st.source.fd;
    } catch {
      return; // closed meanwhile
    }
    const drop = st.recycleStarted;
    this.o.recycle(fd, drop, drop, end);
    this.recycled += drop - st.recycleDropped;
    st.recycleDropped = drop;
    st.recycleStarted = end;
  }

  /** Forget a staged file: its timer, its unfinished multipart upload, its journal record and bytes. */
  async discard(st: Staged): Promise<void> {
    // first: the addon stops writing for its handles, and what it wrote last tells nobody (no streamer starts for a file that goes)
    st.offload?.detachAll(st);
    if (this.staged.get(st.path) === st) this.staged.delete(st.path);
    if (st.timer) clearTimeout(st.timer);
    st.timer = undefined;
    if (st.openTimer) clearTimeout(st.openTimer);
    st.openTimer = undefined;
    if (st.streamer) {
      const s = st.streamer;
      st.streamer = undefined;
      await s.abort();
    }
    if (st.multipart) {
      const mp = st.multipart;
      st.multipart = undefined;
      await this.client.abortMultipart(this.remote.bucket, st.base?.key ?? this.remote.key(st.path), mp.uploadId).catch(() => undefined);
    }
    if (st.journaled) this.journal.remove(st.id);
    st.journaled = undefined;
    await st.close(true);
  }

  // ---- close, fsync, and the way to the bucket ----

  /**
   * close(2) and fsync(2). Upload on close: upload what is staged, and the
   * application gets EIO if that fails. Write-back: make the staged bytes
   * durable and journaled, and let the upload follow after the delay.
   */
  async flush(st: Staged): Promise<void> {
    if (!st.dirty || st.deleted) return;
    if (this.writeBack) {
      await this.commitLocal(st);
      this.schedule(st, this.o.writeBackMs);
      return;
    }
    await this.upload(st);
  }

  /** The last handle of a staged file closed (or one of several). */
  async release(st: Staged): Promise<void> {
    st.refs--;
    if (st.dirty && !st.deleted) {
      if (this.writeBack) {
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
        if (!st.timer) this.schedule(st, backoff(st.failures));
        return;
      }
    }
    // close(2) need not wait for the staging file's removal (thread-pool round trips, half a
    // millisecond of every small file copied); the staged file is forgotten at once all the same
    if (st.refs <= 0 && (!st.dirty || st.deleted)) {
      this.discard(st).catch((e) => this.log.warn({ path: st.path, err: (e as Error).message }, 'removing a staged file failed'));
    }
  }

  /** truncate(2) of a path nobody has open: stage, cut, upload. */
  async truncateClosed(path: string, a: Attr, size: number): Promise<void> {
    const st = await this.stage(path, a);
    try {
      await st.truncate(size);
      await this.upload(st);
    } finally {
      if (st.refs <= 0 && !st.dirty) await this.discard(st);
    }
  }

  /**
   * The 'open' record of a file being written, once it has stayed open for
   * OPEN_RECORD_MS: a file copied in and closed at once (cp, tar) is uploaded
   * at close without one (a temporary file, a rename and an unlink less per
   * file); a crash in that first second loses only the set-aside copy of bytes
   * nobody had closed.
   */
  private noteOpenSoon(st: Staged): void {
    if (st.journaled || st.openTimer) return;
    st.openTimer = setTimeout(() => {
      st.openTimer = undefined;
      if (!st.journaled && st.dirty && !st.deleted && this.staged.get(st.path) === st) this.note(st, 'open');
    }, OPEN_RECORD_MS);
    st.openTimer.unref();
  }

  /** Write (or rewrite) the journal record of a staged file. */
  private note(st: Staged, state: 'open' | 'pending'): void {
    const rec: JournalRecord = {
      id: st.id, path: st.path, key: this.remote.key(st.path), bucket: this.remote.bucket, file: st.file, size: st.size,
      baseEtag: st.base?.etag, meta: metaFromAttr(st.attr), contentType: contentTypeFor(st.path), state, updated: Date.now(),
      multipart: st.multipart, streaming: st.streamer?.id,
    };
    this.journal.write(rec, state === 'pending');
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
          if (!st.deleted && st.dirty) this.schedule(st, backoff(st.failures));
        },
      );
    }, delayMs);
  }

  /** The condition an upload carries, and how, in the mount's conditional mode. */
  private async conditionFor(st: Staged) {
    if (this.mode === 'probing') this.o.wantProbes?.();
    await this.probed;
    const m = this.mode as ConditionalMode;
    if (m.kind === 'off') return { cond: {}, head: false };
    const cond = st.base?.etag ? { ifMatch: st.base.etag } : { ifNoneMatch: '*' };
    if (m.kind === 'head') return { cond, head: true };
    return { cond: { ...cond, unquotedIfMatch: m.etagForm === 'unquoted', headBeforeComplete: !m.multipart }, head: false };
  }

  /** The store answered 412 to a condition that held: use the HEAD check from now on. */
  private distrustConditions(e: UntrustedConditionError): void {
    if (this.mode === 'probing' || this.mode.kind !== 'conditional') return;
    this.mode = { kind: 'head', reason: e.message };
    this.log.warn({ key: e.key, mode: describeMode(this.mode) }, 'conditional writes are not reliable on this store; switching to the HEAD check');
  }

  /** Upload a staged file until what is in the bucket matches it (one upload at a time per file). */
  async upload(st: Staged): Promise<void> {
    while (st.dirty && !st.deleted) {
      if (st.uploading) {
        await st.uploading.catch(() => undefined);
        if (st.lastError) throw fsError(E.EIO, String(st.lastError));
        continue;
      }
      st.uploading = this.uploadOnce(st);
      try {
        await st.uploading;
        st.lastError = undefined;
      } catch (e) {
        if (e instanceof UntrustedConditionError) {
          this.distrustConditions(e);
          continue; // again, with the HEAD check
        }
        st.lastError = e;
        this.uploadErrors++;
        this.lastUploadError = `${this.remote.key(st.path)}: ${(e as Error).message}`;
        this.log.error({ key: this.remote.key(st.path), err: (e as Error).message }, 'upload failed; the data stays staged');
        throw fsError(E.EIO, (e as Error).message);
      } finally {
        st.uploading = undefined;
      }
    }
  }

  private async uploadOnce(st: Staged): Promise<void> {
    const gen = st.gen;
    const started = Date.now();
    const bucket = this.remote.bucket;
    // Upload on close promises nothing until the upload is done, so the staged
    // bytes need not be made durable first; after a failure they are (below).
    if (this.writeBack || st.journaled === 'pending') await this.commitLocal(st);
    else await this.fill(st);
    const path = st.path;
    const key = this.remote.key(path);
    const meta = metaFromAttr(st.attr);
    const t = this.o.upload ?? DEFAULT_UPLOAD;
    const { cond, head } = await this.conditionFor(st);
    const streamed = st.streamer ? await this.takeStream(st, gen, key) : undefined;
    // a multipart upload begun for other bytes is of no use any more
    if (st.multipart && st.multipart.gen !== gen) {
      await this.client.abortMultipart(bucket, key, st.multipart.uploadId).catch(() => undefined);
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
      if (head) await checkUnchanged(this.client, bucket, key, cond);
      r = await uploadFile(this.client, bucket, key, st.file, st.size, { meta, contentType: contentTypeFor(path), ...(head ? {} : cond) }, t, { ...hooks, budget: this.o.budget, source: st.source });
      if (streamed) r = await this.completeMeta(st, key, r, streamed, meta);
    } catch (e) {
      if (e instanceof UntrustedConditionError) throw e;
      if (!(e instanceof ConflictError)) {
        await this.commitLocal(st).catch(() => undefined); // keep the bytes safe for the retries to come
        throw e;
      }
      // Keep both: theirs stays at the path, ours goes next to it.
      const other = conflictPath(path);
      target = this.remote.key(other);
      r = await uploadFile(this.client, bucket, target, st.file, st.size, { meta, contentType: contentTypeFor(other) }, t, { budget: this.o.budget, source: st.source });
      this.conflicts++;
      this.o.treeChanged?.();
      this.log.warn({ key, keptAs: target }, 'conflict: the object changed on the server during this edit; both versions kept');
      this.o.cache.invalidate(path);
      this.o.cache.invalidateParent(path);
      if (this.staged.get(path) === st) this.staged.delete(path);
      st.path = other;
      this.staged.set(other, st);
    }
    st.uploadedGen = gen;
    st.base = { key: target, size: 0, etag: r.etag };
    st.attr = { ...st.attr, etag: r.etag, meta, fromMeta: true };
    if (!st.dirty) {
      if (st.journaled) this.journal.remove(st.id);
      st.journaled = undefined;
    }
    this.o.cache.set(st.path, { ...st.attr, kind: 'file', size: st.size });
    if (target === key && st.gen === gen && r.etag) this.o.uploaded?.(st.path, r.etag);
    this.uploads++;
    this.log.debug({ key: target, size: st.size, parts: r.parts, ms: Date.now() - started }, 'uploaded');
  }

  /**
   * The parts a file sent while it was written become the multipart upload
   * this upload resumes (when they fit it); returns the metadata that upload
   * was created with.
   */
  private async takeStream(st: Staged, gen: number, key: string): Promise<Record<string, string> | undefined> {
    const s = st.streamer!;
    st.streamer = undefined;
    const state = s.key === key ? await s.settle(st.size) : undefined;
    const fits = state && state.partSize === partSizeFor(st.size, this.tuning) && st.size > this.tuning.multipartThreshold;
    if (!state || !fits) {
      await s.abort();
      return undefined;
    }
    this.streamedParts += s.sent;
    st.multipart = { ...state, gen };
    return s.meta;
  }

  /**
   * A streamed upload was created without times, and before the file was
   * complete. Its LastModified is the mtime; when the metadata changed since
   * (chmod, chown, or times set explicitly, as cp -p and tar do through the
   * open file), the object is copied onto itself with the metadata it must have.
   */
  private async completeMeta(st: Staged, key: string, r: UploadResult, created: Record<string, string>, meta: Record<string, string>): Promise<UploadResult> {
    const explicitTimes = st.attr.mtime !== st.wroteAt;
    if (!explicitTimes && sameMeta(withoutTimes(meta), created)) return r;
    if (st.size > MAX_COPY) {
      this.log.warn({ key }, 'metadata set during a streamed upload of more than 5 GiB is not recorded on the object');
      return r;
    }
    const bucket = this.remote.bucket;
    const etag = await this.client.copy({ bucket, key }, bucket, key, { meta, contentType: contentTypeFor(st.path), replaceMetadata: true, ifSourceMatch: r.etag });
    return { ...r, etag: etag || r.etag };
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
      if (r.bucket !== this.remote.bucket || !fs.existsSync(r.file)) {
        this.journal.remove(r.id);
        continue;
      }
      if (r.state !== 'pending') {
        // parts it was sending while written are of no use now
        if (r.streaming) await this.client.abortMultipart(r.bucket, r.key, r.streaming).catch(() => undefined);
        const where = this.journal.setAside(r);
        this.log.warn({ path: r.path, keptAt: where }, 'a file that was never closed before the crash was set aside, not uploaded');
        continue;
      }
      const now = Date.now();
      const attr = { ...this.remote.attrOf({ key: r.key, size: r.size, etag: r.baseEtag ?? '', lastModified: new Date(now), meta: r.meta }), etag: r.baseEtag };
      const st = await Staged.adopt(r.file, r.path, this.client, this.remote.bucket, r.key, r.size, r.baseEtag, attr);
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

  stats(): WriterStats {
    let pending = 0;
    let bytes = 0;
    let streaming = 0;
    for (const st of this.staged.values()) {
      streaming += st.streamer?.sent ?? 0;
      if (st.dirty && !st.deleted) {
        pending++;
        bytes += st.size;
      }
    }
    return {
      staged: this.staged.size, pendingUploads: pending, pendingBytes: bytes, uploads: this.uploads, streamedParts: this.streamedParts + streaming, recycledMiB: Math.round(this.recycled / (1024 * 1024)), uploadErrors: this.uploadErrors,
      lastUploadError: this.lastUploadError, conflicts: this.conflicts, recovered: this.recovered, writeBackSec: this.o.writeBackMs / 1000,
      conditionalWrites: this.mode === 'probing' ? 'probing the store' : describeMode(this.mode),
    };
  }
}

function sameMeta(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

function backoff(failures: number): number {
  return Math.min(1000 * 2 ** Math.min(failures, 6), 60_000);
}

/** Where our version goes when another writer's is in the way: `name.conflict-<UTC time>`. */
function conflictPath(path: string): string {
  const ts = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  return `${path}.conflict-${ts}`;
}
