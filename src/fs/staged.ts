// A file open for writing: its bytes live in a staging file in the cache
// directory, so random writes, appends, overwrites in the middle and truncation
// all work. When the file already exists as an object, its content is fetched
// lazily, one chunk at a time, only where a read or a partial write needs it
// (and all of it just before upload); a write that covers whole chunks, or
// O_TRUNC, fetches nothing.
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { randomBytes } from 'node:crypto';
import { SvcClient } from '../wire/client';
import { Attr } from './attrs';
import type { WriteOffload } from './offload';
import { StagingFile } from './stagingfile';
import type { PartStreamer } from './streamer';

export const FILL_CHUNK = 1024 * 1024;

export interface Base {
  key: string;
  size: number;
  etag?: string;
}

export class Staged {
  readonly file: string;
  /** the staging file's name, also the journal record's id */
  readonly id: string;
  private f!: StagingFile;
  private size_: number;
  /** bytes of the base object still part of the file: min(base size, smallest truncation) */
  private baseLimit: number;
  private filled: Uint8Array;
  private fills = new Map<number, Promise<void>>();
  private gen_ = 0;
  uploadedGen = 0;
  refs = 0;
  deleted = false;
  private attr_: Attr;
  uploading?: Promise<void>;
  lastError?: unknown;
  /** a multipart upload under way, with the generation whose bytes it carries */
  multipart?: { uploadId: string; partSize: number; gen: number; etags: Array<string | null> };
  /** write-back: when the upload is due */
  timer?: NodeJS.Timeout;
  /** when the 'open' journal record gets written (Writer.noteOpenSoon) */
  openTimer?: NodeJS.Timeout;
  failures = 0;
  /** journal state written so far */
  journaled?: 'open' | 'pending';
  private prefetching?: Promise<void>;
  /** parts of a new file sent while it is being written */
  streamer?: PartStreamer;
  /** the staging file's front whose write-back was started, and the part of it dropped from the page cache (Writer.recycle) */
  recycleStarted = 0;
  recycleDropped = 0;
  /** the mtime the last write or truncation set (an mtime that differs was set explicitly) */
  wroteAt = 0;
  /** set while the FUSE addon writes some handles' data into the staging file (offload.ts) */
  offload?: WriteOffload;
  private catchingUp = false;

  private constructor(
    dir: string,
    public path: string,
    private readonly client: SvcClient,
    private readonly bucket: string,
    public base: Base | undefined,
    attr: Attr,
  ) {
    this.file = path_join(dir);
    this.id = nodePath.basename(this.file);
    this.size_ = base?.size ?? 0;
    this.baseLimit = base?.size ?? 0;
    this.filled = new Uint8Array(Math.ceil(this.baseLimit / FILL_CHUNK));
    this.attr_ = { ...attr };
  }

  // Size, generation and attributes include the writes the FUSE addon made meanwhile.
  get size(): number {
    this.catchUp();
    return this.size_;
  }

  set size(v: number) {
    this.size_ = v;
  }

  /** bumps on every change; an upload records the generation it sent */
  get gen(): number {
    this.catchUp();
    return this.gen_;
  }

  set gen(v: number) {
    this.gen_ = v;
  }

  /** attributes to record with the upload */
  get attr(): Attr {
    this.catchUp();
    return this.attr_;
  }

  set attr(v: Attr) {
    this.attr_ = v;
  }

  /** Take in what the FUSE addon wrote into the staging file since last asked. */
  catchUp(): void {
    if (!this.offload || this.catchingUp) return;
    this.catchingUp = true;
    try {
      this.offload.catchUp(this);
    } finally {
      this.catchingUp = false;
    }
  }

  /** The addon wrote bytes lo..hi (one range holding all its writes since last asked). */
  wroteOutside(lo: number, hi: number): void {
    if (hi > this.size_) this.size_ = hi;
    this.attr_.mtime = this.attr_.ctime = this.wroteAt = Date.now();
    this.gen_++;
    this.streamer?.wrote(lo, hi, this.size_);
  }

  static async create(dir: string, fsPath: string, client: SvcClient, bucket: string, base: Base | undefined, attr: Attr): Promise<Staged> {
    const s = new Staged(dir, fsPath, client, bucket, base, attr);
    s.f = new StagingFile(s.file, 'w+');
    if (s.size > 0) await s.f.truncate(s.size);
    if (!base) s.gen = 1; // a new file is dirty until uploaded, even when empty
    return s;
  }

  /**
   * A staged file found in the journal after a crash: complete on disk (it was
   * filled before it was marked pending), so nothing is fetched again.
   */
  static async adopt(file: string, fsPath: string, client: SvcClient, bucket: string, key: string, size: number, baseEtag: string | undefined, attr: Attr): Promise<Staged> {
    const s = new Staged(nodePath.dirname(file), fsPath, client, bucket, undefined, attr);
    (s as { file: string }).file = file;
    (s as { id: string }).id = nodePath.basename(file);
    s.f = new StagingFile(file, 'r+');
    s.size = size;
    s.base = { key, size: 0, etag: baseEtag }; // size 0: nothing left to fill
    s.gen = 1;
    s.journaled = 'pending';
    return s;
  }

