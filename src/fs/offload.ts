// Writes answered in the FUSE thread (scripts/patch-fuse-native.js, 14). A
// handle open for writing a file whose bytes are all local (a new file, or
// one truncated to nothing: no byte of an older object left to fetch first)
// hands the addon its staging file, and the addon pwrite()s each of the
// handle's writes there without a hop to JavaScript. It keeps the range
// written and a count; the staged file takes them (Staged.catchUp) before
// anything reads its size, generation or times, and whenever the addon says
// writes happened (at most one such call pending, however many writes).
// Appending handles (O_APPEND) keep writing through JavaScript, which places
// their bytes at the end it knows.
import type { Staged } from './staged';

/** What fuse-native exports once patched. */
export interface WriteAddon {
  svcfsWriteFile(fh: number, fd: number): boolean;
  svcfsWritten(fh: number, out: Float64Array): number;
  svcfsOnWrites(fn: () => void): void;
}

export class WriteOffload {
  private readonly out = new Float64Array(3);
  /** handle -> its staged file; and per staged file, its handles the addon writes for */
  private readonly files = new Map<number, Staged>();
  private readonly handlesOf = new Map<Staged, Set<number>>();
  /** writes taken from the addon (for svcfs status) */
  writes = 0;

  constructor(private readonly addon: WriteAddon, private readonly touched: (st: Staged) => void) {
    addon.svcfsOnWrites(() => {
      try {
        for (const st of this.handlesOf.keys()) st.catchUp();
      } catch {
        // a throw here would be an uncaught exception in the addon's call; the next catch-up tries again
      }
    });
  }

  /** Let the addon write handle fh's data into st's staging file; false: it cannot (the writes come to JavaScript). */
  attach(fh: number, st: Staged): boolean {
    if (!this.addon.svcfsWriteFile(fh, st.source.fd)) return false;
    this.files.set(fh, st);
    let hs = this.handlesOf.get(st);
    if (!hs) this.handlesOf.set(st, (hs = new Set()));
    hs.add(fh);
    st.offload = this;
    return true;
  }

  /**
   * The handle is released: the addon stops, after the writes under way, and
   * what it wrote is taken (quiet: the staged file is going, nobody is told).
   */
  detach(fh: number, quiet = false): void {
    const st = this.files.get(fh);
    if (!st) return;
    this.addon.svcfsWriteFile(fh, -1);
    const wrote = this.take(st, fh);
    this.files.delete(fh);
    const hs = this.handlesOf.get(st);
    hs?.delete(fh);
    if (hs && hs.size === 0) {
      this.handlesOf.delete(st);
      st.offload = undefined;
    }
    if (wrote && !quiet) this.touched(st);
  }

  /** Every handle of a staged file that goes (discarded: replaced, unlinked, or uploaded and closed). */
  detachAll(st: Staged): void {
    for (const fh of [...(this.handlesOf.get(st) ?? [])]) this.detach(fh, true);
  }

  /** What the addon wrote into st's file since last asked: st records it (Staged.wroteOutside). */
  catchUp(st: Staged): void {
    let changed = false;
    for (const fh of this.handlesOf.get(st) ?? []) changed = this.take(st, fh) || changed;
    if (changed) this.touched(st);
  }

  private take(st: Staged, fh: number): boolean {
    const n = this.addon.svcfsWritten(fh, this.out);
    if (n <= 0) return false;
    this.writes += n;
    st.wroteOutside(this.out[1]!, this.out[2]!);
    return true;
  }
}
