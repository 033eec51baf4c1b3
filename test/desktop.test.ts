// Desktop programs on the mount, as its users run them: LibreOffice (headless,
// as an ordinary user on an allow_other mount) converting into and out of the
// mount and an open-edit-save cycle driven over UNO, beside a second mount of
// the same bucket; GLib's gio copy, move, trash.
import t from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sh, shStatus, startMount } from './helpers/mount';
import { ROOT, startServer, tmpDir } from './helpers/server';

const LO_EDIT = path.join(ROOT, 'test', 'desktop', 'lo_edit.py');

// LibreOffice runs as an ordinary user (nobody) on a mount made by root with
// allow_other, as on a shared desktop machine: its files must be its own.
const USER = 'setpriv --reuid=65534 --regid=65534 --clear-groups';

/** A scratch directory the user can write. */
function userDir(prefix: string): string {
  const d = tmpDir(prefix);
  fs.chmodSync(d, 0o777);
  return d;
}

/** soffice --convert-to with a fresh profile each time (a new user's first run). */
async function convert(to: string, outdir: string, file: string) {
  const home = userDir('lo-home');
  try {
    return await shStatus(`cd ${outdir} && ${USER} env HOME=${home} timeout 180 soffice --headless --norestore -env:UserInstallation=file://${home}/profile --convert-to ${to} --outdir ${outdir} ${file}`);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}

/** Names the mount shows, besides the ones expected: LibreOffice's lock and temp files must not stay. */
const leftovers = (dir: string) => fs.readdirSync(dir).filter((n) => n.startsWith('.~lock') || /^lu.*\.tmp$/.test(n) || n.startsWith('.fuse_hidden'));

t.test('LibreOffice: convert into the mount 8 times over the same name, read back, edit and save in place', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const mount = await startMount(t, s, { options: ['cache_ttl=2', 'allow_other'] });
  const second = await startMount(t, s, { options: ['cache_ttl=2', 'allow_other'] });
  // the user's own folder in the bucket
  fs.mkdirSync(`${mount.mnt}/docs`);
  fs.chownSync(`${mount.mnt}/docs`, 65534, 65534);
  const m = { mnt: `${mount.mnt}/docs`, status: mount.status };
  const other = { mnt: `${second.mnt}/docs` };
  const local = userDir('lo-local');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  fs.writeFileSync(`${local}/doc.txt`, 'Hello from svcfs\nSecond line\n', { mode: 0o666 });

  const failures: string[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await convert('odt', m.mnt, `${local}/doc.txt`);
    if (r.code !== 0 || /Error/.test(r.stderr + r.stdout)) failures.push(`run ${i + 1}: ${r.stderr}${r.stdout}`);
    fs.readdirSync(other.mnt); // the second mount looks, as a second user would
  }
  t.same(failures, [], 'every conversion saved over the existing doc.odt without an error');
  t.same(fs.readdirSync(m.mnt).sort(), ['doc.odt'], 'one file, no lock or temp file left behind');
  t.equal((await sh(`stat -c %u:%g ${m.mnt}/doc.odt`)).trim(), '65534:65534', 'the document belongs to the user who saved it');
  const odt = await c.getBuffer('test', 'docs/doc.odt');
  t.equal(odt.subarray(0, 2).toString(), 'PK', 'the bucket holds the document (a zip)');
  t.ok(odt.includes('content.xml'), 'with its content part');

  const back = await convert('txt:Text', local, `${other.mnt}/doc.odt`);
  t.equal(back.code, 0, 'converted out of the second mount');
  t.match(fs.readFileSync(`${local}/doc.txt`, 'utf8'), /Hello from svcfs\s+Second line/, 'the text survived the round trip');

  const edit = await shStatus(`cd ${local} && ${USER} env HOME=${local} /usr/bin/python3 ${LO_EDIT} ${m.mnt}/doc.odt "Edited through svcfs"`);
  t.equal(edit.code, 0, `opened, edited and saved in place over UNO ${edit.stderr}`);
  t.same(fs.readdirSync(m.mnt).sort(), ['doc.odt'], 'still one file after the save, no lock or temp file');
  t.same(leftovers(other.mnt), [], 'the second mount sees no leftovers either');
  const again = await convert('txt:Text', local, `${other.mnt}/doc.odt`);
  t.equal(again.code, 0);
  t.match(fs.readFileSync(`${local}/doc.txt`, 'utf8'), /Second line\s+Edited through svcfs/, 'the edit is in the saved document, seen from the second mount');
  const st = await m.status();
  t.equal(st.conflicts, 0, 'no conflict copies');
});

t.test('gio copy, move and trash', async (t) => {
  const s = await startServer(t);
  const c = s.client();
  const m = await startMount(t, s);
  const M = m.mnt;
  const local = tmpDir('gio-local');
  t.teardown(() => fs.rmSync(local, { recursive: true, force: true }));
  fs.writeFileSync(`${local}/a.txt`, 'gio data\n');
  await sh(`gio copy ${local}/a.txt ${M}/a.txt`);
  t.equal((await c.getBuffer('test', 'a.txt')).toString(), 'gio data\n', 'gio copy into the mount');
  await sh(`gio move ${M}/a.txt ${M}/b.txt`);
  t.equal(await c.head('test', 'a.txt'), undefined, 'gio move within the mount: the old name is gone');
  t.equal((await c.getBuffer('test', 'b.txt')).toString(), 'gio data\n', 'and the new name holds the data');
  await sh(`mkdir ${M}/dir && gio copy ${M}/b.txt ${M}/dir/c.txt && gio move ${M}/dir ${M}/dir2`);
  t.equal((await c.getBuffer('test', 'dir2/c.txt')).toString(), 'gio data\n', 'gio copy inside the mount, gio move of a directory');
  await sh(`gio move ${M}/dir2/c.txt ${local}/c.txt`);
  t.equal(fs.readFileSync(`${local}/c.txt`, 'utf8'), 'gio data\n', 'gio move out of the mount');
  t.equal(await c.head('test', 'dir2/c.txt'), undefined, 'removed from the bucket');
  const r = await shStatus(`gio trash ${M}/b.txt`);
  t.equal(r.code, 0, `gio trash ${r.stderr}`);
  t.notOk(fs.existsSync(`${M}/b.txt`), 'trashed file left its place');
  t.equal(fs.readFileSync(`${M}/.Trash-0/files/b.txt`, 'utf8'), 'gio data\n', 'and is in the mount\'s own trash directory');
  t.match(fs.readFileSync(`${M}/.Trash-0/info/b.txt.trashinfo`, 'utf8'), /Path=.*b\.txt/, 'with its trash info');
  t.equal((await c.getBuffer('test', '.Trash-0/files/b.txt')).toString(), 'gio data\n', 'the trash lives in the bucket');
});
