// The logger. Secrets never reach it: request bodies are never logged, and these paths are
// redacted wherever an object carrying them is logged by mistake. A process that `serve` supervises
// (cli/supervisor.ts) names itself in every line (pid): the service's lines come from several.
import pino, { type Logger } from 'pino';
import { SUPERVISED_ENV } from './cli/supervisor.ts';

export const REDACT_PATHS = [
  'api_key', '*.api_key', 'apiKey', '*.apiKey', 'password', '*.password', 'pass', '*.pass', 'auth.pass',
  '*.auth.pass', 'secret', '*.secret', 'postback_secret', '*.postback_secret', 'privateKey', '*.privateKey',
  'dkim_private_key', '*.dkim_private_key', 'req.headers.authorization',
];

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: process.env[SUPERVISED_ENV] === '1' ? { service: 'posthorn', pid: process.pid } : { service: 'posthorn' } });
}
