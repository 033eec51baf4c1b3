// The mount's memory bound: every large buffer (a read-ahead chunk, a part
// being uploaded) is taken from one budget of bytes and given back when its
// request is done. What the application needs now waits for room; what is
// only speculative (read-ahead, parts sent while a file is still being
// written) is skipped when there is none. With the budget set from
// `-o memory_limit`, the mount's resident size stays near the budget plus
// Node's own baseline, however many files are open.
//
// Upload parts reuse a pool of buffers instead of leaving each one to the
// garbage collector: freed 8 MiB buffers would otherwise stay resident until
// V8 decides to collect, well past the budget.
export class MemoryBudget {
  private used = 0;
  private peakUsed = 0;
  private readonly waiting: Array<{ bytes: number; go: () => void }> = [];
  private readonly pool: Buffer[] = [];

  constructor(readonly limit: number, readonly poolSize = 8 * 1024 * 1024) {}

  /** A buffer of at least `bytes` (a pooled one when it fits): its first `bytes` are the caller's. */
  alloc(bytes: number): Buffer {
    if (bytes <= this.poolSize && bytes > this.poolSize / 2) return this.pool.pop() ?? Buffer.allocUnsafe(this.poolSize);
    return Buffer.allocUnsafe(bytes);
  }

  /** Give back a buffer from alloc (before releasing its bytes): kept while pool and use fit the limit. */
  recycle(buf: Buffer): void {
    if (buf.length === this.poolSize && this.used + this.pool.length * this.poolSize <= this.limit) this.pool.push(buf);
  }

  /** Bytes one buffer may hold at most (a request larger than the budget waits for all of it). */
  clamp(bytes: number): number {
    return Math.min(bytes, this.limit);
  }

  /** Take bytes if there is room now, with `leave` bytes still free after. */
  tryTake(bytes: number, leave = 0): boolean {
    bytes = this.clamp(bytes);
    if (this.waiting.length || this.used + bytes + leave > this.limit) return false;
    this.take(bytes);
    return true;
  }

  /** Take bytes, waiting in order for room. */
  async acquire(bytes: number): Promise<void> {
    bytes = this.clamp(bytes);
    if (!this.waiting.length && this.used + bytes <= this.limit) return this.take(bytes);
    await new Promise<void>((go) => this.waiting.push({ bytes, go }));
  }

  release(bytes: number): void {
    this.used -= this.clamp(bytes);
    while (this.waiting.length && this.used + this.waiting[0].bytes <= this.limit) {
      const w = this.waiting.shift()!;
      this.take(w.bytes);
      w.go();
    }
  }

  /** Run f with bytes taken from the budget. */
  async with<T>(bytes: number, f: () => Promise<T>): Promise<T> {
    await this.acquire(bytes);
    try {
      return await f();
    } finally {
      this.release(bytes);
    }
  }

  stats(): { limit: number; used: number; peak: number; waiting: number } {
    return { limit: this.limit, used: this.used, peak: this.peakUsed, waiting: this.waiting.length };
  }

  private take(bytes: number): void {
    this.used += bytes;
    if (this.used > this.peakUsed) this.peakUsed = this.used;
  }
}

/** No bound (tools and tests that use the uploader or reader outside a mount). */
export const UNBOUNDED = new MemoryBudget(Number.MAX_SAFE_INTEGER);
