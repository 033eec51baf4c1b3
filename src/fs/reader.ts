// Reads of a remote object through ranged GETs. Sequential access (each read
// starting near where the reads so far ended) is detected and served by read-ahead: large
// chunks fetched in parallel ahead of the reader, the window growing as the
// stream goes on. Random access fetches small ranges around what is asked,
// never the whole object. Every GET carries If-Match, so one open file never
// mixes two versions of an object.
import { SvcClient } from '../wire/client';
import { MemoryBudget, UNBOUNDED } from './budget';

const MiB = 1024 * 1024;

export interface ReaderTuning {
  chunkSize: number;
  maxAhead: number;
  randomSize: number;
}

export const DEFAULT_TUNING: ReaderTuning = { chunkSize: 8 * MiB, maxAhead: 4, randomSize: 256 * 1024 };

interface Piece {
  start: number;
  end: number; // exclusive
  data: Promise<Buffer>;
}

export class Reader {
  private chunks = new Map<number, Promise<Buffer>>();
  /** budget bytes and the (pooled) buffer held by each chunk */
  private held = new Map<number, { bytes: number; buf: Buffer }>();
  private pieces: Piece[] = [];
  private lastEnd = -1;
  private streak = 0;
  /** the chunk handed to `onWindow` (-1: none) */
  private shown = -1;
  bytesFetched = 0;
  /**
   * Given the chunk the last read was served from, the FUSE addon answers the
   * reads inside it without a trip here (null: take it back, before its buffer
   * goes back to the pool).
   */
  onWindow?: (start: number, data: Buffer | null) => void;

  constructor(
    private readonly client: SvcClient,
    private readonly bucket: string,
    private key: string,
    readonly size: number,
    private etag: string | undefined,
    private readonly tune: ReaderTuning = DEFAULT_TUNING,
    private readonly budget: MemoryBudget = UNBOUNDED,
  ) {}

  /** The handle closed: give the chunks' memory back. */
  close(): void {
    for (const i of [...this.chunks.keys()]) this.drop(i);
  }

  private drop(i: number): void {
    if (i === this.shown) {
      this.shown = -1;
      this.onWindow?.(0, null);
    }
    const c = this.chunks.get(i);
    this.chunks.delete(i);
    const h = this.held.get(i);
    if (!c || !h) return;
    this.held.delete(i);
    // Reads waiting for this chunk copy from it as soon as it settles (a
    // microtask); the buffer goes back to the pool only after that.
    const back = () => setImmediate(() => {
      this.budget.recycle(h.buf);
      this.budget.release(h.bytes);
    });
    c.then(back, back);
  }

  /** The object moved (rename): read the same bytes from its new key; `etag` of the copy, if known. */
  retarget(key: string, etag: string | undefined): void {
    this.key = key;
    this.etag = etag;
  }

  private fetch(start: number, end: number, into?: Buffer): Promise<Buffer> {
    this.bytesFetched += end - start;
    const out = into ? into.subarray(0, end - start) : Buffer.allocUnsafe(end - start);
    // a body cut mid-way is fetched again (the client's retries)
    return this.client.getRangeInto(this.bucket, this.key, start, end - 1, out, { ifMatch: this.etag }).then(() => out);
  }

  /**
   * Chunk i, fetched unless it is here already, when the memory budget has
   * room for it now (undefined otherwise: nothing waits for memory).
   */
  private chunk(i: number): Promise<Buffer> | undefined {
    let c = this.chunks.get(i);
    if (!c) {
      const start = i * this.tune.chunkSize;
      const end = Math.min(this.size, start + this.tune.chunkSize);
      // read-ahead leaves room for one upload part of the same size: readers that keep the
      // budget full would otherwise starve a file being written (its parts wait for close)
      if (!this.budget.tryTake(end - start, this.tune.chunkSize)) return undefined;
      const buf = this.budget.alloc(end - start);
      this.held.set(i, { bytes: end - start, buf });
      c = this.fetch(start, end, buf);
      const mine = c;
      c.catch(() => { if (this.chunks.get(i) === mine) this.drop(i); }); // let a later read try again
      this.chunks.set(i, c);
    }
    return c;
  }

