// Sending the parts of a new file while the application is still writing it,
// so that close has only the tail left to send (and no second pass over the
// staged bytes). A part goes once the write frontier has passed its end; it is
// read back from the staging file (still in the page cache), at most
// `concurrency` at a time, and only when the memory budget has room: writes
// never wait for the network. A write or truncation that reaches a part
// already sent, or being sent, marks it to be sent again. A failed request
// stops the streaming; the upload at close resumes the same multipart upload
// and sends what is missing, or reports the error to the application like
// any other upload. Nothing is lost: the staging file holds every byte.
//
// The metadata is fixed when the multipart upload is created, before the file
// is complete, so it carries no times: the object's mtime is its
// LastModified, the moment the upload completes (the writer adds recorded
// times afterwards only when they were set explicitly).
import { PutOptions, SvcClient } from '../wire/client';
import { MemoryBudget } from './budget';
import { MultipartState } from './uploader';

export const TIME_KEYS = ['mtime', 'ctime', 'atime'];

/** Metadata without the times (what a streamed upload is created with). */
export function withoutTimes(meta: Record<string, string>): Record<string, string> {
  const m = { ...meta };
  for (const k of TIME_KEYS) delete m[k];
  return m;
}

export interface StreamerOptions {
  client: SvcClient;
  bucket: string;
  key: string;
  partSize: number;
  maxParts: number;
  concurrency: number;
  budget: MemoryBudget;
  /** metadata (without times) and content type of the object */
  create: Pick<PutOptions, 'meta' | 'contentType'>;
  /** read `len` bytes of the staging file at `pos` */
  read: (into: Buffer, len: number, pos: number) => Promise<Buffer>;
  /** the multipart upload was created (its id is known) */
  started?: () => void;
  /** every part below this byte offset went up (called as it grows) */
  sentThrough?: (end: number) => void;
}

export class PartStreamer {
  private uploadId?: string;
  private starting?: Promise<string>;
  private readonly etags: Array<string | null> = [];
  private readonly sending = new Map<number, { stale: boolean; done: Promise<void> }>();
  /** lowest part that may still need sending */
  private next = 0;
  /** one past the highest part ever sent or being sent: writes beyond it touch nothing sent */
  private high = 0;
  private size = 0;
  private stopped = false;
  failure?: unknown;
  /** parts sent and still valid */
  sent = 0;
  /** parts below this one went up (an edit that reaches one later makes it go again, and changes nothing here) */
  private through = 0;

  constructor(private readonly o: StreamerOptions) {}

  get key(): string {
    return this.o.key;
  }

  get meta(): Record<string, string> {
    return this.o.create.meta ?? {};
  }

  /** After a write of [pos, end); the file is now `size` bytes long. */
  wrote(pos: number, end: number, size: number): void {
    this.invalidate(pos, end);
    this.size = size;
    this.pump();
  }

  truncated(size: number): void {
    this.invalidate(size, Infinity);
    this.size = size;
  }

  /** Parts touched by a change lose what was sent for them. */
  private invalidate(from: number, to: number): void {
    const ps = this.o.partSize;
    if (from >= this.high * ps) return;
    const first = Math.floor(from / ps);
    const last = Math.min(Math.ceil(to / ps), this.high) - 1;
    for (let i = first; i <= last; i++) {
      if (this.etags[i]) this.sent--;
      this.etags[i] = null;
      const s = this.sending.get(i);
      if (s) s.stale = true;
    }
    this.next = Math.min(this.next, first);
  }

  private pump(): void {
    const ps = this.o.partSize;
    while (!this.stopped && this.failure === undefined && this.sending.size < this.o.concurrency && (this.next + 1) * ps <= this.size) {
      const i = this.next;
      if (i >= this.o.maxParts) return this.stop();
      if (this.etags[i] || this.sending.has(i)) {
        this.next++;
        continue;
      }
      if (!this.o.budget.tryTake(ps)) return; // no room now: a later write, or close, sends it
      this.next++;
      this.send(i);
    }
  }

  private send(i: number): void {
    const ps = this.o.partSize;
    const s = { stale: false, done: Promise.resolve() };
    this.high = Math.max(this.high, i + 1);
    s.done = (async () => {
      let buf: Buffer | undefined;
      try {
        const uploadId = await this.start();
        buf = this.o.budget.alloc(ps);
        const body = await this.o.read(buf, ps, i * ps);
        const etag = await this.o.client.uploadPart(this.o.bucket, this.o.key, uploadId, i + 1, body);
        if (!s.stale) {
          this.etags[i] = etag;
          this.sent++;
          if (i === this.through) {
            while (this.etags[this.through]) this.through++;
            this.o.sentThrough?.(Math.min(this.through * ps, this.size));
          }
        }
      } catch (e) {
        this.failure ??= e; // close sends the rest, and reports a lasting failure
      } finally {
        if (buf) this.o.budget.recycle(buf);
        this.o.budget.release(ps);
        this.sending.delete(i);
        if (s.stale) this.next = Math.min(this.next, i);
        this.pump();
      }
    })();
    this.sending.set(i, s);
  }

  private start(): Promise<string> {
    this.starting ??= this.o.client.createMultipart(this.o.bucket, this.o.key, this.o.create).then((id) => {
      this.uploadId = id;
      this.o.started?.();
      return id;
    });
    return this.starting;
  }

  private stop(): void {
    this.stopped = true;
  }

  /**
   * Stop sending and wait for the parts under way. Returns the multipart
   * upload with what was sent, for the upload at close to finish, or
   * undefined when there is none.
   */
  async settle(size: number): Promise<MultipartState | undefined> {
    this.stop();
    await Promise.all([...this.sending.values()].map((s) => s.done));
    await this.starting?.catch(() => undefined);
    if (!this.uploadId) return undefined;
    const total = Math.max(1, Math.ceil(size / this.o.partSize));
    return { uploadId: this.uploadId, partSize: this.o.partSize, etags: Array.from({ length: total }, (_, i) => this.etags[i] ?? null) };
  }

  /** The file went away (or will be sent another way): drop the multipart upload. */
  async abort(): Promise<void> {
    this.stop();
    await Promise.all([...this.sending.values()].map((s) => s.done));
    await this.starting?.catch(() => undefined);
    if (this.uploadId) await this.o.client.abortMultipart(this.o.bucket, this.o.key, this.uploadId).catch(() => undefined);
  }

  /** The multipart upload's id once created (for the journal: a crash leaves it to abort). */
  get id(): string | undefined {
    return this.uploadId;
  }
}
