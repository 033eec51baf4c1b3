// XML in and out. Parsing refuses DOCTYPE outright (no entity expansion, no
// external entities); building escapes every text node.
import { XMLParser } from 'fast-xml-parser';

export const DEFAULT_XML_NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';

export class XmlError extends Error {}

/** Elements that repeat, by path: always parsed as arrays, even when there is one. */
const REPEATED = new Set([
  'Delete.Object', 'DeleteResult.Deleted', 'DeleteResult.Error', 'Tagging.TagSet.Tag', 'CompleteMultipartUpload.Part',
  'ListPartsResult.Part', 'ListBucketResult.Contents', 'ListBucketResult.Contents.UserMetadata.Entry', 'ListBucketResult.CommonPrefixes.UserMetadata.Entry', 'ListBucketResult.CommonPrefixes', 'ListMultipartUploadsResult.Upload',
  'ListAllMyBucketsResult.Buckets.Bucket',
]);

const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false, // keys such as "007" or "true" stay strings
  trimValues: false,
  // The five predefined entities and numeric character references (`&#34;`, as Go's
  // encoding/xml writes quotes); fast-xml-parser decodes the latter only with its
  // htmlEntities switch, which also takes a few HTML names. `&amp;` goes last, so
  // nothing is decoded twice; DOCTYPE is refused below, so nothing expands.
  processEntities: true,
  htmlEntities: true,
  isArray: (_name, jpath) => REPEATED.has(String(jpath)),
});

/** Parse a small XML document; throws XmlError on anything malformed or with a DOCTYPE. */
export function parseXml(text: string): Record<string, any> {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw new XmlError('DOCTYPE and entity declarations are not accepted');
  let doc: Record<string, any>;
  try {
    doc = parser.parse(text, true);
  } catch (e) {
    throw new XmlError((e as Error).message);
  }
  if (!doc || typeof doc !== 'object') throw new XmlError('empty document');
  return doc;
}

export function escapeXml(s: string): string {
  return s.replace(/[&<>"'\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, (c) => {
    switch (c) {
      case '&': return '&amp;';
      case '<': return '&lt;';
      case '>': return '&gt;';
      case '"': return '&quot;';
      case "'": return '&apos;';
      default: return `&#x${c.charCodeAt(0).toString(16)};`;
    }
  });
}

export type XmlNode = string | number | boolean | undefined | null | XmlTree | XmlNode[];
export interface XmlTree {
  [name: string]: XmlNode;
}

function render(name: string, v: XmlNode): string {
  if (v === undefined || v === null) return '';
  if (Array.isArray(v)) return v.map((x) => render(name, x)).join('');
  if (typeof v === 'object') return `<${name}>${Object.entries(v).map(([k, c]) => render(k, c)).join('')}</${name}>`;
  return `<${name}>${escapeXml(String(v))}</${name}>`;
}

/** `{Root: {...}}` -> XML document; arrays repeat their element. */
export function buildXml(root: string, body: XmlTree, namespace?: string): string {
  const inner = Object.entries(body).map(([k, c]) => render(k, c)).join('');
  const ns = namespace ? ` xmlns="${escapeXml(namespace)}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${ns}>${inner}</${root}>`;
}

/** Text of an element parsed by parseXml (text nodes may come back as objects when empty). */
export function textOf(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'object') return '';
  return String(v);
}
