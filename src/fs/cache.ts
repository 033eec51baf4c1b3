// The metadata cache: what a path is (attributes), what it is not (negative
// entries) and what a directory holds (listings), each with a TTL. The
// service offers no change polling, so this stands in front of HEAD and
// listing; the mount's own changes update it at once.
import { LRUCache } from 'lru-cache';
import { Attr } from './attrs';

export interface Listing {
  /** name -> attributes of each entry */
  entries: Map<string, Attr>;
}

type Entry = { attr: Attr | null };

/**
 * The directory whose listing answers for a path, and the path's name there.
 * None for the root: it is no entry of any listing (taken for one of its own,
 * an expired entry of '/' read as "missing" from the root's listing, and the
 * whole mount vanished until that listing expired).
 */
function placeOf(path: string): { dir: string; name: string } | undefined {
  if (path === '/') return undefined;
  const slash = path.lastIndexOf('/');
  return { dir: slash <= 0 ? '/' : path.slice(0, slash), name: path.slice(slash + 1) };
}

export class MetaCache {
  private readonly attrs: LRUCache<string, Entry>;
  private readonly dirs: LRUCache<string, Listing>;
  /** the last attributes seen for a path, kept past the TTL for conditional revalidation */
  private readonly known: LRUCache<string, Attr>;
  hits = 0;
  misses = 0;

  constructor(readonly ttlMs: number, max = 100_000, readonly negativeTtlMs = Math.min(ttlMs, 5_000)) {
    // bounded by maxSize (one per entry) rather than max: with max, lru-cache allocates its
    // arrays for every entry up front, 30-50 ms of each mount's start for 100,000
    const bound = { maxSize: max, sizeCalculation: () => 1 };
    this.attrs = new LRUCache<string, Entry>({ ...bound, ttl: Math.max(ttlMs, 1), ttlAutopurge: false });
    this.dirs = new LRUCache<string, Listing>({ max: Math.max(100, max / 100), ttl: Math.max(ttlMs, 1) });
    this.known = new LRUCache<string, Attr>(bound);
  }

  lastKnown(path: string): Attr | undefined {
    return this.known.get(path);
  }

  get size(): number {
    return this.attrs.size;
  }

  /** The attributes cached for a path (its own entry, else its directory's listing) while they stay valid for at least `ms` more; no hit counted. */
  fresh(path: string, ms: number): Attr | undefined {
    if (this.ttlMs <= 0) return undefined;
    if (this.attrs.has(path)) return this.attrs.getRemainingTTL(path) < ms ? undefined : this.attrs.get(path)?.attr ?? undefined;
    const at = placeOf(path);
    if (!at || this.dirs.getRemainingTTL(at.dir) < ms) return undefined;
    return this.dirs.get(at.dir)?.entries.get(at.name);
  }

  /** How long ago the cached attributes of a path (its own entry, else its directory's listing) came in; undefined when none are. */
  age(path: string): number | undefined {
    if (this.ttlMs <= 0) return undefined;
    if (this.attrs.has(path)) return this.ttlMs - this.attrs.getRemainingTTL(path);
    const at = placeOf(path);
    return at && this.dirs.has(at.dir) ? this.ttlMs - this.dirs.getRemainingTTL(at.dir) : undefined;
  }

  /** undefined: unknown; null: known not to exist; else the attributes. */
  get(path: string): Attr | null | undefined {
    if (this.ttlMs <= 0) return undefined;
    const e = this.attrs.get(path);
    if (e) {
      this.hits++;
      return e.attr;
    }
    // a fresh listing of the parent knows every child, and so what is absent
    const at = placeOf(path);
    const l = at && this.dirs.get(at.dir);
    if (at && l) {
      this.hits++;
      return l.entries.get(at.name) ?? null;
    }
    this.misses++;
    return undefined;
  }

  set(path: string, attr: Attr): void {
    this.known.set(path, attr);
    if (this.ttlMs > 0) this.attrs.set(path, { attr });
    const at = placeOf(path);
    if (at) this.dirs.get(at.dir, { allowStale: false })?.entries.set(at.name, attr);
  }

  setMissing(path: string): void {
    this.known.delete(path);
    if (this.ttlMs > 0) this.attrs.set(path, { attr: null }, { ttl: this.negativeTtlMs });
    const at = placeOf(path);
    if (at) this.dirs.get(at.dir)?.entries.delete(at.name);
  }

  /** How many ms the listing of a directory stays (0: none). */
  listingLeftMs(path: string): number {
    return this.ttlMs > 0 && this.dirs.has(path) ? Math.max(0, this.dirs.getRemainingTTL(path)) : 0;
  }

  listing(path: string): Listing | undefined {
    if (this.ttlMs <= 0) return undefined;
    const l = this.dirs.get(path);
    if (l) this.hits++;
    else this.misses++;
    return l;
  }

  /**
   * A directory's listing answers for each of its entries (get falls back to it)
   * while it lives: nothing per path is added, which for 100,000 entries was two
   * more LRU entries each (tens of MiB). Paths cached on their own go, so that
   * the listing is what answers.
   */
  setListing(path: string, entries: Map<string, Attr>): void {
    for (const [name, a] of entries) {
      const p = path === '/' ? `/${name}` : `${path}/${name}`;
      // A listing without metadata: what this mount wrote or last saw of the
      // same version (same ETag) still holds its mode, owner and times.
      const prev = this.known.size ? this.known.get(p) : undefined;
      if (a.partial && prev && !prev.partial && prev.kind === a.kind && (a.kind === 'dir' || prev.etag === a.etag)) entries.set(name, { ...prev, size: a.size, etag: a.etag });
      else if (prev) this.known.delete(p); // a revalidation must not answer with something older than this listing
      if (this.attrs.size) this.attrs.delete(p);
    }
    if (this.ttlMs > 0) this.dirs.set(path, { entries });
  }

  /** Forget a path (and, for a directory, everything cached below it). */
  invalidate(path: string, recursive = false): void {
    this.attrs.delete(path);
    this.known.delete(path);
    this.dirs.delete(path);
    if (recursive) {
      const pre = path === '/' ? '/' : path + '/';
      for (const k of [...this.attrs.keys()]) if (k.startsWith(pre)) this.attrs.delete(k);
      for (const k of [...this.dirs.keys()]) if (k.startsWith(pre)) this.dirs.delete(k);
    }
  }

  /** Drop the parent's listing (its set of children changed in a way not applied here). */
  invalidateParent(path: string): void {
    const at = placeOf(path);
    if (at) this.dirs.delete(at.dir);
  }
}
