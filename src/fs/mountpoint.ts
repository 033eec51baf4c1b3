// What the command line needs to know about mount points without loading the
// filesystem (a background mount's parent process, status, unmount): is it
// mounted, where its status socket is, and the error a mount fails with.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export class MountError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

export function isMounted(mountpoint: string): boolean {
  const abs = path.resolve(mountpoint);
  const text = fs.readFileSync('/proc/mounts', 'utf8');
  return text.split('\n').some((l) => l.split(' ')[1]?.replace(/\\040/g, ' ') === abs);
}

/** Where the status socket of a mount lives (derived from the mount point, so `svcfs status MNT` finds it). */
export function statusSocket(mountpoint: string): string {
  const dir = path.join(process.env.XDG_RUNTIME_DIR || os.tmpdir(), `svcfs-${process.getuid?.() ?? 0}`);
  const id = createHash('sha256').update(path.resolve(mountpoint)).digest('hex').slice(0, 16);
  return path.join(dir, `${id}.sock`);
}
