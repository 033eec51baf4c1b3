// Administration of a server's data directory: its users (users.json) and
// buckets (buckets.json). Every change is written to a temporary file and
// renamed over the old one, so a running server (which reloads both files
// when they change) never reads half a file. Removing a bucket that holds
// objects or unfinished uploads is refused, as S3 refuses it.
import Database from 'better-sqlite3';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { validBucketName } from './server';
import { generateUser, User, Users } from './users';

export class AdminError extends Error {}

export const usersFile = (data: string) => path.join(data, 'users.json');
export const bucketsFile = (data: string) => path.join(data, 'buckets.json');

function writeAtomic(file: string, doc: unknown): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(doc, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

function dataDir(data: string): string {
  if (!fs.existsSync(data)) throw new AdminError(`data directory ${data} does not exist (svcfs serve --data ${data} creates it)`);
  return data;
}

// ---- buckets ----

export function loadBuckets(data: string): string[] {
  const f = bucketsFile(data);
  if (!fs.existsSync(f)) return [];
  const doc = JSON.parse(fs.readFileSync(f, 'utf8')) as { buckets?: unknown };
  if (!Array.isArray(doc.buckets) || !doc.buckets.every((b) => typeof b === 'string')) throw new AdminError(`${f}: expected {"buckets": ["name", ...]}`);
  return doc.buckets as string[];
}

export function saveBuckets(data: string, buckets: string[]): void {
  writeAtomic(bucketsFile(data), { buckets: [...new Set(buckets)].sort() });
}

export function bucketAdd(data: string, name: string): boolean {
  if (!validBucketName(name)) throw new AdminError(`"${name}" is not a valid bucket name (3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit)`);
  const all = loadBuckets(dataDir(data));
  if (all.includes(name)) return false;
  saveBuckets(data, [...all, name]);
  return true;
}

/** What a bucket still holds, read from the index without disturbing a running server (WAL readers do not block). */
function contents(data: string, name: string): { objects: number; uploads: number } {
  const f = path.join(data, 'index.sqlite3');
  if (!fs.existsSync(f)) return { objects: 0, uploads: 0 };
  const db = new Database(f, { readonly: true, fileMustExist: true });
  try {
    const objects = (db.prepare('SELECT COUNT(*) AS n FROM objects WHERE bucket = ?').get(name) as { n: number }).n;
    const uploads = (db.prepare('SELECT COUNT(*) AS n FROM uploads WHERE bucket = ?').get(name) as { n: number }).n;
    return { objects, uploads };
  } finally {
    db.close();
  }
}

export function bucketRemove(data: string, name: string): void {
  const all = loadBuckets(dataDir(data));
  if (!all.includes(name)) throw new AdminError(`no bucket "${name}"`);
  const c = contents(data, name);
  if (c.objects || c.uploads) throw new AdminError(`bucket "${name}" is not empty (${c.objects} objects, ${c.uploads} unfinished uploads): empty it first`);
  saveBuckets(data, all.filter((b) => b !== name));
}

// ---- users ----

function loadUsers(data: string): Users {
  const f = usersFile(dataDir(data));
  return fs.existsSync(f) ? Users.load(f) : new Users();
}

function findUser(users: Users, name: string): User {
  const u = users.all().find((x) => x.name === name);
  if (!u) throw new AdminError(`no user "${name}"`);
  return u;
}

const list = (v: string | undefined) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** A new user with fresh keys; `read`/`write` are comma-separated bucket names or '*'. */
export function userAdd(data: string, name: string, o: { read?: string; write?: string }): User {
  if (!/^[A-Za-z0-9_.@-]{1,64}$/.test(name)) throw new AdminError(`"${name}" is not a valid user name (1 to 64 of A-Z a-z 0-9 _ . @ -)`);
  const users = loadUsers(data);
  if (users.all().some((u) => u.name === name)) throw new AdminError(`user "${name}" exists (svcfs serve user rotate ${name} gives it new keys)`);
  const u = { ...generateUser(name), read: list(o.read), write: list(o.write) };
  users.add(u);
  users.save(usersFile(data));
  return u;
}

export function userList(data: string): Array<Omit<User, 'secretAccessKey'>> {
  return loadUsers(data).all().map(({ secretAccessKey: _s, ...rest }) => rest).sort((a, b) => a.name.localeCompare(b.name));
}

export function userRemove(data: string, name: string): void {
  const users = loadUsers(data);
  const u = findUser(users, name);
  new Users(users.all().filter((x) => x !== u)).save(usersFile(data));
}

/** New keys for a user (same name and permissions); the old keys stop working once the server reloads. */
export function userRotate(data: string, name: string): User {
  const users = loadUsers(data);
  const u = findUser(users, name);
  const fresh = generateUser(name);
  const next = { ...u, accessKeyId: fresh.accessKeyId, secretAccessKey: fresh.secretAccessKey };
  new Users(users.all().map((x) => (x === u ? next : x))).save(usersFile(data));
  return next;
}
