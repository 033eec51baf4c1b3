// The XML scanner every response and request body goes through.
import t from 'tap';
import { parseXml, XmlError, buildXml } from '../src/wire/xml';

t.test('elements become objects, repeated ones arrays, text stays text', async (t) => {
  const doc = parseXml('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    + '<Name>b</Name><KeyCount>007</KeyCount><Contents><Key> a&amp;b&lt;&#34;&#x41;&#128512; </Key><Size>1</Size></Contents>'
    + '<!-- a comment --><CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes><CommonPrefixes><Prefix>e/</Prefix></CommonPrefixes>'
    + '<Empty/><Empty2></Empty2><Raw><![CDATA[<x>&amp;]]></Raw></ListBucketResult>');
  const r = doc.ListBucketResult;
  t.equal(r.KeyCount, '007', 'no number conversion');
  t.same(r.Contents, [{ Key: ' a&b<"A\u{1f600} ', Size: '1' }], 'a repeated path is an array even with one element; entities decoded, spaces kept');
  t.same(r.CommonPrefixes, [{ Prefix: 'd/' }, { Prefix: 'e/' }]);
  t.equal(r.Empty, '');
  t.equal(r.Empty2, '');
  t.equal(r.Raw, '<x>&amp;', 'CDATA is not decoded');
  t.same(parseXml('<A><B>1</B><B>2</B></A>').A.B, ['1', '2'], 'an element that repeats becomes an array');
  t.same(parseXml('<A>\n  <B attr="x>y">1</B>\n</A>').A, { B: '1' }, 'whitespace between elements and attributes are dropped');
});

t.test('what it builds, it reads back', async (t) => {
  const text = buildXml('Tagging', { TagSet: { Tag: [{ Key: 'k<&>"\'', Value: '\u0001 v' }] } });
  t.same(parseXml(text).Tagging.TagSet.Tag, [{ Key: 'k<&>"\'', Value: '\u0001 v' }]);
});

t.test('malformed documents and declarations are refused', async (t) => {
  for (const bad of ['', '   ', 'text', '<a>', '</a>', '<a><b></a></b>', '<a></b>', '<a/><b/>', 'x<a/>', '<a/>x', '<a>&#0;</a>', '<a>&#x110000;</a>',
    '<a><![CDATA[x</a>', '<a><!-- x</a>', '<?xml', '<1a/>', '<a', '<a b="></a>', '<a><!ELEMENT x></a>',
    '<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>', '<a><!ENTITY e SYSTEM "file:///etc/passwd"></a>']) {
    let err: unknown;
    try { parseXml(bad); } catch (e) { err = e; }
    t.ok(err instanceof XmlError, `refused: ${JSON.stringify(bad)}${err ? ` (${(err as Error).message})` : ''}`);
  }
  t.equal(parseXml('<a>&e; &unknown;</a>').a, '&e; &unknown;', 'an undeclared entity is left as text, never expanded');
});
