// Unlinks answered before their DELETE lands (delete-behind), in batches.
//
// `rm -r` unlinks one name at a time and waits for each answer: with a DELETE
// per answer, the mount's JavaScript (~0.45 ms of CPU per request) and the
// store take turns, and a C client (s3fs) that waits the same way is twice as
// fast. Here an unlink in a directory where a DELETE already went through (or
// in one above it) is answered at once; its key joins a batch delete (POST ?delete, up to 1000
// keys) that leaves a few milliseconds later, while the next unlinks arrive.
//
// What stays true:
// - this mount sees the name gone at once; its lookups and listings never see
//   a key that is on its way out (they wait for it, or answer ENOENT);
// - nothing this mount writes to a key can be overtaken by a DELETE still on
//   its way to the same key (create, mkdir, rename... wait for it first);
// - rmdir(2) and fsync(2) of the directory, and the unmount, wait for every
//   delete below; rmdir and fsync return what failed (EACCES, EIO...);
// - the first unlink in a directory tree, and the next one after a failure
//   there, waits for its own DELETE: a store that refuses deletes (read-only
//   keys, a policy on a prefix) is told to rm at once, with its own file name;
// - whoever waits for a delete (rmdir, a create of the same name) has it
//   sent at once, not at the end of the gathering time.
// What does not: another client of the bucket may see an object for a few
// milliseconds after rm returned, and a crash of the mount process loses the
// unlinks not yet sent (at most MAX_BEHIND, a fraction of a second of rm).
import type { Log } from '../cli/log';
import { SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';
import { parentOf } from './posix';

/** keys waiting or in flight at most; an unlink past it waits for room */
export const MAX_BEHIND = 1000;
/** batch requests in flight at most */
const MAX_BATCHES = 2;
/** how long a key waits for others to join its batch (the application does not wait for it) */
const GATHER_MS = 5;
/** directories remembered as trusted (a DELETE went through there) */
const MAX_TRUSTED = 4096;
/** keys sent one by one at a time when batches fail or a store has none */
const SINGLE_CONCURRENCY = 4;

export interface DeleteStats {
  /** unlinks answered before their DELETE */
  deletesBehind: number;
  /** batch delete requests sent for them */
  deleteBatches: number;
  /** keys on their way now */
  deletesPending: number;
  /** keys whose delete failed after the unlink was answered */
  deleteErrors: number;
}

interface Pending {
  path: string;
  done: Promise<void>;
  resolve: () => void;
}

/**
 * Keys the store's batch delete carries safely: XML 1.0 cannot hold control
 * characters, and a parser may trim white space at the ends of a Key's text
 * (which would delete another key). Such keys go one by one.
 */
export function batchable(key: string): boolean {
  return key.length > 0 && key.trim() === key && !/[\x00-\x1f\x7f\ufffe\uffff]/.test(key);
}

export class DeleteBehind {
  private readonly pending = new Map<string, Pending>();
  private queue: string[] = [];
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  /** directories where a DELETE went through; insertion order is age (oldest go first) */
  private readonly trusted = new Set<string>();
  /** the first failure in each directory since rmdir or fsync last reported one */
  private readonly failures = new Map<string, unknown>();
  private room: Array<() => void> = [];
  /** someone waits for a key still queued: the next batch leaves now */
  private hurry = false;
  /** the store refused a batch delete request (4xx): keys go one by one from then on */
  private noBatches = false;
  private behind = 0;
  private batches = 0;
  private errors = 0;

  constructor(private readonly o: {
    client: SvcClient;
    bucket: string;
    log: Log;
    /** false: every unlink waits for its DELETE (-o sync_unlink) */
    enabled: boolean;
    /** a key could not be deleted after its unlink was answered: the path is there again */
    failed: (path: string) => void;
  }) {}

  get size(): number {
    return this.pending.size;
  }

  /** Delete the object of `path`: at once and waited for, or behind (see above). */
  async remove(path: string, key: string): Promise<void> {
    await this.settled(key);
    const dir = parentOf(path);
    if (!this.o.enabled || !this.trustedAt(dir) || !batchable(key)) {
      await this.o.client.delete(this.o.bucket, key);
      this.trust(dir);
      return;
    }
    while (this.pending.size >= MAX_BEHIND) await new Promise<void>((ok) => this.room.push(ok));
    let resolve!: () => void;
    const done = new Promise<void>((ok) => { resolve = ok; });
    this.pending.set(key, { path, done, resolve });
    this.queue.push(key);
    this.behind++;
    this.schedule();
  }

  /** Is this key on its way out? (the path does not exist for this mount) */
  has(key: string): boolean {
    return this.pending.has(key);
  }

  /** Until the delete of this key (if any) ended. */
  settled(key: string): Promise<void> | undefined {
    const p = this.pending.get(key);
    if (!p) return undefined;
    this.hasten();
    return p.done;
  }

  /** Until every delete of a key under this prefix ended ('' for all). */
  async settledBelow(prefix: string): Promise<void> {
    while (this.pending.size) {
      const waits: Promise<void>[] = [];
      for (const [k, p] of this.pending) if (k.startsWith(prefix)) waits.push(p.done);
      if (!waits.length) return;
      this.hasten();
      await Promise.all(waits);
    }
  }

  /** What failed below a directory since last asked (and forget it): rmdir and fsync report it. */
  takeFailure(dir: string): unknown {
    const e = this.failures.get(dir);
    this.failures.delete(dir);
    return e;
  }

  stats(): DeleteStats {
    return { deletesBehind: this.behind, deleteBatches: this.batches, deletesPending: this.pending.size, deleteErrors: this.errors };
  }

  /** Did a DELETE go through in this directory or one above it (and nothing fail there since)? */
  private trustedAt(dir: string): boolean {
    for (let d = dir; ; d = parentOf(d)) {
      if (this.trusted.has(d)) return true;
      if (d === '/') return false;
    }
  }

  private hasten(): void {
    if (!this.queue.length) return;
    this.hurry = true;
    this.schedule();
  }

  private trust(dir: string): void {
    this.trusted.delete(dir);
    this.trusted.add(dir);
    if (this.trusted.size > MAX_TRUSTED) this.trusted.delete(this.trusted.values().next().value!);
  }

  private schedule(): void {
    if (this.inFlight >= MAX_BATCHES || !this.queue.length) return;
    if (this.queue.length >= MAX_BEHIND || this.hurry) {
      clearTimeout(this.timer);
      this.timer = undefined;
      void this.send();
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.send();
      }, GATHER_MS);
    }
  }

  private async send(): Promise<void> {
    if (this.inFlight >= MAX_BATCHES || !this.queue.length) return;
    const keys = this.queue.splice(0, MAX_BEHIND);
    if (!this.queue.length) this.hurry = false;
    this.inFlight++;
    try {
      let single = keys;
      if (!this.noBatches) {
        this.batches++;
        try {
          const res = await this.o.client.deleteMany(this.o.bucket, keys);
          single = res.errors.map((e) => e.key).filter((k) => this.pending.has(k));
        } catch (e) {
          // a store without batch delete (or one that refuses this body: a 4xx) still takes each key
          // alone; a 5xx after the client's retries is passing trouble, and the next batch tries again
          if (e instanceof SvcError && e.status >= 400 && e.status < 500) {
            this.noBatches = true;
            this.o.log.warn({ code: e.code, err: e.message }, 'batch delete refused: deleting one key at a time');
          }
        }
      }
      // what a batch could not delete gets its own DELETE (with the client's retries), which also says why
      let next = 0;
      await Promise.all(Array.from({ length: Math.min(SINGLE_CONCURRENCY, single.length) }, async () => {
        while (next < single.length) {
          const key = single[next++];
          try {
            await this.o.client.delete(this.o.bucket, key);
          } catch (e) {
            this.fail(key, e);
          }
        }
      }));
    } finally {
      for (const k of keys) {
        this.pending.get(k)?.resolve();
        this.pending.delete(k);
      }
      this.inFlight--;
      for (const ok of this.room.splice(0)) ok();
      this.schedule();
    }
  }

  private fail(key: string, e: unknown): void {
    const p = this.pending.get(key);
    if (!p) return;
    const dir = parentOf(p.path);
    this.errors++;
    // (trust came from this directory or one above it)
    for (let d = dir; ; d = parentOf(d)) {
      this.trusted.delete(d);
      if (d === '/') break;
    }
    if (!this.failures.has(dir) && this.failures.size < MAX_TRUSTED) this.failures.set(dir, e);
    this.o.log.error({ path: p.path, err: (e as Error).message }, 'delete failed after the unlink was answered: the file is there again');
    this.o.failed(p.path);
  }
}
