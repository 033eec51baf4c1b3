// The staging file's bare descriptor (src/fs/stagingfile.ts): opened and closed
// synchronously, it must still not close under a read or write in flight, as
// a FileHandle would not, or a number reused meanwhile would be another file.
import t from 'tap';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { StagingFile } from '../src/fs/stagingfile';
import { tmpDir } from './helpers/server';

t.test('close waits for the reads and writes in flight, and nothing works after it', async (t) => {
  const file = path.join(tmpDir('staging'), 'f');
  const bytes = crypto.randomBytes(4 * 1024 * 1024);
  fs.writeFileSync(file, bytes);
  const f = new StagingFile(file, 'r+');
  const fd = f.fd;
  // big enough to go through the thread pool
  const read = f.readRange(0, bytes.length);
  const write = f.write(Buffer.alloc(1024 * 1024, 7), 0, 1024 * 1024, bytes.length);
  const closed = f.close();
  t.doesNotThrow(() => fs.fstatSync(fd), 'the descriptor is still open while they are in flight');
  t.ok((await read).equals(bytes), 'the read got the staging file\'s bytes');
  t.equal(await write, 1024 * 1024);
  await closed;
  t.throws(() => fs.fstatSync(fd), { code: 'EBADF' }, 'and then closed');
  t.throws(() => f.fd, { code: 'EBADF' });
  await t.rejects(f.readRange(0, 10), { code: 'EBADF' }, 'a read after close fails');
  await t.rejects(f.truncate(0), { code: 'EBADF' });
  await f.close(); // twice is harmless
  t.equal(fs.statSync(file).size, bytes.length + 1024 * 1024, 'the write landed before the close');
});

t.test('small reads are synchronous copies, and a short file is an error', async (t) => {
  const file = path.join(tmpDir('staging'), 'g');
  fs.writeFileSync(file, 'hello world');
  const f = new StagingFile(file, 'r');
  t.equal((await f.readRange(6, 5)).toString(), 'world');
  await t.rejects(f.readRange(6, 50), /shorter than expected/);
  await f.close();
});
