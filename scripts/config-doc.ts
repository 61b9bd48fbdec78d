// Prints docs/configuration.md from the option table in src/config.ts (the one source of truth):
//   node --import tsx scripts/config-doc.ts > docs/configuration.md
import { OPTIONS } from '../src/config.ts';

function typeOf(o: (typeof OPTIONS)[number]): string {
  if (o.kind === 'port') return 'port (0-65535)';
  if (o.kind === 'int') return o.min !== undefined && o.min > 0 ? `int (>= ${o.min})` : 'int';
  return o.kind;
}

const rows = OPTIONS.map((o) => `| \`--${o.flag}\` | ${o.env ? `\`${o.env}\`` : ''} | ${typeOf(o)} | ${o.doc.replace(/\|/g, '\\|')} |`);
process.stdout.write(`# Configuration

Every option of \`posthorn serve\` (and of the other commands, which open the same database) can be
given as a flag or as an environment variable; a flag wins over the variable. The configuration is
parsed once at start and frozen (src/config.ts). List options repeat (\`--transport-map a=h:p
--transport-map b=h:p\`) or take a comma-separated list in the environment variable. Boolean flags
may stand alone (\`--require-tls\`) or take true/false.

This file is generated: \`node --import tsx scripts/config-doc.ts > docs/configuration.md\`.

| Flag | Environment | Type | Meaning |
|---|---|---|---|
${rows.join('\n')}

## Validation

Every value is checked when it is parsed, for every command (\`posthorn migrate\` refuses a bad
\`--retry-schedule\` exactly as \`posthorn serve\` does), before anything is opened or started. A
mistake is one line on stderr that names the option (and the variable, when the value came from
one) and exit code 2:

\`\`\`
$ posthorn migrate --retry-schedule 1m,soon
posthorn: --retry-schedule must be durations (a number with ms, s, m, h or d) separated by commas, like "1m,5m,1h", got "1m,soon"
$ PORT=99999 posthorn serve
posthorn: --port (PORT) must be a port between 0 and 65535, got 99999
\`\`\`

- Whole numbers only where an int is expected; ports are 0-65535 (0: any free port); timeouts,
  intervals, limits and sizes are at least 1 (\`--workers 0\` is allowed: no delivery in this process).
- Durations (\`--retry-schedule\`, \`--webhook-retry-schedule\`): numbers with \`ms\`, \`s\`, \`m\`, \`h\`
  or \`d\` (a bare number is milliseconds), separated by commas, each above zero.
- \`--role\`: \`all\`, \`api\` or \`worker\`. \`--log-level\`: \`fatal\`, \`error\`, \`warn\`, \`info\`,
  \`debug\`, \`trace\` or \`silent\`.
- \`--public-url\`: an \`http://\` or \`https://\` URL. \`--relay\`: \`smtp://\` or \`smtps://\` with a host.
  \`--dns-server\`: an IP address with an optional port (\`127.0.0.1:53\`, \`[::1]:53\`).
- \`DATABASE_URL\` (\`--database-url\`) takes three forms only: \`postgres://...\`, \`postgresql://...\`,
  and \`sqlite:\` with an absolute path (\`sqlite:///var/lib/posthorn/posthorn.db\`, or
  \`sqlite::memory:\`). Anything else (\`mysql://...\`, \`postgres:/typo\`, \`sqlite://relative.db\`, a
  bare file name) is refused, so a typo never becomes a SQLite file named after the URL. Without
  it, the SQLite database is \`<--data>/posthorn.db\`. Passwords in URLs are shown as \`***\`.
- An unknown option is refused (\`unknown option --prot\`), and so is an option that takes a value
  given none (\`--data\` as the last word, or followed by another option: \`--data needs a value\`),
  which would otherwise be read as the word \`true\`.
- A command's own words and flags are checked the same way, before it opens or creates a database
  ([the command line](cli.md)): \`posthorn account create\` without \`--name\` creates nothing.

## When posthorn cannot start

A failure to start is one line, \`posthorn: <what went wrong and how to fix it>\`, and exit code 1:

| Cause | What it says |
|---|---|
| a port in use | \`127.0.0.1:8080 is already in use (--port): stop what listens there or choose another --port\` (or \`--bounce-port\`, \`--submission-port\`, ...) |
| a port below 1024 without privileges | \`not allowed to listen on 0.0.0.0:25 (--bounce-port): ports below 1024 need privileges; choose a port above 1023\` |
| a file that cannot be read | \`cannot read the --tls-cert file /etc/posthorn/cert.pem: no such file; fix --tls-cert\` |
| PostgreSQL unreachable | \`cannot reach PostgreSQL at postgres://posthorn:***@db:5432/posthorn (connect ECONNREFUSED ...): start PostgreSQL or fix DATABASE_URL\` |
| PostgreSQL refuses the login, or the database does not exist | \`PostgreSQL refused the credentials of ...\`, \`the database of ... does not exist: create it (createdb) or fix DATABASE_URL\` |
| a SQLite file that cannot be opened | \`cannot open the SQLite database (SQLITE_CANTOPEN: ...): check --data or DATABASE_URL and the directory's permissions\` |

The stack trace follows only with \`--log-level debug\` (or \`trace\`).

## Commands that only read

\`posthorn help\`, \`posthorn help <command>\` (or \`<command> --help\`, \`-h\`), \`posthorn --version\`
(\`-V\`) and \`posthorn account list\` never create a database or a key file: listing accounts of an
installation that has no database prints \`(no accounts)\` (\`[]\` with \`--json\`).
`);
