// Reads of a remote object through ranged GETs. Sequential access (each read
// starting where the last ended) is detected and served by read-ahead: large
// chunks fetched in parallel ahead of the reader, the window growing as the
// stream goes on. Random access fetches small ranges around what is asked,
// never the whole object. Every GET carries If-Match, so one open file never
// mixes two versions of an object.
import { SvcClient } from '../wire/client';

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
  private pieces: Piece[] = [];
  private lastEnd = -1;
  private streak = 0;
  bytesFetched = 0;

  constructor(
    private readonly client: SvcClient,
    private readonly bucket: string,
    private key: string,
    readonly size: number,
    private etag: string | undefined,
    private readonly tune: ReaderTuning = DEFAULT_TUNING,
  ) {}

  /** The object moved (rename): read the same bytes from its new key; `etag` of the copy, if known. */
  retarget(key: string, etag: string | undefined): void {
    this.key = key;
    this.etag = etag;
  }

  private fetch(start: number, end: number): Promise<Buffer> {
    this.bytesFetched += end - start;
    return (async () => {
      for (let attempt = 1; ; attempt++) {
        const r = await this.client.get(this.bucket, this.key, { range: [start, end - 1], ifMatch: this.etag });
        try {
          const b = Buffer.from(await r.body.arrayBuffer());
          if (b.length !== end - start) throw new Error(`short range: ${b.length} of ${end - start} bytes`);
          return b;
        } catch (e) {
          if (attempt >= 3) throw e; // a body cut mid-way: fetch the range again
        }
      }
    })();
  }

  private chunk(i: number): Promise<Buffer> {
    let c = this.chunks.get(i);
    if (!c) {
      const start = i * this.tune.chunkSize;
      c = this.fetch(start, Math.min(this.size, start + this.tune.chunkSize));
      c.catch(() => this.chunks.delete(i)); // let a later read try again
      this.chunks.set(i, c);
    }
    return c;
  }

  /** Read into buf; returns the number of bytes (0 at the end). */
  async read(buf: Buffer, len: number, pos: number): Promise<number> {
    if (pos >= this.size) return 0;
    const end = Math.min(this.size, pos + len);
    this.streak = pos === this.lastEnd ? this.streak + 1 : 0;
    this.lastEnd = end;
    if (this.streak >= 2 || this.chunks.has(Math.floor(pos / this.tune.chunkSize))) return this.readSequential(buf, pos, end);
    return this.readRandom(buf, pos, end);
  }

  private async readSequential(buf: Buffer, pos: number, end: number): Promise<number> {
    const cs = this.tune.chunkSize;
    const first = Math.floor(pos / cs);
    const last = Math.floor((end - 1) / cs);
    const lastChunk = Math.floor((this.size - 1) / cs);
    const ahead = Math.min(this.tune.maxAhead, 1 + Math.floor(this.streak / 16));
    for (let i = first; i <= Math.min(lastChunk, last + ahead); i++) this.chunk(i);
    for (const k of this.chunks.keys()) if (k < first - 1) this.chunks.delete(k);
    let n = 0;
    for (let i = first; i <= last; i++) {
      const data = await this.chunk(i);
      const cstart = i * cs;
      const from = Math.max(pos, cstart) - cstart;
      const to = Math.min(end, cstart + data.length) - cstart;
      data.copy(buf, n, from, to);
      n += to - from;
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
 * the ETag it had at this mount's previous open of that path for reading (the
 * pages hold exactly those bytes); anything else (first open, a change by any
 * writer, an open for writing) lets the kernel drop them. Bounded: the oldest
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

  forget(path: string): void {
    this.seen.delete(path);
  }
}
