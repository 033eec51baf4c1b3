// The server's identities: access key, secret and per-bucket permissions, in a
// JSON file readable by its owner only.
import { randomBytes, randomInt } from 'node:crypto';
import * as fs from 'node:fs';

export interface User {
  name: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** buckets this user may read; '*' for all */
  read: string[];
  /** buckets this user may write; '*' for all */
  write: string[];
}

const AK_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

export function generateUser(name = 'admin'): User {
  let ak = 'SVC';
  while (ak.length < 20) ak += AK_CHARS[randomInt(AK_CHARS.length)];
  return { name, accessKeyId: ak, secretAccessKey: randomBytes(32).toString('hex'), read: ['*'], write: ['*'] };
}

export function validAccessKeyId(s: string): boolean {
  return /^[A-Za-z0-9]{20}$/.test(s);
}

export function validSecret(s: string): boolean {
  return /^[0-9a-fA-F]{64}$/.test(s);
}

export class Users {
  private byKey = new Map<string, User>();

  constructor(users: User[] = []) {
    for (const u of users) this.add(u);
  }

  add(u: User): void {
    if (!validAccessKeyId(u.accessKeyId)) throw new Error(`user ${u.name}: access key ID must be 20 letters or digits`);
    if (!validSecret(u.secretAccessKey)) throw new Error(`user ${u.name}: secret access key must be 64 hex characters`);
    this.byKey.set(u.accessKeyId, u);
  }

  get(accessKeyId: string): User | undefined {
    return this.byKey.get(accessKeyId);
  }

  all(): User[] {
    return [...this.byKey.values()];
  }

  static canRead(u: User, bucket: string): boolean {
    return u.read.includes('*') || u.read.includes(bucket) || Users.canWrite(u, bucket);
  }

  static canWrite(u: User, bucket: string): boolean {
    return u.write.includes('*') || u.write.includes(bucket);
  }

  /** Load a users file; refuses one that others can read. */
  static load(file: string): Users {
    const st = fs.statSync(file);
    if (st.mode & 0o077) throw new Error(`${file} is readable by others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
    const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as { users?: User[] };
    if (!Array.isArray(doc.users)) throw new Error(`${file}: expected {"users": [...]}`);
    return new Users(doc.users.map((u) => ({ ...u, read: u.read ?? ['*'], write: u.write ?? [] })));
  }

  save(file: string): void {
    const tmp = `${file}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify({ users: this.all() }, null, 2) + '\n', { mode: 0o600 });
    fs.renameSync(tmp, file);
  }
}
