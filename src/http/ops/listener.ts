// The operations service: the last background service of a worker process (background.ts). It
// marks the role's loops as running for /readyz once every service before it has started, and
// marks them stopping first at shutdown (observability/readiness.ts). In a worker-only process
// (--role worker), which has no API listener, it also serves /healthz, /readyz and /metrics on a
// small listener of its own (--ops-port, --ops-host).
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { BackgroundService, Services } from '../../services.ts';
import { httpLimitsFrom, limitHttpServer } from '../../listener-limits.ts';
import { setLoopState } from '../../observability/readiness.ts';
import { addOperationsRoutes } from './plugin.ts';

export class OperationsService implements BackgroundService {
  readonly name = 'operations';
  private server: FastifyInstance | null = null;
  /** the listener's base URL, when this process has one */
  url: string | null = null;

  constructor(private readonly services: Services) {
    setLoopState(services, 'starting');
  }

  async start(): Promise<void> {
    const { config } = this.services;
    if (config.role === 'worker') {
      const server = Fastify({ loggerInstance: this.services.log, logController: new LogController({ disableRequestLogging: true }) }) as unknown as FastifyInstance;
      limitHttpServer(server.server, httpLimitsFrom(config));
      addOperationsRoutes(server, this.services);
      await server.listen({ port: config.opsPort, host: config.opsHost });
      const address = server.server.address();
      const port = typeof address === 'object' && address ? address.port : config.opsPort;
      this.url = `http://${config.opsHost.includes(':') ? `[${config.opsHost}]` : config.opsHost}:${port}`;
      this.server = server;
      this.services.log.info({ url: this.url }, 'operations listener is running');
    }
    setLoopState(this.services, 'running');
  }

  async stop(): Promise<void> {
    setLoopState(this.services, 'stopping');
    await this.server?.close();
    this.server = null;
  }
}

export function createOperationsService(services: Services): BackgroundService {
  return new OperationsService(services);
}