  /** Read into buf; returns the number of bytes (0 at the end). */
  async read(buf: Buffer, len: number, pos: number): Promise<number> {
    if (pos >= this.size) return 0;
    const end = Math.min(this.size, pos + len);
    const cs = this.tune.chunkSize;
    // reads the addon answered from the window never came here: the reader went on through it
    const through = this.shown >= 0 && this.lastEnd >= this.shown * cs && pos > this.lastEnd && pos <= (this.shown + 1) * cs;
    // The kernel sends a stream's read-ahead as several reads at once, and the
    // FUSE threads hand them over in any order: a read near the furthest end so
    // far goes on the stream too (lastEnd is that furthest end).
    const near = this.lastEnd >= 0 && Math.abs(pos - this.lastEnd) <= Math.min(cs / 2, 2 * MiB);
    if (through) this.streak += Math.ceil((pos - this.lastEnd) / len) + 1;
    else this.streak = near ? this.streak + 1 : 0;
    this.lastEnd = near || through ? Math.max(this.lastEnd, end) : end;
    if (this.streak >= 2 || this.chunks.has(Math.floor(pos / cs))) return this.readSequential(buf, pos, end);
    return this.readRandom(buf, pos, end);
  }

  private async readSequential(buf: Buffer, pos: number, end: number): Promise<number> {
    const cs = this.tune.chunkSize;
    const first = Math.floor(pos / cs);
    const last = Math.floor((end - 1) / cs);
    const lastChunk = Math.floor((this.size - 1) / cs);
    const ahead = Math.min(this.tune.maxAhead, 1 + Math.floor(this.streak / 16));
    for (const k of [...this.chunks.keys()]) if (k < first - 1) this.drop(k);
    const needed = [];
    for (let i = first; i <= last; i++) needed.push(this.chunk(i));
    // the budget is spent (other files hold it): this read alone, without read-ahead
    if (needed.some((c) => !c)) return this.fetch(pos, end).then((b) => b.copy(buf, 0));
    for (let i = last + 1; i <= Math.min(lastChunk, last + ahead); i++) if (!this.chunk(i)) break;
    let n = 0;
    let data: Buffer = Buffer.alloc(0);
    for (let i = first; i <= last; i++) {
      data = await needed[i - first]!;
      const cstart = i * cs;
      const from = Math.max(pos, cstart) - cstart;
      const to = Math.min(end, cstart + data.length) - cstart;
      data.copy(buf, n, from, to);
      n += to - from;
    }
    // (synchronously after the await: the chunk is still held, not dropped and recycled meanwhile)
    if (first === last && this.onWindow && this.shown !== first && this.chunks.get(first) === needed[0]) {
      this.shown = first;
      this.onWindow(first * cs, data);
    }
    return n;
  }

  private async readRandom(buf: Buffer, pos: number, end: number): Promise<number> {
    let p = this.pieces.find((x) => x.start <= pos && x.end >= end);
    if (!p) {
      const pend = Math.min(this.size, Math.max(end, pos + this.tune.randomSize));
      p = { start: pos, end: pend, data: this.fetch(pos, pend) };
      const piece = p;
      piece.data.catch(() => { this.pieces = this.pieces.filter((x) => x !== piece); });
      this.pieces.push(p);
      if (this.pieces.length > 16) this.pieces.shift();
    }
    const data = await p.data;
    return data.copy(buf, 0, pos - p.start, end - p.start);
  }
}

/**
 * When may the kernel keep a file's cached pages at open? When the object has
 * the ETag it had at this mount's previous open of that path for reading, or
 * the ETag this mount's upload of the path gave it (FUSE writes go through the
 * pages: they hold exactly those bytes); anything else (first open, a change by
 * another writer, an open for writing) lets the kernel drop them. Bounded: the oldest
 * paths are forgotten first.
 */
export class PageCacheKeeper {
  private readonly seen = new Map<string, string>();

  constructor(private readonly enabled: boolean, private readonly limit = 100_000) {}

  keep(path: string, etag: string | undefined): boolean {
    if (!this.enabled || !etag) return false;
    const same = this.seen.get(path) === etag;
    this.seen.delete(path);
    this.seen.set(path, etag);
    if (this.seen.size > this.limit) this.seen.delete(this.seen.keys().next().value as string);
    return same;
  }

  /** The pages of path hold etag's bytes (without the question keep asks). */
  note(path: string, etag: string): void {
    this.keep(path, etag);
  }

  forget(path: string): void {
    this.seen.delete(path);
  }
}
