// The descriptor of one staging file in the cache directory.
//
// Opened, closed and removed synchronously: on a local disk each is a few
// microseconds, where a round trip through libuv's thread pool (what
// fs.promises does) cost 0.1-0.2 ms a call on a busy 2-core machine, three
// times for every small file copied in. Small reads are synchronous for the
// same reason; big reads and writes, truncation and fsync stay in the pool.
//
// A FileHandle waits for its pending operations before it closes; a bare
// descriptor must do the same by hand, or a number reused meanwhile would
// send a late read or write to another file.
import * as fs from 'node:fs';
import { promisify } from 'node:util';

const readAsync = promisify(fs.read);
const writeAsync = promisify(fs.write);
const ftruncate = promisify(fs.ftruncate);
const fsync = promisify(fs.fsync);

/** reads up to this size are a copy from the page cache: done synchronously */
const SYNC_READ = 256 * 1024;

export class StagingFile {
  private fd_: number;
  private inflight = 0;
  private drained?: () => void;
  private closed = false;

  constructor(readonly path: string, flags: 'w+' | 'r+' | 'r', mode = 0o600) {
    this.fd_ = fs.openSync(path, flags, mode);
  }

  /** the descriptor, for synchronous calls and the FUSE addon's writes; EBADF once closed */
  get fd(): number {
    if (this.closed) throw Object.assign(new Error(`staging file ${this.path} is closed`), { code: 'EBADF' });
    return this.fd_;
  }

  /** An asynchronous call on the descriptor, counted so that close waits for it. */
  private async io<T>(f: (fd: number) => Promise<T>): Promise<T> {
    const fd = this.fd;
    this.inflight++;
    try {
      return await f(fd);
    } finally {
      if (--this.inflight === 0) this.drained?.();
    }
  }

  async read(buf: Buffer, off: number, len: number, pos: number): Promise<number> {
    if (len <= SYNC_READ) return fs.readSync(this.fd, buf, off, len, pos);
    return (await this.io((fd) => readAsync(fd, buf, off, len, pos))).bytesRead;
  }

  /** `length` bytes from `start`, into `into` when given; a short file is an error. */
  async readRange(start: number, length: number, into?: Buffer): Promise<Buffer> {
    const buf = into ? into.subarray(0, length) : Buffer.allocUnsafe(length);
    let n = 0;
    while (n < length) {
      const got = await this.read(buf, n, length - n, start + n);
      if (got === 0) throw new Error(`staging file shorter than expected (${start + n} < ${start + length})`);
      n += got;
    }
    return buf;
  }

  async write(buf: Uint8Array, off: number, len: number, pos: number): Promise<number> {
    return (await this.io((fd) => writeAsync(fd, buf, off, len, pos))).bytesWritten;
  }

  truncate(size: number): Promise<void> {
    return this.io((fd) => ftruncate(fd, size));
  }

  sync(): Promise<void> {
    return this.io((fd) => fsync(fd));
  }

  /** Close once nothing is in flight; later calls fail with EBADF. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inflight > 0) await new Promise<void>((r) => { this.drained = r; });
    fs.closeSync(this.fd_);
  }
}
