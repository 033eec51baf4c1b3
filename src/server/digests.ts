// Digests computed over a body as it streams by: MD5 and SHA-256 always, plus
// the "flexible checksum" a client asked for (x-amz-checksum-crc32 and kin).
import { createHash, Hash } from 'node:crypto';
import * as zlib from 'node:zlib';

export const CHECKSUM_ALGORITHMS = ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const;
export type ChecksumAlgorithm = (typeof CHECKSUM_ALGORITHMS)[number];

function crcTable32(poly: number): Uint32Array {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
}
const CRC32C_TABLE = crcTable32(0x82f63b78);

// CRC-64/NVME (reflected poly 0x9a6c9329ac4bc9b5), kept as two 32-bit halves for speed.
const CRC64_HI = new Uint32Array(256);
const CRC64_LO = new Uint32Array(256);
(() => {
  const polyHi = 0x9a6c9329, polyLo = 0xac4bc9b5;
  for (let i = 0; i < 256; i++) {
    let hi = 0, lo = i;
    for (let k = 0; k < 8; k++) {
      const bit = lo & 1;
      lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
      hi = hi >>> 1;
      if (bit) { hi = (hi ^ polyHi) >>> 0; lo = (lo ^ polyLo) >>> 0; }
    }
    CRC64_HI[i] = hi; CRC64_LO[i] = lo;
  }
})();

interface Running {
  update(b: Buffer): void;
  digest(): Buffer;
}

function crc32(): Running {
  let v = 0;
  return {
    update: (b) => { v = zlib.crc32(b, v); },
    digest: () => { const o = Buffer.alloc(4); o.writeUInt32BE(v >>> 0); return o; },
  };
}

function crc32c(): Running {
  let c = 0xffffffff;
  return {
    update: (b) => { for (let i = 0; i < b.length; i++) c = CRC32C_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8); },
    digest: () => { const o = Buffer.alloc(4); o.writeUInt32BE((c ^ 0xffffffff) >>> 0); return o; },
  };
}

function crc64nvme(): Running {
  let hi = 0xffffffff, lo = 0xffffffff;
  return {
    update: (b) => {
      for (let i = 0; i < b.length; i++) {
        const idx = (lo ^ b[i]) & 0xff;
        const nlo = ((lo >>> 8) | ((hi & 0xff) << 24)) >>> 0;
        hi = (hi >>> 8) ^ CRC64_HI[idx];
        lo = (nlo ^ CRC64_LO[idx]) >>> 0;
      }
    },
    digest: () => { const o = Buffer.alloc(8); o.writeUInt32BE((hi ^ 0xffffffff) >>> 0, 0); o.writeUInt32BE((lo ^ 0xffffffff) >>> 0, 4); return o; },
  };
}

function hashOf(alg: string): Running {
  const h: Hash = createHash(alg);
  return { update: (b) => { h.update(b); }, digest: () => h.digest() };
}

export function checksumOf(alg: ChecksumAlgorithm): Running {
  switch (alg) {
    case 'crc32': return crc32();
    case 'crc32c': return crc32c();
    case 'crc64nvme': return crc64nvme();
    case 'sha1': return hashOf('sha1');
    case 'sha256': return hashOf('sha256');
  }
}

/** MD5 + SHA-256 (when asked for) + optional flexible checksum over everything passed to update(). */
export class BodyDigests {
  private readonly md5 = createHash('md5');
  private readonly sha?: Hash;
  private readonly extra?: Running;
  size = 0;
  private done?: { md5: Buffer; sha256?: Buffer; checksum?: Buffer };

  constructor(readonly checksumAlgorithm?: ChecksumAlgorithm, sha256 = true) {
    if (checksumAlgorithm) this.extra = checksumOf(checksumAlgorithm);
    if (sha256) this.sha = createHash('sha256');
  }

  update(b: Buffer): void {
    this.size += b.length;
    this.md5.update(b);
    this.sha?.update(b);
    this.extra?.update(b);
  }

  finish(): { md5: Buffer; sha256?: Buffer; checksum?: Buffer } {
    this.done ??= { md5: this.md5.digest(), sha256: this.sha?.digest(), checksum: this.extra?.digest() };
    return this.done;
  }
}
