// The journal of staged writes: one small JSON record per staged file, next to
// the staging files in the mount's cache directory, written atomically
// (temporary file, fsync, rename). A record says which object the staged bytes
// belong to, what version they were based on, and how far they got:
//   open     being written; never closed, so never promised to anyone
//   pending  closed (or fsync'd) with its bytes on disk, not yet in the bucket
// An uploaded file's record is removed. After a crash, the next mount of the
// same bucket uploads every pending file; open ones are set aside, not uploaded.
// A lock file keeps two mounts from sharing a cache directory by accident.
import * as fs from 'node:fs';
import * as path from 'node:path';

export type JournalState = 'open' | 'pending';

export interface JournalRecord {
  id: string;
  path: string;
  key: string;
  bucket: string;
  /** staging file (absolute) */
  file: string;
  size: number;
  /** ETag of the object the edit started from; absent for a new file */
  baseEtag?: string;
  /** user metadata to upload with it (mode, uid, gid, mtime, ...) */
  meta: Record<string, string>;
  contentType: string;
  state: JournalState;
  updated: number;
  /** a multipart upload under way, to resume rather than start again */
  multipart?: { uploadId: string; partSize: number; gen: number; etags: Array<string | null> };
  /** a multipart upload the file was sending while it was written (aborted when the file is set aside) */
  streaming?: string;
}

export class JournalLockedError extends Error {}

function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export class Journal {
  readonly dir: string;
  readonly stagingDir: string;
  readonly asideDir: string;
  private readonly lockFile: string;

  constructor(readonly root: string) {
    this.dir = path.join(root, 'journal');
    this.stagingDir = path.join(root, 'staging');
    this.asideDir = path.join(root, 'set-aside');
    this.lockFile = path.join(root, 'lock');
    for (const d of [root, this.dir, this.stagingDir]) fs.mkdirSync(d, { recursive: true, mode: 0o700 });
  }

  /** Take the cache directory for this process; refuse if a live process holds it. */
  lock(): void {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(this.lockFile, String(process.pid), { flag: 'wx', mode: 0o600 });
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const pid = Number(fs.readFileSync(this.lockFile, 'utf8').trim());
      let alive = false;
      if (pid > 0 && pid !== process.pid) {
        try {
          process.kill(pid, 0);
          alive = !zombie(pid);
        } catch {
          alive = false;
        }
      }
      if (alive) throw new JournalLockedError(`the cache ${this.root} is in use by another svcfs mount (pid ${pid}); give this mount another -o cache_dir=`);
      fs.rmSync(this.lockFile, { force: true }); // left by a process that died: take it over
    }
    throw new JournalLockedError(`could not lock ${this.lockFile}`);
  }

  unlock(): void {
    try {
      if (fs.readFileSync(this.lockFile, 'utf8').trim() === String(process.pid)) fs.rmSync(this.lockFile, { force: true });
    } catch {
      /* already gone */
    }
  }

  /**
   * Write a record atomically (temporary file, rename). `durable`: fsync'd, so
   * it survives a crash of the machine, as a pending upload's record must; the
   * record of a file still open only has to outlive the process (its bytes are
   * not fsync'd either), and two fsyncs were half a millisecond of every create.
   */
  write(r: JournalRecord, durable = true): void {
    r.updated = Date.now();
    const file = path.join(this.dir, `${r.id}.json`);
    const tmp = `${file}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify(r));
      if (durable) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
    if (durable) fsyncDir(this.dir);
  }

  remove(id: string): void {
    fs.rmSync(path.join(this.dir, `${id}.json`), { force: true });
  }

  /** Every record left by an earlier run, oldest first. */
  records(): JournalRecord[] {
    const out: JournalRecord[] = [];
    for (const f of fs.readdirSync(this.dir)) {
      if (!f.endsWith('.json')) {
        fs.rmSync(path.join(this.dir, f), { force: true }); // a half-written temporary
        continue;
      }
      try {
        out.push(JSON.parse(fs.readFileSync(path.join(this.dir, f), 'utf8')));
      } catch {
        fs.renameSync(path.join(this.dir, f), path.join(this.dir, `${f}.unreadable`));
      }
    }
    return out.sort((a, b) => a.updated - b.updated);
  }

  /** Keep a never-closed file's bytes for the user to look at, out of the way. */
  setAside(r: JournalRecord): string {
    fs.mkdirSync(this.asideDir, { recursive: true, mode: 0o700 });
    const dest = path.join(this.asideDir, `${r.id}-${path.basename(r.path)}`);
    if (fs.existsSync(r.file)) fs.renameSync(r.file, dest);
    fs.writeFileSync(`${dest}.json`, JSON.stringify(r, null, 2), { mode: 0o600 });
    this.remove(r.id);
    return dest;
  }

  /** Staging files no record refers to (left by a crash between the two writes). */
  sweepStaging(live: Set<string>): number {
    let n = 0;
    for (const f of fs.readdirSync(this.stagingDir)) {
      const p = path.join(this.stagingDir, f);
      if (!live.has(p)) {
        fs.rmSync(p, { force: true });
        n++;
      }
    }
    return n;
  }
}

/** A killed process lingers as a zombie until its parent reaps it: it holds nothing any more. */
function zombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}
