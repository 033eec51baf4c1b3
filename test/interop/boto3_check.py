"""boto3 (Debian's python3-boto3) against an S3-compatible endpoint.

Usage: boto3_check.py ENDPOINT BUCKET ACCESS_KEY SECRET_KEY WORKDIR
Prints one line per check, `PASS name` or `FAIL name: why`; test/interop.test.ts
turns each into an assertion.
"""
import hashlib
import http.client
import os
import sys
import traceback
import urllib.parse
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

endpoint, bucket, ak, sk, work = sys.argv[1:6]
s3 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name='us-east-1', config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
MiB = 1024 * 1024


def check(name):
    def run(f):
        try:
            f()
            print(f'PASS {name}', flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
            why = f'{type(e).__name__}: {e}'.replace('\n', ' ')
            print(f'FAIL {name}: {why[:400]}', flush=True)
            traceback.print_exc(file=sys.stderr)
        return f
    return run


def eq(a, b, what=''):
    if a != b:
        raise AssertionError(f'{what} {a!r} != {b!r}')


def md5(b):
    return hashlib.md5(b).hexdigest()


@check('upload_file multipart and download_file')
def _():
    src = os.path.join(work, 'big.bin')
    data = os.urandom(13 * MiB + 17)
    with open(src, 'wb') as f:
        f.write(data)
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
    s3.upload_file(src, bucket, 'boto/big.bin', Config=cfg)
    head = s3.head_object(Bucket=bucket, Key='boto/big.bin')
    eq(head['ContentLength'], len(data), 'size')
    if not head['ETag'].strip('"').endswith('-3'):
        raise AssertionError(f'not a 3-part upload: {head["ETag"]}')
    dst = os.path.join(work, 'big.back')
    s3.download_file(bucket, 'boto/big.bin', dst, Config=cfg)
    with open(dst, 'rb') as f:
        eq(md5(f.read()), md5(data), 'content')


@check('copy_object with metadata directive, and managed copy (UploadPartCopy)')
def _():
    s3.put_object(Bucket=bucket, Key='boto/src.txt', Body=b'copy me', Metadata={'color': 'blue'})
    s3.copy_object(Bucket=bucket, Key='boto/dst.txt', CopySource={'Bucket': bucket, 'Key': 'boto/src.txt'})
    h = s3.head_object(Bucket=bucket, Key='boto/dst.txt')
    eq(h['Metadata'], {'color': 'blue'}, 'metadata copied')
    s3.copy_object(Bucket=bucket, Key='boto/dst.txt', CopySource={'Bucket': bucket, 'Key': 'boto/dst.txt'},
                   MetadataDirective='REPLACE', Metadata={'color': 'red'})
    eq(s3.head_object(Bucket=bucket, Key='boto/dst.txt')['Metadata'], {'color': 'red'}, 'metadata replaced')
    # boto3's managed copy above its threshold copies in ranged parts
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    s3.copy({'Bucket': bucket, 'Key': 'boto/big.bin'}, bucket, 'boto/big.copy', Config=cfg)
    a = s3.get_object(Bucket=bucket, Key='boto/big.bin')['Body'].read()
    b = s3.get_object(Bucket=bucket, Key='boto/big.copy')['Body'].read()
    eq(md5(b), md5(a), 'multipart copy content')


@check('upload_part_copy with ranges')
def _():
    s3.put_object(Bucket=bucket, Key='boto/digits', Body=b'0123456789' * 1000)
    u = s3.create_multipart_upload(Bucket=bucket, Key='boto/pc')['UploadId']
    r1 = s3.upload_part_copy(Bucket=bucket, Key='boto/pc', UploadId=u, PartNumber=1,
                             CopySource={'Bucket': bucket, 'Key': 'boto/big.bin'}, CopySourceRange=f'bytes=0-{5 * MiB - 1}')
    r2 = s3.upload_part_copy(Bucket=bucket, Key='boto/pc', UploadId=u, PartNumber=2,
                             CopySource={'Bucket': bucket, 'Key': 'boto/digits'}, CopySourceRange='bytes=10-19')
    s3.complete_multipart_upload(Bucket=bucket, Key='boto/pc', UploadId=u, MultipartUpload={'Parts': [
        {'PartNumber': 1, 'ETag': r1['CopyPartResult']['ETag']}, {'PartNumber': 2, 'ETag': r2['CopyPartResult']['ETag']}]})
    got = s3.get_object(Bucket=bucket, Key='boto/pc')['Body'].read()
    big = s3.get_object(Bucket=bucket, Key='boto/big.bin', Range=f'bytes=0-{5 * MiB - 1}')['Body'].read()
    eq(got, big + b'0123456789', 'parts from ranges')
    try:
        u2 = s3.create_multipart_upload(Bucket=bucket, Key='boto/pc2')['UploadId']
        s3.upload_part_copy(Bucket=bucket, Key='boto/pc2', UploadId=u2, PartNumber=1,
                            CopySource={'Bucket': bucket, 'Key': 'boto/digits'}, CopySourceRange='bytes=5-999999')
        raise AssertionError('a range past the end was accepted')
    except s3.exceptions.ClientError as e:
        eq(e.response['Error']['Code'], 'InvalidArgument', 'range past the end')


@check('complete_multipart_upload sent twice answers the completed object')
def _():
    u = s3.create_multipart_upload(Bucket=bucket, Key='boto/twice')['UploadId']
    e = s3.upload_part(Bucket=bucket, Key='boto/twice', UploadId=u, PartNumber=1, Body=b'x' * 100)['ETag']
    parts = {'Parts': [{'PartNumber': 1, 'ETag': e}]}
    r1 = s3.complete_multipart_upload(Bucket=bucket, Key='boto/twice', UploadId=u, MultipartUpload=parts)
    r2 = s3.complete_multipart_upload(Bucket=bucket, Key='boto/twice', UploadId=u, MultipartUpload=parts)
    eq(r2['ETag'], r1['ETag'], 'same ETag')


@check('a part sent twice, then completed')
def _():
    u = s3.create_multipart_upload(Bucket=bucket, Key='boto/part2')['UploadId']
    body = os.urandom(5 * MiB)
    e1 = s3.upload_part(Bucket=bucket, Key='boto/part2', UploadId=u, PartNumber=1, Body=body)['ETag']
    e1b = s3.upload_part(Bucket=bucket, Key='boto/part2', UploadId=u, PartNumber=1, Body=body)['ETag']
    e2 = s3.upload_part(Bucket=bucket, Key='boto/part2', UploadId=u, PartNumber=2, Body=b'tail')['ETag']
    eq(e1b, e1, 'same part, same ETag')
    s3.complete_multipart_upload(Bucket=bucket, Key='boto/part2', UploadId=u, MultipartUpload={'Parts': [
        {'PartNumber': 1, 'ETag': e1b}, {'PartNumber': 2, 'ETag': e2}]})
    eq(s3.get_object(Bucket=bucket, Key='boto/part2')['Body'].read(), body + b'tail', 'content')


@check('tagging: put, get, header with a valueless tag, delete')
def _():
    s3.put_object(Bucket=bucket, Key='boto/tagged', Body=b't', Tagging='foo=bar&bar')
    got = sorted((t['Key'], t['Value']) for t in s3.get_object_tagging(Bucket=bucket, Key='boto/tagged')['TagSet'])
    eq(got, [('bar', ''), ('foo', 'bar')], 'tags from the header')
    s3.put_object_tagging(Bucket=bucket, Key='boto/tagged', Tagging={'TagSet': [{'Key': 'k & <x>', 'Value': 'v "1"'}]})
    got = s3.get_object_tagging(Bucket=bucket, Key='boto/tagged')['TagSet']
    eq(got, [{'Key': 'k & <x>', 'Value': 'v "1"'}], 'tags with XML specials')
    eq(s3.head_object(Bucket=bucket, Key='boto/tagged').get('ResponseMetadata', {}).get('HTTPHeaders', {}).get('x-amz-tagging-count'), '1')
    s3.delete_object_tagging(Bucket=bucket, Key='boto/tagged')
    eq(s3.get_object_tagging(Bucket=bucket, Key='boto/tagged')['TagSet'], [], 'deleted')


@check('delete_objects, quiet and verbose')
def _():
    keys = [f'boto/del/{i}' for i in range(30)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.delete_objects(Bucket=bucket, Delete={'Objects': [{'Key': k} for k in keys[:10]]})
    eq(sorted(d['Key'] for d in r['Deleted']), sorted(keys[:10]), 'verbose')
    r = s3.delete_objects(Bucket=bucket, Delete={'Objects': [{'Key': k} for k in keys[10:]], 'Quiet': True})
    eq(r.get('Deleted', []), [], 'quiet lists nothing')
    eq(s3.list_objects_v2(Bucket=bucket, Prefix='boto/del/')['KeyCount'], 0, 'all gone')


@check('paginated listings, V2 and V1, with delimiter and odd keys')
def _():
    names = [f'boto/page/{i:04d}' for i in range(2345)]
    odd = ['boto/odd/a b+c', 'boto/odd/ünï/漢字', 'boto/odd/%41', 'boto/odd/x&y<z>', 'boto/odd/tab\there']
    for k in odd:
        s3.put_object(Bucket=bucket, Key=k, Body=b'o')
    # one batch of 2345 keys through copy of a small object keeps this fast
    for k in names:
        s3.put_object(Bucket=bucket, Key=k, Body=b'')
    pg = s3.get_paginator('list_objects_v2')
    got = [o['Key'] for p in pg.paginate(Bucket=bucket, Prefix='boto/page/', PaginationConfig={'PageSize': 1000}) for o in p.get('Contents', [])]
    eq(got, names, 'V2 pages')
    pg1 = s3.get_paginator('list_objects')
    got = [o['Key'] for p in pg1.paginate(Bucket=bucket, Prefix='boto/page/') for o in p.get('Contents', [])]
    eq(got, names, 'V1 pages')
    got = [o['Key'] for p in pg.paginate(Bucket=bucket, Prefix='boto/odd/', PaginationConfig={'PageSize': 2}) for o in p.get('Contents', [])]
    eq(sorted(got), sorted(odd), 'odd keys round-trip (encoding-type=url)')
    top = s3.list_objects_v2(Bucket=bucket, Prefix='boto/', Delimiter='/')
    prefixes = [p['Prefix'] for p in top.get('CommonPrefixes', [])]
    for want in ['boto/odd/', 'boto/page/']:
        if want not in prefixes:
            raise AssertionError(f'{want} missing from {prefixes}')
    z = s3.list_objects_v2(Bucket=bucket, Prefix='boto/page/', MaxKeys=0)
    eq((z['KeyCount'], z['IsTruncated'], 'Contents' in z), (0, False, False), 'max-keys=0')
    fo = s3.list_objects_v2(Bucket=bucket, Prefix='boto/page/', MaxKeys=1, FetchOwner=True)
    if 'Owner' not in fo['Contents'][0]:
        raise AssertionError('fetch-owner=true gave no Owner')
    nf = s3.list_objects_v2(Bucket=bucket, Prefix='boto/page/', MaxKeys=1)
    if 'Owner' in nf['Contents'][0]:
        raise AssertionError('Owner without fetch-owner')
    v1 = s3.list_objects(Bucket=bucket, Prefix='boto/page/', MaxKeys=1)
    if 'Owner' not in v1['Contents'][0]:
        raise AssertionError('V1 listing without Owner')
    s3.delete_objects(Bucket=bucket, Delete={'Objects': [{'Key': k} for k in names[:1000]], 'Quiet': True})
    s3.delete_objects(Bucket=bucket, Delete={'Objects': [{'Key': k} for k in names[1000:2000]], 'Quiet': True})
    s3.delete_objects(Bucket=bucket, Delete={'Objects': [{'Key': k} for k in names[2000:] + odd], 'Quiet': True})


@check('presigned GET and PUT URLs (boto3 default v2 and s3v4), used by urllib')
def _():
    v4 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk, region_name='us-east-1',
                      config=Config(s3={'addressing_style': 'path'}, signature_version='s3v4'))
    for name, client in (('v2', s3), ('v4', v4)):
        key = f'boto/presigned-{name}'
        put = client.generate_presigned_url('put_object', Params={'Bucket': bucket, 'Key': key}, ExpiresIn=300)
        # the URL was signed for no Content-Type: send none (urllib would add a form type)
        req = urllib.request.Request(put, data=f'via presigned PUT {name}'.encode(), method='PUT', headers={'Content-Type': ''})
        with urllib.request.urlopen(req) as r:
            eq(r.status, 200)
        get = client.generate_presigned_url('get_object', Params={'Bucket': bucket, 'Key': key}, ExpiresIn=300)
        with urllib.request.urlopen(get) as r:
            eq(r.read(), f'via presigned PUT {name}'.encode())
        bad = get.replace('Signature=', 'Signature=0')
        try:
            urllib.request.urlopen(bad)
            raise AssertionError(f'a tampered {name} URL was accepted')
        except urllib.error.HTTPError as e:
            eq(e.code, 403)


def raw_put(key, body, headers):
    """A PUT signed by botocore but sent by http.client, to control framing headers."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    url = f'{endpoint}/{bucket}/{urllib.parse.quote(key)}'
    req = AWSRequest(method='PUT', url=url, headers=headers, data=body)
    S3SigV4Auth(s3._request_signer._credentials, 's3', 'us-east-1').add_auth(req)
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.putrequest('PUT', u.path, skip_accept_encoding=True)
    for k, v in req.headers.items():
        conn.putheader(k, v.encode('utf-8'))  # raw UTF-8 on the wire, as Go and Java SDKs send it
    chunked = 'Transfer-Encoding' in headers
    conn.endheaders()
    if chunked:
        for i in range(0, len(body), 1000):
            piece = body[i:i + 1000]
            conn.send(b'%x\r\n' % len(piece) + piece + b'\r\n')
        conn.send(b'0\r\n\r\n')
    else:
        conn.send(body)
    r = conn.getresponse()
    text = r.read()
    conn.close()
    return r.status, text


@check('PUT with Transfer-Encoding: chunked and no Content-Length')
def _():
    body = os.urandom(54321)
    status, text = raw_put('boto/chunked', body, {'Transfer-Encoding': 'chunked'})
    eq(status, 200, text)
    eq(s3.get_object(Bucket=bucket, Key='boto/chunked')['Body'].read(), body, 'content')


@check('PUT with an Expect header other than 100-continue')
def _():
    status, text = raw_put('boto/expect', b'expected', {'Expect': 'something-else', 'Content-Length': '8'})
    eq(status, 200, text)
    eq(s3.get_object(Bucket=bucket, Key='boto/expect')['Body'].read(), b'expected')


@check('non-ASCII metadata: raw UTF-8 header and RFC 2047 encoded word')
def _():
    status, text = raw_put('boto/meta8', b'm', {'x-amz-meta-name': 'héllo wörld 漢字', 'Content-Length': '1'})
    eq(status, 200, text)
    h = s3.head_object(Bucket=bucket, Key='boto/meta8')['Metadata']['name']
    # S3 returns non-ASCII metadata as an RFC 2047 encoded word
    import email.header
    decoded = ''.join(p.decode(c or 'ascii') if isinstance(p, bytes) else p for p, c in email.header.decode_header(h))
    eq(decoded, 'héllo wörld 漢字', 'round trip')
    s3.put_object(Bucket=bucket, Key='boto/meta2047', Body=b'm', Metadata={'name': '=?UTF-8?B?' + __import__('base64').b64encode('ünï'.encode()).decode() + '?='})
    h = s3.head_object(Bucket=bucket, Key='boto/meta2047')['Metadata']['name']
    decoded = ''.join(p.decode(c or 'ascii') if isinstance(p, bytes) else p for p, c in email.header.decode_header(h))
    eq(decoded, 'ünï', 'encoded word kept')


@check('conditional GET and ranges')
def _():
    s3.put_object(Bucket=bucket, Key='boto/cond', Body=b'0123456789')
    etag = s3.head_object(Bucket=bucket, Key='boto/cond')['ETag']
    eq(s3.get_object(Bucket=bucket, Key='boto/cond', Range='bytes=2-4')['Body'].read(), b'234')
    try:
        s3.get_object(Bucket=bucket, Key='boto/cond', IfNoneMatch=etag)
        raise AssertionError('If-None-Match on the current ETag gave the object')
    except s3.exceptions.ClientError as e:
        eq(e.response['Error']['Code'], '304')
    try:
        s3.get_object(Bucket=bucket, Key='boto/cond', IfMatch='"0000"')
        raise AssertionError('If-Match on another ETag gave the object')
    except s3.exceptions.ClientError as e:
        eq(e.response['Error']['Code'], 'PreconditionFailed')
