// XML in and out. Parsing refuses DOCTYPE outright (no entity expansion, no
// external entities); building escapes every text node.

export const DEFAULT_XML_NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';

export class XmlError extends Error {}

/** Elements that repeat, by path: always parsed as arrays, even when there is one. */
const REPEATED = [
  'Delete.Object', 'DeleteResult.Deleted', 'DeleteResult.Error', 'Tagging.TagSet.Tag', 'CompleteMultipartUpload.Part',
  'ListPartsResult.Part', 'ListBucketResult.Contents', 'ListBucketResult.Contents.UserMetadata.Entry', 'ListBucketResult.CommonPrefixes.UserMetadata.Entry', 'ListBucketResult.CommonPrefixes', 'ListMultipartUploadsResult.Upload',
  'ListAllMyBucketsResult.Buckets.Bucket',
];

/** REPEATED as a tree of element names: a frame finds its node from its parent's, no path string per element */
interface PathNode { repeated: boolean; kids: Map<string, PathNode> }
const PATHS: PathNode = { repeated: false, kids: new Map() };
for (const p of REPEATED) {
  let n = PATHS;
  for (const name of p.split('.')) {
    let k = n.kids.get(name);
    if (!k) n.kids.set(name, (k = { repeated: false, kids: new Map() }));
    n = k;
  }
  n.repeated = true;
}

/** Parse an XML document of this interface; throws XmlError on anything malformed or with a DOCTYPE. */
export function parseXml(text: string): Record<string, any> {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw new XmlError('DOCTYPE and entity declarations are not accepted');
  return scan(text);
}

// A strict single-pass scanner instead of a general parser: the interface's
// documents are elements and text only (attributes, such as xmlns, are read past),
// and a listing page of 1,000 entries with metadata (half a megabyte) is the hot
// path of `ls`: fast-xml-parser took 60-120 ms for one, this takes a few. Text is
// kept as is (no trimming, no number conversion); elements with children become
// objects, repeated ones arrays (always, for the paths in REPEATED); the five
// predefined entities and numeric character references are decoded.

interface Frame { name: string; node: PathNode | undefined; obj: Record<string, any>; text: string; children: boolean }

const NAME = /^[A-Za-z_][\w.:-]*$/;
const ENTITY = /&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot|apos);/g;
const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function decode(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(ENTITY, (_m, e: string) => {
    if (e[0] !== '#') return NAMED[e];
    const cp = e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
    if (!(cp > 0 && cp <= 0x10ffff)) throw new XmlError(`bad character reference &${e};`);
    return String.fromCodePoint(cp);
  });
}

/**
 * Text that does not pin the document: V8 makes a slice of 13 characters or
 * more a view of its parent, so one kept value (an ETag, a time in a listing's
 * metadata) kept the whole 500 KB page alive; 100 pages of a 100,000-entry
 * listing held 47 MiB that way.
 */
function own(s: string): string {
  return s.length < 13 ? s : Buffer.from(s, 'utf8').toString('utf8');
}

const GT = 62;
const DQ = 34;
const SQ = 39;

/**
 * index of the `>` that ends the tag opened before `from`, past quoted attribute
 * values (a loop over char codes: a slice and a regex per tag were most of the
 * time of a listing page)
 */
function tagEnd(text: string, from: number): number {
  let quote = 0;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quote) {
      if (c === quote) quote = 0;
    } else if (c === DQ || c === SQ) quote = c;
    else if (c === GT) return i;
  }
  return -1;
}

/** length of the element name at the start of `s` (up to white space) */
function nameLength(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13) return i;
  }
  return s.length;
}

