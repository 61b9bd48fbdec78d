// The request id of the HTTP request being served, for every log line written while serving it
// (docs/operations.md, "Logs"). The HTTP edge runs each request inside run(); the logger's mixin
// (log.ts) adds `reqId` to any line written in that async context, whichever logger wrote it:
// request.log, or services.log deep inside an operation.
import { AsyncLocalStorage } from 'node:async_hooks';

interface RequestContext {
  reqId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

export function runWithRequestId<T>(reqId: string, fn: () => T): T {
  return storage.run({ reqId }, fn);
}

/**
 * pino mixin: the fields every line written inside a request carries. A request's own logger
 * (Fastify's request.log) already binds reqId; the field is added only where it is missing, so no
 * line carries it twice.
 */
export function requestLogFields(_merge: object, _level: number, logger?: unknown): Record<string, string> {
  const context = storage.getStore();
  if (!context) return {};
  const bindings = (logger as { bindings?: () => Record<string, unknown> } | undefined)?.bindings?.();
  if (bindings?.reqId !== undefined) return {};
  return { reqId: context.reqId };
}
