// Prints docs/configuration.md from the option table in src/config.ts (the one source of truth):
//   node --import tsx scripts/config-doc.ts > docs/configuration.md
import { OPTIONS } from '../src/config.ts';

const rows = OPTIONS.map((o) => `| \`--${o.flag}\` | ${o.env ? `\`${o.env}\`` : ''} | ${o.kind} | ${o.doc.replace(/\|/g, '\\|')} |`);
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
`);
