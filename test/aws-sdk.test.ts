// An independent client written by others, the AWS SDK for JavaScript v3,
// against the server in the aws dialect, with its default settings
// (flexible checksums, aws-chunked streaming bodies).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { getGlobalDispatcher } from 'undici';
import {
  S3Client, PutObjectCommand, GetObjectCommand, HeadObjectCommand, CopyObjectCommand, DeleteObjectCommand,
  DeleteObjectsCommand, PutObjectTaggingCommand, GetObjectTaggingCommand, DeleteObjectTaggingCommand, ListObjectsV2Command,
  CreateMultipartUploadCommand, UploadPartCommand, CompleteMultipartUploadCommand, AbortMultipartUploadCommand,
  ListPartsCommand, paginateListObjectsV2,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ADMIN, startServer } from './helpers/server';

const MiB = 1024 * 1024;

t.test('@aws-sdk/client-s3 against svcfs serve', async (t) => {
  const s = await startServer(t, { buckets: ['sdk'] });
  const s3 = new S3Client({ endpoint: s.url, region: 'us-east-1', forcePathStyle: true, credentials: ADMIN, maxAttempts: 1 });
  t.teardown(() => s3.destroy());
  const B = 'sdk';

  t.test('put, get, head, copy, delete', async (t) => {
    const put = await s3.send(new PutObjectCommand({ Bucket: B, Key: 'dir/hello world.txt', Body: 'hello sdk', ContentType: 'text/plain', Metadata: { mode: '33188' }, Tagging: 'a=1&b=2' }));
    t.match(put.ETag, /^"[0-9a-f]{32}"$/);
    const get = await s3.send(new GetObjectCommand({ Bucket: B, Key: 'dir/hello world.txt' }));
    t.equal(await get.Body!.transformToString(), 'hello sdk');
    t.equal(get.ContentType, 'text/plain');
    t.same(get.Metadata, { mode: '33188' });
    t.equal(get.TagCount, 2);
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: 'dir/hello world.txt' }));
    t.equal(head.ContentLength, 9);
    t.equal(head.ETag, put.ETag);
    const stream = await s3.send(new PutObjectCommand({ Bucket: B, Key: 'stream.bin', Body: Readable.from([randomBytes(100_000), randomBytes(50_000)]), ContentLength: 150_000 }));
    t.ok(stream.ETag, 'a streamed body (aws-chunked with a checksum trailer)');
    const cp = await s3.send(new CopyObjectCommand({ Bucket: B, Key: 'copy/of hello.txt', CopySource: `${B}/dir/hello%20world.txt` }));
    t.equal(cp.CopyObjectResult?.ETag?.replace(/"/g, ''), put.ETag!.replace(/"/g, ''));
    t.ok(cp.CopyObjectResult?.LastModified instanceof Date);
    const rep = await s3.send(new CopyObjectCommand({ Bucket: B, Key: 'copy/of hello.txt', CopySource: `${B}/copy/of%20hello.txt`, MetadataDirective: 'REPLACE', Metadata: { x: 'y' } }));
    t.ok(rep.CopyObjectResult);
    t.same((await s3.send(new HeadObjectCommand({ Bucket: B, Key: 'copy/of hello.txt' }))).Metadata, { x: 'y' });
    await s3.send(new DeleteObjectCommand({ Bucket: B, Key: 'copy/of hello.txt' }));
    await t.rejects(s3.send(new HeadObjectCommand({ Bucket: B, Key: 'copy/of hello.txt' })), { name: 'NotFound' });
    await t.rejects(s3.send(new GetObjectCommand({ Bucket: B, Key: 'nope' })), { name: 'NoSuchKey' });
  });

  t.test('ranged get', async (t) => {
    await s3.send(new PutObjectCommand({ Bucket: B, Key: 'range.txt', Body: '0123456789' }));
    const r = await s3.send(new GetObjectCommand({ Bucket: B, Key: 'range.txt', Range: 'bytes=2-5' }));
    t.equal(await r.Body!.transformToString(), '2345');
    t.equal(r.ContentRange, 'bytes 2-5/10');
    t.equal(r.$metadata.httpStatusCode, 206);
  });

  t.test('tagging', async (t) => {
    await s3.send(new PutObjectTaggingCommand({ Bucket: B, Key: 'range.txt', Tagging: { TagSet: [{ Key: 'k', Value: 'v' }, { Key: 'k2', Value: 'v 2' }] } }));
    const tags = await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: 'range.txt' }));
    t.same(tags.TagSet, [{ Key: 'k', Value: 'v' }, { Key: 'k2', Value: 'v 2' }]);
    await s3.send(new DeleteObjectTaggingCommand({ Bucket: B, Key: 'range.txt' }));
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: 'range.txt' }))).TagSet ?? [], []);
  });

  t.test('ListObjectsV2 pagination and DeleteObjects', async (t) => {
    const keys = Array.from({ length: 1200 }, (_, i) => `list/${String(i).padStart(4, '0')}`);
    for (let i = 0; i < keys.length; i += 100) {
      await Promise.all(keys.slice(i, i + 100).map((Key) => s3.send(new PutObjectCommand({ Bucket: B, Key, Body: '' }))));
    }
    const seen: string[] = [];
    let pages = 0;
    for await (const page of paginateListObjectsV2({ client: s3 }, { Bucket: B, Prefix: 'list/' })) {
      pages++;
      for (const o of page.Contents ?? []) seen.push(o.Key!);
    }
    t.equal(pages, 2);
    t.same(seen, keys);
    const d = await s3.send(new ListObjectsV2Command({ Bucket: B, Delimiter: '/' }));
    t.same(d.CommonPrefixes?.map((p) => p.Prefix), ['dir/', 'list/']);
    const del = await s3.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: keys.slice(0, 1000).map((Key) => ({ Key })) } }));
    t.equal(del.Deleted?.length, 1000, 'DeleteObjects (checksum header in place of Content-MD5)');
    const quiet = await s3.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Quiet: true, Objects: [...keys.slice(1000).map((Key) => ({ Key })), { Key: 'z'.repeat(1100) }] } }));
    t.equal(quiet.Deleted, undefined);
    t.equal(quiet.Errors?.length, 1);
    t.equal(quiet.Errors?.[0].Code, 'KeyTooLongError');
    t.equal((await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: 'list/' }))).KeyCount, 0);
  });

  t.test('multipart upload', async (t) => {
    const parts = [randomBytes(5 * MiB), randomBytes(3 * MiB)];
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: 'mp.bin', ContentType: 'application/x-mp' }));
    const done = [];
    for (let i = 0; i < parts.length; i++) {
      const r = await s3.send(new UploadPartCommand({ Bucket: B, Key: 'mp.bin', UploadId, PartNumber: i + 1, Body: parts[i] }));
      done.push({ PartNumber: i + 1, ETag: r.ETag });
    }
    const listed = await s3.send(new ListPartsCommand({ Bucket: B, Key: 'mp.bin', UploadId }));
    t.equal(listed.Parts?.length, 2);
    const c = await s3.send(new CompleteMultipartUploadCommand({ Bucket: B, Key: 'mp.bin', UploadId, MultipartUpload: { Parts: done } }));
    t.match(c.ETag, /-2"$/);
    const got = Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: B, Key: 'mp.bin' }))).Body!.transformToByteArray());
    t.ok(got.equals(Buffer.concat(parts)), 'byte-exact');
    const ab = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: 'ab.bin' }));
    await s3.send(new AbortMultipartUploadCommand({ Bucket: B, Key: 'ab.bin', UploadId: ab.UploadId }));
    await t.rejects(s3.send(new ListPartsCommand({ Bucket: B, Key: 'ab.bin', UploadId: ab.UploadId })), { name: 'NoSuchUpload' });
  });

  t.test('pre-signed GET and PUT', async (t) => {
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: B, Key: 'presigned/up.txt' }), { expiresIn: 300 });
    const u = new URL(putUrl);
    const r = await getGlobalDispatcher().request({ origin: u.origin, path: putUrl.slice(u.origin.length), method: 'PUT', body: 'via presigned' });
    await r.body.dump();
    t.equal(r.statusCode, 200);
    const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: B, Key: 'presigned/up.txt' }), { expiresIn: 300 });
    const g = new URL(getUrl);
    const gr = await getGlobalDispatcher().request({ origin: g.origin, path: getUrl.slice(g.origin.length), method: 'GET' });
    t.equal(await gr.body.text(), 'via presigned');
  });
});