  /** Does any byte of the file still come from the object it started from? */
  get hasBaseBytes(): boolean {
    return this.baseLimit > 0;
  }

  get dirty(): boolean {
    return this.gen !== this.uploadedGen;
  }

  touch(): void {
    this.gen++;
  }

  /** Fetch base chunk i into the staging file unless it is there already. */
  private fill(i: number): Promise<void> {
    if (!this.base || this.filled[i] || i * FILL_CHUNK >= this.baseLimit) return Promise.resolve();
    let p = this.fills.get(i);
    if (!p) {
      const start = i * FILL_CHUNK;
      const end = Math.min(this.baseLimit, start + FILL_CHUNK);
      const base = this.base;
      p = (async () => {
        const r = await this.client.get(this.bucket, base.key, { range: [start, end - 1], ifMatch: base.etag });
        const data = Buffer.from(await r.body.arrayBuffer());
        if (data.length !== end - start) throw new Error(`short read of ${base.key}: ${data.length} of ${end - start} bytes`);
        // only the part still within the base limit (a truncation may have happened meanwhile)
        const keep = Math.max(0, Math.min(data.length, this.baseLimit - start));
        if (keep > 0) await this.f.write(data, 0, keep, start);
        this.filled[i] = 1;
      })().finally(() => this.fills.delete(i));
      this.fills.set(i, p);
    }
    return p;
  }

  private async fillRange(start: number, end: number): Promise<void> {
    const jobs: Promise<void>[] = [];
    for (let i = Math.floor(start / FILL_CHUNK); i * FILL_CHUNK < Math.min(end, this.baseLimit); i++) jobs.push(this.fill(i));
    await Promise.all(jobs);
  }

  /** Everything of the base still in the file, fetched (before an upload). */
  async fillAll(concurrency = 8): Promise<void> {
    const n = Math.ceil(this.baseLimit / FILL_CHUNK);
    let next = 0;
    await Promise.all(Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await this.fill(next++);
    }));
  }

  async read(buf: Buffer, len: number, pos: number): Promise<number> {
    if (pos >= this.size) return 0;
    const end = Math.min(this.size, pos + len);
    await this.fillRange(pos, end);
    return this.f.read(buf, 0, end - pos, pos);
  }

  async write(buf: Buffer, len: number, pos: number): Promise<number> {
    const end = pos + len;
    // Chunks only partly overwritten need their base bytes first; wholly
    // overwritten ones need nothing (unless a fill is already under way: let it land first).
    if (pos < this.baseLimit) {
      const jobs: Promise<void>[] = [];
      for (let i = Math.floor(pos / FILL_CHUNK); i * FILL_CHUNK < Math.min(end, this.baseLimit); i++) {
        const cs = i * FILL_CHUNK;
        const ce = Math.min(this.baseLimit, cs + FILL_CHUNK);
        const inFlight = this.fills.get(i);
        if (inFlight) jobs.push(inFlight);
        else if (pos <= cs && end >= ce) this.filled[i] = 1;
        else jobs.push(this.fill(i));
      }
      await Promise.all(jobs);
    }
    const bytesWritten = fs.writeSync(this.f.fd, buf, 0, len, pos);
    // The upload needs every byte of the base: start reading it now, in the
    // background, so that a change made elsewhere meanwhile finds it already read.
    if (!this.prefetching && this.baseLimit > 0) this.prefetching = this.fillAll(4).catch(() => undefined); // a failure shows again at upload
    if (end > this.size) this.size = end;
    this.attr.mtime = this.attr.ctime = this.wroteAt = Date.now();
    this.touch();
    this.streamer?.wrote(pos, end, this.size);
    return bytesWritten;
  }

  async truncate(size: number): Promise<void> {
    if (size < this.baseLimit) this.baseLimit = size;
    await this.f.truncate(size);
    this.size = size;
    this.attr.mtime = this.attr.ctime = this.wroteAt = Date.now();
    this.touch();
    this.streamer?.truncated(size);
  }

  /** the open staging file, for an upload to read from (closed only by discard) */
  get source(): StagingFile {
    return this.f;
  }

  /** Bytes of the staging file as they are (no fetching from the base): for parts sent while writing. */
  readStaged(into: Buffer, len: number, pos: number): Promise<Buffer> {
    return this.f.readRange(pos, len, into);
  }

  /** fsync the staging file, so staged data survives a crash of the mount. */
  async sync(): Promise<void> {
    await this.f.sync();
  }

  async close(remove: boolean): Promise<void> {
    this.offload?.detachAll(this); // (Writer.discard did already)
    await this.f.close().catch(() => undefined);
    if (!remove) return;
    // (synchronously, as the open: see stagingfile.ts)
    try {
      fs.unlinkSync(this.file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

// Unique names without asking the CSPRNG for each file (randomBytes took ~40 us a call):
// the time, this process's own random tag, and a counter.
const PROCESS_TAG = randomBytes(4).toString('hex');
let sequence = 0;

function path_join(dir: string): string {
  return nodePath.join(dir, `${Date.now()}-${PROCESS_TAG}-${(sequence++).toString(36)}`);
}
