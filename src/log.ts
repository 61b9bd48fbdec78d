// The logger. Secrets never reach it: request bodies are never logged, and these paths are
// redacted wherever an object carrying them is logged by mistake.
import pino, { type Logger } from 'pino';

export const REDACT_PATHS = [
  'api_key', '*.api_key', 'apiKey', '*.apiKey', 'password', '*.password', 'pass', '*.pass', 'auth.pass',
  '*.auth.pass', 'secret', '*.secret', 'postback_secret', '*.postback_secret', 'privateKey', '*.privateKey',
  'dkim_private_key', '*.dkim_private_key', 'req.headers.authorization',
];

/** `pid`: name the process in every line (the children of `serve`, whose lines come from several). */
export function createLogger(level: string, opts: { pid?: boolean } = {}): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: opts.pid ? { service: 'posthorn', pid: process.pid } : { service: 'posthorn' } });
}
