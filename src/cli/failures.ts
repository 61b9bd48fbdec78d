// Start-up failures as one line that says what went wrong and how to fix it
// (docs/configuration.md, "When posthorn cannot start"): a port in use, a file that cannot be read,
// a database that cannot be reached. Anything else is its own message; the stack only at
// --log-level debug or trace.
import { redactUrl, type Config } from '../config.ts';
import { isPostgresUrl, sqliteFileFrom } from '../domain/database-url.ts';

/** Which option a listening port came from. */
function portOption(config: Readonly<Config> | null, port: number | undefined): string {
  if (!config || port === undefined) return 'the port option';
  if (port === config.port) return '--port';
  if (port === config.bouncePort) return '--bounce-port';
  if (port === config.submissionPort) return '--submission-port';
  if (port === config.submissionTlsPort) return '--submission-tls-port';
  return 'the port option';
}

/** Which option named a file. */
function fileOption(config: Readonly<Config> | null, file: string | undefined): string | null {
  if (!config || !file) return null;
  const options: Array<[string, string | null]> = [
    ['--tls-cert', config.tlsCert],
    ['--tls-key', config.tlsKey],
    ['--submission-tls-cert', config.submissionTlsCert],
    ['--submission-tls-key', config.submissionTlsKey],
    ['--mailbox-ca-file', config.mailboxCaFile],
  ];
  for (const [option, value] of options) if (value !== null && (value === file || file.endsWith(value.replace(/^\.\//, '')))) return option;
  if (file.startsWith(config.data)) return '--data';
  return null;
}

const FILE_PROBLEMS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  EROFS: 'the file system is read-only',
};

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

interface ErrorLike {
  code?: string;
  errno?: number;
  syscall?: string;
  path?: string;
  address?: string;
  port?: number;
  message?: string;
  errors?: unknown[];
}

/** The error with a code: itself, its cause, or the first of an AggregateError (refused on every address). */
function primary(error: unknown): ErrorLike {
  let e = (error ?? {}) as ErrorLike & { cause?: unknown };
  for (let depth = 0; depth < 5 && !e.code; depth++) {
    if (Array.isArray(e.errors) && e.errors.length > 0) e = e.errors[0] as ErrorLike;
    else if (e.cause && typeof e.cause === 'object') e = e.cause as ErrorLike;
    else break;
  }
  return e;
}

function isPostgres(config: Readonly<Config> | null): boolean {
  return isPostgresUrl(config?.databaseUrl);
}

/** One line, without the "posthorn: " prefix, for an error that stopped a command. */
export function describeFailure(error: unknown, config: Readonly<Config> | null): string {
  const e = primary(error);
  const code = e.code ?? '';
  if (e.syscall === 'listen' || code === 'EADDRINUSE') {
    const where = `${e.address ?? config?.host ?? ''}:${e.port ?? ''}`;
    const option = portOption(config, e.port);
    if (code === 'EADDRINUSE') return `${where} is already in use (${option}): stop what listens there or choose another ${option}`;
    if (code === 'EACCES') return `not allowed to listen on ${where} (${option}): ports below 1024 need privileges; choose a port above 1023`;
    if (code === 'EADDRNOTAVAIL') return `${e.address} is not an address of this machine: fix --host (or the listener's --*-host)`;
  }
  if (isPostgres(config) && (NETWORK_CODES.has(code) || /^(28|3D|08|57P)/.test(code))) {
    const url = redactUrl(config!.databaseUrl!);
    if (code === '28P01' || code === '28000') return `PostgreSQL refused the credentials of ${url}: fix the user or password in DATABASE_URL`;
    if (code === '3D000') return `the database of ${url} does not exist: create it (createdb) or fix DATABASE_URL`;
    return `cannot reach PostgreSQL at ${url} (${code}${e.message && !e.message.includes(code) ? `: ${e.message}` : ''}): start PostgreSQL or fix DATABASE_URL`;
  }
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0];
  if (isPostgres(config) && /cannot connect to PostgreSQL/i.test(message)) {
    const reason = message.replace(/^.*cannot connect to PostgreSQL:?\s*/i, '');
    return `cannot reach PostgreSQL at ${redactUrl(config!.databaseUrl!)}${reason ? ` (${reason})` : ''}: start PostgreSQL or fix DATABASE_URL`;
  }
  if (code.startsWith('SQLITE_CORRUPT') || (code === 'SQLITE_NOTADB' && config)) {
    // A file cut short (a full disk while copied, a copy of a running database without its WAL,
    // a failing disk) or not a database at all: nothing to fix by option or permission.
    const file = config ? sqliteFileFrom(config.databaseUrl, config.data) : 'the SQLite database';
    return `the SQLite database ${file} is damaged (${code}: ${e.message}): stop the service and restore the file from a backup (docs/operations.md, "Backups"), or fix --data or DATABASE_URL if it names the wrong file`;
  }
  if (code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY' || code === 'SQLITE_NOTADB') {
    return `cannot open the SQLite database (${code}: ${e.message}): check --data or DATABASE_URL and the directory's permissions`;
  }
  if (e.path && FILE_PROBLEMS[code]) {
    const option = fileOption(config, e.path);
    if (option === '--data') return `cannot use ${e.path} (--data, the data directory): ${FILE_PROBLEMS[code]}; fix --data or its permissions`;
    return `cannot read ${option ? `the ${option} file ` : ''}${e.path}: ${FILE_PROBLEMS[code]}${option ? `; fix ${option}` : ''}`;
  }
  return message || 'failed';
}

/** Whether the stack belongs on stderr too. */
export function wantsStack(config: Readonly<Config> | null, env: NodeJS.ProcessEnv = process.env): boolean {
  const level = config?.logLevel ?? env.LOG_LEVEL ?? '';
  return level === 'debug' || level === 'trace';
}
