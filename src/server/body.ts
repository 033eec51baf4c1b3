// Receiving request bodies: streamed to a temporary file (objects, parts) or
// into memory (small XML documents), hashed on the way, then verified against
// everything the request claimed: signed SHA-256, Content-MD5, flexible
// checksum, length. A body that fails any check leaves nothing behind.
import * as fs from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SvcError } from '../wire/errors';
import { AwsChunkedDecoder } from './chunked';
import { Ctx, header, xh } from './context';
import { BodyDigests, CHECKSUM_ALGORITHMS, ChecksumAlgorithm } from './digests';

export interface Received {
  size: number;
  md5: Buffer;
  sha256?: Buffer;
  checksum?: { algorithm: ChecksumAlgorithm; value: string };
}

function requestedChecksum(ctx: Ctx): ChecksumAlgorithm | undefined {
  const trailer = header(ctx, xh(ctx, 'trailer'))?.toLowerCase();
  for (const a of CHECKSUM_ALGORITHMS) {
    const name = xh(ctx, `checksum-${a}`);
    if (trailer === name || header(ctx, name) !== undefined) return a;
  }
  return undefined;
}

/** Only a stated or deferred payload hash needs the body's SHA-256 (its MD5 is the ETag, always). */
function needsSha256(ctx: Ctx): boolean {
  const k = ctx.auth.payload.kind;
  return k === 'hash' || k === 'deferred';
}

function isChunked(ctx: Ctx): boolean {
  return ctx.auth.payload.kind === 'chunked' || /(^|,)\s*aws-chunked\s*(,|$)/i.test(header(ctx, 'content-encoding') ?? '');
}

/** The body as bytes of content: aws-chunked framing removed. */
function source(ctx: Ctx): { stream: Readable; decoder?: AwsChunkedDecoder } {
  if (!isChunked(ctx)) return { stream: ctx.req };
  const p = ctx.auth.payload;
  const decoder = p.kind === 'chunked' ? new AwsChunkedDecoder(p.signing, p.trailerSigned) : new AwsChunkedDecoder();
  return { stream: ctx.req.pipe(decoder), decoder };
}

/**
 * The length the request declares for its content: undefined for a body sent
 * with `Transfer-Encoding: chunked` and no length (its end tells; SDKs stream
 * bodies of unknown length that way), 0 when there is no body at all.
 */
export function declaredLength(ctx: Ctx): number | undefined {
  const raw = isChunked(ctx) ? header(ctx, xh(ctx, 'decoded-content-length')) ?? header(ctx, 'content-length') : header(ctx, 'content-length');
  if (raw === undefined) {
    if (ctx.req.headers['transfer-encoding'] !== undefined || isChunked(ctx)) return undefined;
    return 0;
  }
  if (!/^\d+$/.test(raw)) throw new SvcError('InvalidArgument', 'Content-Length is not a number');
  return Number(raw);
}

function verify(ctx: Ctx, d: BodyDigests, expectSize: number | undefined, decoder?: AwsChunkedDecoder): Received {
  const f = d.finish();
  const shaHex = f.sha256?.toString('hex') ?? '';
  if (expectSize !== undefined && d.size !== expectSize && !isChunked(ctx)) {
    throw new SvcError('IncompleteBody', 'You did not provide the number of bytes specified by the Content-Length HTTP header.');
  }
  const p = ctx.auth.payload;
  if (p.kind === 'hash' && p.sha256 !== shaHex) {
    throw new SvcError(ctx.dialect.name === 'aws' ? 'XAmzContentSHA256Mismatch' : 'XSvcContentSHA256Mismatch',
      'The provided content SHA-256 does not match what was computed.');
  }
  ctx.user = ctx.auth.finish(shaHex);
  const md5 = header(ctx, 'content-md5');
  if (md5 !== undefined) {
    const given = Buffer.from(md5, 'base64');
    if (given.length !== 16 || given.toString('base64') !== md5.trim()) throw new SvcError('InvalidDigest', 'The Content-MD5 you specified is not valid.');
    if (!given.equals(f.md5)) throw new SvcError('BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }
  let checksum: Received['checksum'];
  if (d.checksumAlgorithm) {
    const name = xh(ctx, `checksum-${d.checksumAlgorithm}`);
    const given = header(ctx, name) ?? decoder?.trailers[name];
    const actual = f.checksum!.toString('base64');
    if (given === undefined) throw new SvcError('InvalidRequest', `${name} was announced but not sent`);
    if (given !== actual) throw new SvcError('BadDigest', `The ${d.checksumAlgorithm.toUpperCase()} you specified did not match the calculated checksum.`);
    checksum = { algorithm: d.checksumAlgorithm, value: actual };
  }
  return { size: d.size, md5: f.md5, sha256: f.sha256, checksum };
}

/**
 * Stream the body into `tmp` (fsync'd), verifying it. On any failure the file
 * is removed and the error thrown.
 */
export async function receiveToFile(ctx: Ctx, tmp: string, maxSize: number): Promise<Received> {
  const expect = declaredLength(ctx);
  if (header(ctx, 'content-length') === undefined && ctx.req.headers['transfer-encoding'] === undefined && !isChunked(ctx)) {
    throw new SvcError('MissingContentLength', 'You must provide the Content-Length HTTP header.');
  }
  if ((expect ?? 0) > maxSize) throw new SvcError('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed object size.');
  const d = new BodyDigests(requestedChecksum(ctx), needsSha256(ctx));
  const { stream, decoder } = source(ctx);
  try {
    const tap = new Transform({
      transform(chunk: Buffer, _e, cb) {
        d.update(chunk);
        if (d.size > maxSize) return cb(new SvcError('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed object size.'));
        cb(null, chunk);
      },
    });
    try {
      await pipeline(stream, tap, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
    } catch (e) {
      if (e instanceof SvcError) throw e;
      throw new SvcError('IncompleteBody', 'The request body ended before it was complete.');
    }
    ctx.bodyDone = true;
    const r = verify(ctx, d, expect, decoder);
    await fsyncFile(tmp);
    return r;
  } catch (e) {
    await fs.promises.rm(tmp, { force: true });
    throw e;
  }
}

/** fsync a written file (any descriptor of the inode will do). */
export async function fsyncFile(file: string): Promise<void> {
  const fh = await fs.promises.open(file, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Read a small body (an XML document) into memory, verifying it. */
export async function receiveSmall(ctx: Ctx, limit: number): Promise<{ body: Buffer; received: Received }> {
  const d = new BodyDigests(requestedChecksum(ctx), needsSha256(ctx));
  const expect = ctx.req.headers['content-length'] !== undefined ? declaredLength(ctx) : undefined;
  if ((expect ?? 0) > limit) throw new SvcError('MalformedXML', 'The XML you provided was too large.');
  const { stream, decoder } = source(ctx);
  const chunks: Buffer[] = [];
  try {
    for await (const c of stream as AsyncIterable<Buffer>) {
      d.update(c);
      if (d.size > limit) throw new SvcError('MalformedXML', 'The XML you provided was too large.');
      chunks.push(c);
    }
  } catch (e) {
    if (e instanceof SvcError) throw e;
    throw new SvcError('IncompleteBody', 'The request body ended before it was complete.');
  }
  ctx.bodyDone = true;
  const received = verify(ctx, d, isChunked(ctx) ? undefined : expect, decoder);
  return { body: Buffer.concat(chunks), received };
}

/** Requests without a body: verify the signature over the empty payload. */
export function finishEmpty(ctx: Ctx): void {
  ctx.user = ctx.auth.finish();
}
