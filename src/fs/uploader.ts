// Uploading a staged file: one PUT up to the multipart threshold, else a
// multipart upload with parts sent in parallel. The part size grows with the
// file so that no upload needs more than the client's maximum part count.
// A failed multipart upload is aborted, so it leaves nothing behind.
import * as fs from 'node:fs';
import { PutOptions, SvcClient } from '../wire/client';

const MiB = 1024 * 1024;

export interface UploadTuning {
  /** files above this go multipart */
  multipartThreshold: number;
  /** smallest part size */
  partSize: number;
  maxParts: number;
  concurrency: number;
}

export const DEFAULT_UPLOAD: UploadTuning = { multipartThreshold: 16 * MiB, partSize: 8 * MiB, maxParts: 10000, concurrency: 4 };

/** Part size for a file: at least the configured size, whole MiB, and few enough parts. */
export function partSizeFor(size: number, t: UploadTuning): number {
  const needed = Math.ceil(size / t.maxParts);
  return Math.max(t.partSize, Math.ceil(needed / MiB) * MiB);
}

async function readRange(fh: fs.promises.FileHandle, start: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length);
  let n = 0;
  while (n < length) {
    const { bytesRead } = await fh.read(buf, n, length - n, start + n);
    if (bytesRead === 0) throw new Error(`staging file shorter than expected (${start + n} < ${start + length})`);
    n += bytesRead;
  }
  return buf;
}

export interface UploadResult {
  etag: string;
  parts: number;
}

export async function uploadFile(
  client: SvcClient, bucket: string, key: string, file: string, size: number, o: PutOptions, t: UploadTuning = DEFAULT_UPLOAD,
  onPart?: (done: number, total: number) => void,
): Promise<UploadResult> {
  const fh = await fs.promises.open(file, 'r');
  try {
    if (size <= t.multipartThreshold) {
      const body = size ? await readRange(fh, 0, size) : Buffer.alloc(0);
      return { etag: await client.put(bucket, key, body, o), parts: 1 };
    }
    const ps = partSizeFor(size, t);
    const total = Math.ceil(size / ps);
    const uploadId = await client.createMultipart(bucket, key, o);
    try {
      const etags: string[] = new Array(total);
      let next = 0;
      let done = 0;
      let failed = false;
      await Promise.all(Array.from({ length: Math.min(t.concurrency, total) }, async () => {
        while (next < total && !failed) {
          const i = next++;
          const start = i * ps;
          try {
            const body = await readRange(fh, start, Math.min(ps, size - start));
            etags[i] = await client.uploadPart(bucket, key, uploadId, i + 1, body);
          } catch (e) {
            failed = true; // the other workers stop taking parts
            throw e;
          }
          onPart?.(++done, total);
        }
      }));
      const etag = await client.completeMultipart(bucket, key, uploadId, etags.map((e, i) => ({ partNumber: i + 1, etag: e })),
        { ifMatch: o.ifMatch, ifNoneMatch: o.ifNoneMatch });
      return { etag, parts: total };
    } catch (e) {
      await client.abortMultipart(bucket, key, uploadId).catch(() => undefined);
      throw e;
    }
  } finally {
    await fh.close();
  }
}
