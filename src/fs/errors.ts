// Filesystem errors: an FsError carries the errno the application will see.
import { constants } from 'node:os';
import { SvcError } from '../wire/errors';

export const E = constants.errno;

const LOCAL = new Set(['ENOSPC', 'EDQUOT', 'EMFILE', 'ENFILE', 'EFBIG', 'ENOMEM', 'EINVAL']);

export class FsError extends Error {
  constructor(readonly errno: number, message?: string) {
    // no stack: it becomes an errno, and capturing one cost ~28 us (a lookup of each new name throws ENOENT)
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message ?? `errno ${errno}`);
    Error.stackTraceLimit = limit;
  }
}

export function fsError(errno: number, message?: string): FsError {
  return new FsError(errno, message);
}

/** The (negative) errno to hand to FUSE for any error. */
export function toErrno(e: unknown): number {
  if (e instanceof FsError) return -e.errno;
  if (e instanceof SvcError) {
    if (e.status === 404) return -E.ENOENT;
    if (e.status === 403) return -E.EACCES;
    if (e.code === 'EntityTooLarge') return -E.EFBIG;
    if (e.code === 'KeyTooLongError') return -E.ENAMETOOLONG;
    if (e.code === 'MetadataTooLarge') return -E.E2BIG;
    return -E.EIO;
  }
  // Local failures (the staging disk) keep their meaning; network failures are EIO.
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code && LOCAL.has(code)) return -(E as Record<string, number>)[code];
  return -E.EIO;
}
