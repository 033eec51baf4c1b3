// Decoder for `Content-Encoding: aws-chunked` bodies, which current AWS SDKs
// send by default: `<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0\r\n
// [trailer lines\r\n]\r\n`. Signed chunks are verified as they arrive; the
// trailer (a flexible checksum, optionally signed) is exposed when done.
import { createHash, Hash } from 'node:crypto';
import { Transform, TransformCallback } from 'node:stream';
import { Dialect } from '../wire/dialect';
import { SvcError } from '../wire/errors';
import { chunkStringToSign, safeEqual, sha256Hex, signatureOf, trailerStringToSign } from '../wire/signer';

export interface ChunkSigning {
  dialect: Dialect;
  key: Buffer;
  timestamp: string;
  scope: string;
  /** signature of the request itself: the first chunk chains from it */
  seed: string;
}

const MAX_LINE = 8192;

export class AwsChunkedDecoder extends Transform {
  readonly trailers: Record<string, string> = {};
  private state: 'size' | 'data' | 'crlf' | 'trailer' | 'done' = 'size';
  private line = '';
  private remaining = 0;
  private chunkSig?: string;
  private chunkHash?: Hash;
  private prevSig: string;
  private trailerText = '';
  private trailerSig?: string;

  constructor(private readonly signing?: ChunkSigning, private readonly trailerSigned = false) {
    super();
    this.prevSig = signing?.seed ?? '';
  }

  private fail(code: string, msg: string): Error {
    return new SvcError(code, msg);
  }

  override _transform(buf: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let i = 0;
    try {
      while (i < buf.length) {
        if (this.state === 'data') {
          const n = Math.min(this.remaining, buf.length - i);
          const slice = buf.subarray(i, i + n);
          this.chunkHash?.update(slice);
          this.push(slice);
          this.remaining -= n;
          i += n;
          if (this.remaining === 0) {
            this.endChunk(false);
            this.state = 'crlf';
          }
          continue;
        }
        if (this.state === 'done') throw this.fail('IncompleteBody', 'data after the end of an aws-chunked body');
        // line-oriented states
        const nl = buf.indexOf(0x0a, i);
        const end = nl < 0 ? buf.length : nl + 1;
        this.line += buf.toString('latin1', i, end);
        i = end;
        if (this.line.length > MAX_LINE) throw this.fail('IncompleteBody', 'aws-chunked framing line too long');
        if (nl < 0) continue;
        const line = this.line.replace(/\r?\n$/, '');
        this.line = '';
        this.onLine(line);
      }
      cb();
    } catch (e) {
      cb(e as Error);
    }
  }

  private onLine(line: string): void {
    if (this.state === 'crlf') {
      if (line !== '') throw this.fail('IncompleteBody', 'aws-chunked chunk not followed by CRLF');
      this.state = 'size';
      return;
    }
    if (this.state === 'size') {
      const m = /^([0-9a-fA-F]+)(?:;chunk-signature=([0-9a-f]{64}))?$/.exec(line);
      if (!m) throw this.fail('IncompleteBody', 'malformed aws-chunked chunk header');
      const size = parseInt(m[1], 16);
      if (this.signing && !m[2]) throw this.fail('SignatureDoesNotMatch', 'chunk signature missing');
      this.chunkSig = m[2];
      this.chunkHash = this.signing ? createHash('sha256') : undefined;
      if (size === 0) {
        this.endChunk(true);
        this.state = 'trailer';
      } else {
        this.remaining = size;
        this.state = 'data';
      }
      return;
    }
    // trailer lines until an empty line
    if (line === '') {
      this.finishTrailer();
      this.state = 'done';
      return;
    }
    const at = line.indexOf(':');
    if (at <= 0) throw this.fail('IncompleteBody', 'malformed aws-chunked trailer');
    const name = line.slice(0, at).trim().toLowerCase();
    const value = line.slice(at + 1).trim();
    if (name.endsWith('-trailer-signature')) this.trailerSig = value;
    else {
      this.trailers[name] = value;
      this.trailerText += `${name}:${value}\n`;
    }
  }

  private endChunk(_final: boolean): void {
    if (!this.signing) return;
    const s = this.signing;
    const sts = chunkStringToSign(s.dialect, s.timestamp, s.scope, this.prevSig, this.chunkHash!.digest('hex'));
    const expect = signatureOf(s.key, sts);
    if (!safeEqual(expect, this.chunkSig ?? '')) throw this.fail('SignatureDoesNotMatch', 'chunk signature does not match');
    this.prevSig = expect;
  }

  private finishTrailer(): void {
    if (!this.signing || !this.trailerSigned) return;
    const s = this.signing;
    const sts = trailerStringToSign(s.dialect, s.timestamp, s.scope, this.prevSig, sha256Hex(this.trailerText));
    if (!safeEqual(signatureOf(s.key, sts), this.trailerSig ?? '')) {
      throw this.fail('SignatureDoesNotMatch', 'trailer signature does not match');
    }
  }

  override _flush(cb: TransformCallback): void {
    // Some clients end the body right after the trailer lines without the final empty line.
    if (this.state === 'trailer' && this.line === '') {
      try {
        this.finishTrailer();
      } catch (e) {
        return cb(e as Error);
      }
      this.state = 'done';
    }
    if (this.state !== 'done') return cb(this.fail('IncompleteBody', 'aws-chunked body ended early'));
    cb();
  }
}
