// How this mount keeps another writer's version from being overwritten, chosen
// per store. Stores differ: svcfs serve and S3 honour If-Match/If-None-Match on
// PUT; Ceph RGW 16 answers 412 to a PUT whose If-Match carries the current ETag
// quoted (as RFC 7232 writes it) but honours it unquoted, and ignores conditions
// on CompleteMultipartUpload; others ignore conditions altogether. A probe on
// a scratch key at mount finds out; an upload refused with 412 while a HEAD
// shows the ETag we named demotes the mount to the HEAD check at run time.
import { randomBytes } from 'node:crypto';
import type { Log } from '../cli/log';
import { SvcClient } from '../wire/client';
import { SvcError } from '../wire/errors';

export type ConditionalMode =
  /** conditional uploads: If-Match / If-None-Match: * on PUT (and on completion when `multipart`) */
  | { kind: 'conditional'; etagForm: 'quoted' | 'unquoted'; multipart: boolean; reason: string }
  /** a HEAD compares the ETag just before each upload (a short window remains) */
  | { kind: 'head'; reason: string }
  /** last writer wins */
  | { kind: 'off'; reason: string };

export function describeMode(m: ConditionalMode): string {
  if (m.kind === 'off') return 'off (last writer wins)';
  if (m.kind === 'head') return `head (ETag compared by a HEAD before each upload): ${m.reason}`;
  const form = m.etagForm === 'unquoted' ? ', ETags sent unquoted' : '';
  const mp = m.multipart ? '' : '; multipart uploads: HEAD before completion';
  return `conditional (If-Match / If-None-Match on upload${form}${mp})`;
}

const refused = (e: unknown) => e instanceof SvcError && e.status === 412;

/**
 * Scratch keys of the probes: a mount serves while it probes, so listings hide
 * these names (Remote.list) rather than show an entry that is gone a moment later.
 */
export const PROBE_NAME = '.svcfs-probe-';
const probeKey = (prefix: string) => `${prefix}${PROBE_NAME}${randomBytes(6).toString('hex')}`;

/**
 * Try the store's conditional writes on a scratch key under the mount's prefix
 * (removed afterwards): about eight small requests, once per mount.
 */
export async function probeConditionalWrites(client: SvcClient, bucket: string, prefix: string, log: Log): Promise<ConditionalMode> {
  const key = probeKey(prefix);
  const put = (body: string, o: { ifMatch?: string; ifNoneMatch?: string; unquoted?: boolean }) =>
    client.put(bucket, key, body, { ifMatch: o.ifMatch, ifNoneMatch: o.ifNoneMatch, unquotedIfMatch: o.unquoted });
  const attempt = async (f: () => Promise<string>): Promise<string | 'refused'> => {
    try {
      return await f();
    } catch (e) {
      if (refused(e)) return 'refused';
      throw e;
    }
  };
  try {
    const first = await attempt(() => put('1', { ifNoneMatch: '*' }));
    if (first === 'refused') return { kind: 'head', reason: 'the store refused If-None-Match: * for a key that does not exist' };
    let etag = first;
    const again = await attempt(() => put('2', { ifNoneMatch: '*' }));
    if (again !== 'refused') return { kind: 'head', reason: 'the store ignores If-None-Match: * (it overwrote an existing object)' };
    const wrong = await attempt(() => put('3', { ifMatch: '0123456789abcdef0123456789abcdef' }));
    if (wrong !== 'refused') return { kind: 'head', reason: 'the store ignores If-Match (it accepted a wrong ETag)' };
    let etagForm: 'quoted' | 'unquoted' = 'quoted';
    let right = await attempt(() => put('4', { ifMatch: etag }));
    if (right === 'refused') {
      right = await attempt(() => put('4', { ifMatch: etag, unquoted: true }));
      if (right === 'refused') return { kind: 'head', reason: 'the store refuses If-Match with the current ETag' };
      etagForm = 'unquoted';
    }
    etag = right;
    // CompleteMultipartUpload with a wrong If-Match must be refused to be trusted
    let multipart = false;
    const uploadId = await client.createMultipart(bucket, key, {});
    try {
      const part = await client.uploadPart(bucket, key, uploadId, 1, Buffer.from('5'));
      await client.completeMultipart(bucket, key, uploadId, [{ partNumber: 1, etag: part }], { ifMatch: '0123456789abcdef0123456789abcdef', unquotedIfMatch: etagForm === 'unquoted' });
    } catch (e) {
      if (refused(e)) multipart = true;
      else if (!(e instanceof SvcError)) throw e;
    } finally {
      await client.abortMultipart(bucket, key, uploadId).catch(() => undefined);
    }
    const reason = etagForm === 'unquoted' ? 'the store refuses quoted ETags in If-Match (Ceph RGW) and honours unquoted ones' : 'the store honours If-Match and If-None-Match';
    return { kind: 'conditional', etagForm, multipart, reason };
  } catch (e) {
    const why = e instanceof SvcError ? `${e.code}: ${e.message}` : (e as Error).message;
    log.warn({ err: why }, 'could not probe conditional writes; comparing ETags with a HEAD before each upload');
    return { kind: 'head', reason: `the probe failed (${why})` };
  } finally {
    await client.delete(bucket, key).catch(() => undefined);
  }
}

/** Does a copy that replaces metadata keep the tags? (Ceph RGW 16 drops them.) A few small requests on scratch keys. */
export async function probeCopyKeepsTags(client: SvcClient, bucket: string, prefix: string): Promise<boolean> {
  const key = probeKey(prefix);
  try {
    await client.put(bucket, key, '');
    await client.putTags(bucket, key, { probe: '1' }); // as setfattr user.svc.tag.* sets them
    await client.copy({ bucket, key }, bucket, key + '.copy', { replaceMetadata: true, meta: { probe: '1' } });
    return Object.keys(await client.getTags(bucket, key + '.copy')).length === 1;
  } catch {
    return true; // cannot tell: trust the copy
  } finally {
    await client.delete(bucket, key).catch(() => undefined);
    await client.delete(bucket, key + '.copy').catch(() => undefined);
  }
}
