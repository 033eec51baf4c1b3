// Uploading a staged file: one PUT up to the multipart threshold, else a
// multipart upload with parts sent in parallel. The part size grows with the
// file so that no upload needs more than the client's maximum part count.
//
// Uploads may be conditional (If-Match on the ETag the edit started from,
// If-None-Match: * for a new file): a refusal is a ConflictError, unless the
// object already holds exactly our bytes (a retried request whose first try
// went through). A multipart upload that fails part-way keeps its state, so
// the next attempt resumes from the parts already sent; the caller aborts it
// when it gives the upload up.
import { createHash } from 'node:crypto';
import { StagingFile } from './stagingfile';
import { PutOptions, SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';
import { MemoryBudget, UNBOUNDED } from './budget';

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

/** The other writer's version is in the way: the caller keeps ours elsewhere. */
export class ConflictError extends Error {
  constructor(readonly key: string) {
    super(`${key} changed on the server since this edit began`);
  }
}

/**
 * The store refused a conditional upload (412) although a HEAD shows the
 * object as the condition named it: its conditions cannot be trusted. The
 * caller switches to the HEAD check and uploads again.
 */
export class UntrustedConditionError extends Error {
  constructor(readonly key: string, readonly detail: string) {
    super(`the store answered 412 to a condition that held (${detail})`);
  }
}

export interface ConditionalUpload {
  /** send If-Match unquoted (Ceph RGW 16) */
  unquotedIfMatch?: boolean;
  /**
   * The store ignores conditions on CompleteMultipartUpload: compare the ETag
   * with a HEAD just before completing instead.
   */
  headBeforeComplete?: boolean;
}

export interface MultipartState {
  uploadId: string;
  partSize: number;
  etags: Array<string | null>;
}

export interface UploadHooks {
  resume?: MultipartState;
  /** the multipart state after each part (undefined once the upload is complete) */
  onState?: (s: MultipartState | undefined) => void;
  onPart?: (done: number, total: number) => void;
  /** every part's buffer is taken from this budget while it is sent */
  budget?: MemoryBudget;
  /** the staging file, open already (its owner closes it): no open and close of the path per upload */
  source?: StagingFile;
}

/** Part size for a file: at least the configured size, whole MiB, and few enough parts. */
export function partSizeFor(size: number, t: UploadTuning): number {
  const needed = Math.ceil(size / t.maxParts);
  return Math.max(t.partSize, Math.ceil(needed / MiB) * MiB);
}

export interface UploadResult {
  etag: string;
  parts: number;
}

const refused = (e: unknown) => e instanceof SvcError && (e.code === 'PreconditionFailed' || e.status === 412);

/** Does the object already hold exactly the bytes we meant to write? */
async function holdsOurs(client: SvcClient, bucket: string, key: string, etag: string): Promise<boolean> {
  const info = await client.head(bucket, key).catch(() => undefined);
  return typeof info === 'object' && info.etag === etag;
}

/**
 * A 412 to a conditional upload: ours already (a retried request whose first
 * try went through), another writer's version (a conflict), or a condition
 * that held all along (the store's conditions are not to be trusted).
 */
async function explain412(client: SvcClient, bucket: string, key: string, expected: string, o: PutOptions): Promise<Error | 'ours'> {
  const info = await client.head(bucket, key);
  const etag = typeof info === 'object' ? info.etag : undefined;
  if (etag === expected) return 'ours';
  if (o.ifMatch !== undefined && etag === o.ifMatch) return new UntrustedConditionError(key, `If-Match ${o.ifMatch}, and the object has that ETag`);
  if (o.ifNoneMatch === '*' && etag === undefined) return new UntrustedConditionError(key, 'If-None-Match: *, and the object does not exist');
  return new ConflictError(key);
}

/** The HEAD check: the object is still what the edit started from (or still absent for a new file). */
export async function checkUnchanged(client: SvcClient, bucket: string, key: string, o: Pick<PutOptions, 'ifMatch' | 'ifNoneMatch'>): Promise<void> {
  if (o.ifMatch === undefined && o.ifNoneMatch === undefined) return;
  const now = await client.head(bucket, key);
  const etag = typeof now === 'object' ? now.etag : undefined;
  if (o.ifMatch !== undefined ? etag !== o.ifMatch && etag !== undefined : etag !== undefined) throw new ConflictError(key);
}

export async function uploadFile(
  client: SvcClient, bucket: string, key: string, file: string, size: number, o: PutOptions & ConditionalUpload, t: UploadTuning = DEFAULT_UPLOAD,
  hooks: UploadHooks = {},
): Promise<UploadResult> {
  const conditional = o.ifMatch !== undefined || o.ifNoneMatch !== undefined;
  const budget = hooks.budget ?? UNBOUNDED;
  const fh = hooks.source ?? new StagingFile(file, 'r');
  try {
    if (size <= t.multipartThreshold) return await budget.with(size, async () => {
      const body = size ? await fh.readRange(0, size) : Buffer.alloc(0);
      try {
        return { etag: await client.put(bucket, key, body, o), parts: 1 };
      } catch (e) {
        if (conditional && e instanceof SvcError && e.code === 'NoSuchKey' && o.ifMatch) {
          // deleted meanwhile: nobody's version is in the way, so create it
          return { etag: await client.put(bucket, key, body, { ...o, ifMatch: undefined, ifNoneMatch: '*' }), parts: 1 };
        }
        if (conditional && refused(e)) {
          const expected = createHash('md5').update(body).digest('hex');
          const why = await explain412(client, bucket, key, expected, o);
          if (why === 'ours') return { etag: expected, parts: 1 };
          throw why;
        }
        throw e;
      }
    });
    const ps = partSizeFor(size, t);
    const total = Math.ceil(size / ps);
    let state = hooks.resume && hooks.resume.partSize === ps && hooks.resume.etags.length === total ? hooks.resume : undefined;
    if (hooks.resume && !state) await client.abortMultipart(bucket, key, hooks.resume.uploadId).catch(() => undefined);
    if (!state) state = { uploadId: await client.createMultipart(bucket, key, { ...o, ifMatch: undefined, ifNoneMatch: undefined }), partSize: ps, etags: new Array(total).fill(null) };
    const s = state;
    hooks.onState?.(s);
    let next = 0;
    let done = s.etags.filter(Boolean).length;
    let failed = false;
    await Promise.all(Array.from({ length: Math.min(t.concurrency, total) }, async () => {
      while (next < total && !failed) {
        const i = next++;
        if (s.etags[i]) continue; // sent by an earlier attempt
        const start = i * ps;
        try {
          const len = Math.min(ps, size - start);
          s.etags[i] = await budget.with(len, async () => {
            const buf = budget.alloc(len);
            try {
              return await client.uploadPart(bucket, key, s.uploadId, i + 1, await fh.readRange(start, len, buf));
            } finally {
              budget.recycle(buf);
            }
          });
        } catch (e) {
          failed = true; // the other workers stop taking parts
          if (e instanceof SvcError && e.code === 'NoSuchUpload') hooks.onState?.(undefined);
          throw e;
        }
        hooks.onState?.(s);
        hooks.onPart?.(++done, total);
      }
    }));
    const etags = s.etags as string[];
    const expected = createHash('md5').update(Buffer.concat(etags.map((e) => Buffer.from(e, 'hex')))).digest('hex') + `-${total}`;
    let etag: string;
    try {
      if (conditional && o.headBeforeComplete) {
        try {
          await checkUnchanged(client, bucket, key, o);
        } catch (e) {
          if (e instanceof ConflictError) {
            await client.abortMultipart(bucket, key, s.uploadId).catch(() => undefined);
            hooks.onState?.(undefined);
          }
          throw e;
        }
      }
      const cond = o.headBeforeComplete ? {} : { ifMatch: o.ifMatch, ifNoneMatch: o.ifNoneMatch, unquotedIfMatch: o.unquotedIfMatch };
      etag = await client.completeMultipart(bucket, key, s.uploadId, etags.map((e, i) => ({ partNumber: i + 1, etag: e })), cond);
    } catch (e) {
      if (e instanceof ConflictError) throw e;
      // a completion whose reply was lost completes nothing the second time: check the object
      if (e instanceof SvcError && e.code === 'NoSuchUpload' && (await holdsOurs(client, bucket, key, expected))) {
        hooks.onState?.(undefined);
        return { etag: expected, parts: total };
      }
      if (conditional && refused(e)) {
        const why = await explain412(client, bucket, key, expected, o);
        if (why === 'ours') {
          hooks.onState?.(undefined);
          return { etag: expected, parts: total };
        }
        // an untrusted condition keeps the parts: the upload completes after the HEAD check
        if (why instanceof UntrustedConditionError) throw why;
        await client.abortMultipart(bucket, key, s.uploadId).catch(() => undefined);
        hooks.onState?.(undefined);
        throw why;
      }
      if (conditional && e instanceof SvcError && e.code === 'NoSuchKey') {
        await client.abortMultipart(bucket, key, s.uploadId).catch(() => undefined);
        hooks.onState?.(undefined);
        return uploadFile(client, bucket, key, file, size, { ...o, ifMatch: undefined, ifNoneMatch: '*' }, t, hooks);
      }
      throw e;
    }
    hooks.onState?.(undefined);
    // Ceph RGW 16 answers the completion with an empty <ETag/>: ask for it
    if (!etag) {
      const info = await client.head(bucket, key).catch(() => undefined);
      etag = typeof info === 'object' ? info.etag : expected;
    }
    return { etag, parts: total };
  } finally {
    if (!hooks.source) await fh.close();
  }
}
