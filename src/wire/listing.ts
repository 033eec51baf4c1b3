// svcfs serve's listing as JSON, an extension both sides share: asked for with
// this query parameter, told by this content type (other stores ignore the
// parameter and answer XML; Ceph RGW answers `format=json` with a JSON of
// another shape, so neither name is the common one).
export const JSON_LISTING = { param: 'svcfs-format', contentType: 'application/x-svcfs-listing+json' };

/** A page: keys exact (no encoding-type), times in milliseconds since the epoch, metadata only when asked for. */
export interface JsonListing {
  isTruncated: boolean;
  /** the continuation token (V2) or next marker (V1), when truncated */
  next?: string;
  contents: Array<{ key: string; lastModified: number; etag: string; size: number; meta?: Record<string, string> }>;
  prefixes: Array<{ prefix: string; meta?: Record<string, string> }>;
}
