// Header values beyond ASCII, the way S3 carries them in user metadata: a value
// with other characters goes out as an RFC 2047 encoded word (=?UTF-8?B?...?=)
// and encoded words are decoded on the way in. Raw UTF-8 bytes in a header (Go
// and Java SDKs, curl send them as given) arrive in Node as latin1 characters
// and are turned back into the text they were.

const ASCII = /^[\x20-\x7e\t]*$/;

/** Text for a header: as is when printable ASCII, else one RFC 2047 encoded word. */
export function encodeHeaderText(s: string): string {
  return ASCII.test(s) ? s : `=?UTF-8?B?${Buffer.from(s, 'utf8').toString('base64')}?=`;
}

/** A header value as text: encoded words decoded (UTF-8 or ISO-8859-1, B or Q). */
export function decodeHeaderText(s: string): string {
  if (!s.includes('=?')) return s;
  return s.replace(/=\?([^?]+)\?([BbQq])\?([^?]*)\?=(\s+(?==\?))?/g, (all, charset: string, enc: string, text: string) => {
    const cs = charset.toLowerCase();
    if (cs !== 'utf-8' && cs !== 'us-ascii' && cs !== 'iso-8859-1') return all;
    const bytes = enc.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64')
      : Buffer.from(text.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1');
    return bytes.toString(cs === 'iso-8859-1' ? 'latin1' : 'utf8');
  });
}

/**
 * A value as Node's HTTP parser hands it over (each byte one latin1 character)
 * turned back into the UTF-8 text the client sent; unchanged when it is ASCII
 * or not valid UTF-8.
 */
export function utf8FromLatin1(v: string): string {
  if (!/[^\x00-\x7f]/.test(v)) return v;
  const text = Buffer.from(v, 'latin1').toString('utf8');
  return text.includes('\uFFFD') ? v : text;
}