function scan(text: string): Record<string, any> {
  const doc: Frame = { name: '', node: PATHS, obj: {}, text: '', children: false };
  const stack: Frame[] = [doc];
  let top = doc;
  let roots = 0;
  let i = 0;
  const close = (f: Frame, value: any) => {
    const parent = stack[stack.length - 1];
    parent.children = true;
    const have = parent.obj[f.name];
    if (f.node?.repeated) (have ?? (parent.obj[f.name] = [])).push(value);
    else if (have === undefined) parent.obj[f.name] = value;
    else if (Array.isArray(have)) have.push(value);
    else parent.obj[f.name] = [have, value];
  };
  while (i < text.length) {
    const lt = text.indexOf('<', i);
    const stop = lt < 0 ? text.length : lt;
    if (stop > i) {
      const t = text.slice(i, stop);
      if (top !== doc) top.text += decode(t);
      else if (t.trim()) throw new XmlError('text outside the root element');
    }
    if (lt < 0) break;
    const c = text[lt + 1];
    if (c === '?') { // the declaration, processing instructions
      const e = text.indexOf('?>', lt + 2);
      if (e < 0) throw new XmlError('unterminated processing instruction');
      i = e + 2;
    } else if (c === '!') {
      if (text.startsWith('<!--', lt)) {
        const e = text.indexOf('-->', lt + 4);
        if (e < 0) throw new XmlError('unterminated comment');
        i = e + 3;
      } else if (text.startsWith('<![CDATA[', lt) && top !== doc) {
        const e = text.indexOf(']]>', lt + 9);
        if (e < 0) throw new XmlError('unterminated CDATA section');
        top.text += text.slice(lt + 9, e);
        i = e + 3;
      } else throw new XmlError(`unexpected markup at ${lt}`);
    } else if (c === '/') {
      const e = text.indexOf('>', lt);
      const name = e < 0 ? '' : text.slice(lt + 2, e).trimEnd();
      if (top === doc || name !== top.name) throw new XmlError(`unexpected </${name}> at ${lt}${top === doc ? '' : ` (open: <${top.name}>)`}`);
      stack.pop();
      let value: any = own(top.text);
      if (top.children) {
        value = top.obj;
        if (top.text.trim()) value['#text'] = top.text;
      }
      close(top, value);
      top = stack[stack.length - 1];
      i = e + 1;
    } else {
      const e = tagEnd(text, lt + 1);
      if (e < 0) throw new XmlError(`unterminated tag at ${lt}`);
      const self = text[e - 1] === '/';
      const inner = text.slice(lt + 1, self ? e - 1 : e);
      const sp = nameLength(inner);
      const name = sp === inner.length ? inner : inner.slice(0, sp);
      if (!NAME.test(name)) throw new XmlError(`bad element name "${name}" at ${lt}`);
      if (top === doc && roots++ > 0) throw new XmlError('more than one root element');
      const f: Frame = { name, node: top.node?.kids.get(name), obj: {}, text: '', children: false };
      if (self) close(f, '');
      else {
        stack.push(f);
        top = f;
      }
      i = e + 1;
    }
  }
  if (stack.length > 1) throw new XmlError(`unclosed <${top.name}>`);
  if (roots === 0) throw new XmlError('empty document');
  return doc.obj;
}

const NEEDS_ESCAPE = /[&<>"'\u0000-\u0008\u000b\u000c\u000e-\u001f]/;

export function escapeXml(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
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

/** appends to `out` (one string grown in place: a listing page is ~25,000 elements) */
function render(out: string[], name: string, v: XmlNode): void {
  if (v === undefined || v === null) return;
  if (Array.isArray(v)) {
    for (const x of v) render(out, name, x);
  } else if (typeof v === 'object') {
    out.push(`<${name}>`);
    for (const k in v) render(out, k, v[k]);
    out.push(`</${name}>`);
  } else out.push(`<${name}>${escapeXml(String(v))}</${name}>`);
}

/** `{Root: {...}}` -> XML document; arrays repeat their element. */
export function buildXml(root: string, body: XmlTree, namespace?: string): string {
  const parts: string[] = [];
  for (const k in body) render(parts, k, body[k]);
  const inner = parts.join('');
  const ns = namespace ? ` xmlns="${escapeXml(namespace)}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${ns}>${inner}</${root}>`;
}

/** Text of an element parsed by parseXml (text nodes may come back as objects when empty). */
export function textOf(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'object') return '';
  return String(v);
}
