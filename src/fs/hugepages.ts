// Transparent huge pages for a mount's memory. On the VMs we measured, each
// page fault costs ~12 us, and a fresh mount process's first cold read of
// 256 MiB faulted ~25,000 times (socket read buffers, read-ahead chunks): 1.79 s
// against 1.01 s with glibc's malloc asked to madvise its memory as huge pages
// (2 MiB, one fault each). The dynamic loader reads GLIBC_TUNABLES when a
// process starts, so `svcfs mount` sets it for the mount process it starts; a
// user's own setting of the tunable wins. glibc before 2.35, other C libraries
// and THP "never" ignore it.

const TUNABLE = 'glibc.malloc.hugetlb';
const setting = new RegExp(`(^|:)${TUNABLE.replace(/\./g, '\\.')}=(\\d+)`);

/** The environment for a mount process: env with the huge-page tunable added unless it is set. */
export function withHugePages(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const t = env.GLIBC_TUNABLES ?? '';
  if (setting.test(t)) return env;
  return { ...env, GLIBC_TUNABLES: t ? `${t}:${TUNABLE}=1` : `${TUNABLE}=1` };
}

/** Whether this process started with malloc's huge pages on. */
export function hugePagesOn(env: NodeJS.ProcessEnv = process.env): boolean {
  const m = setting.exec(env.GLIBC_TUNABLES ?? '');
  return !!m && m[2] !== '0';
}
