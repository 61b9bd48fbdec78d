// The bounce listener (docs/domains-and-bounces.md): an SMTP server that receives bounces addressed to our VERP return
// paths. It is an edge: it checks recipients (only verified VERP addresses on the bounce domain),
// reads the message within a size limit, and hands it to operations/bounces.ts. The 250 after DATA
// is sent only once the bounce is committed; a failure answers 451 so the sender retries (nothing
// accepted is ever lost). No AUTH, no STARTTLS: bounces arrive from any MTA, in the clear, like
// any MX of a domain without TLS configured.
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { BackgroundService, Services } from '../services.ts';
import { transmissionIdFromReturnPath, verpTagKey } from '../domain/verp.ts';
import { processBounceMail } from '../operations/bounces.ts';
import { limitSmtpServer, smtpLimitsFrom } from '../listener-limits.ts';

/** Largest bounce accepted: reports quote the original message, which may carry attachments. */
export const MAX_BOUNCE_BYTES = 10 * 1024 * 1024;
/** VERP recipients per bounce mail (one is usual; an MTA may group a few). */
const MAX_RECIPIENTS = 50;
const MAX_CLIENTS = 100;

class SmtpReply extends Error {
  constructor(
    readonly responseCode: number,
    message: string,
  ) {
    super(message);
  }
}

export class BounceListener implements BackgroundService {
  readonly name = 'bounce-listener';
  private readonly server: SMTPServer;
  private readonly tagKey: string;
  private listening = false;
  private readonly maxBytes: number;

  constructor(
    private readonly services: Services,
    private readonly port: number,
    private readonly host: string,
    opts: { maxBytes?: number } = {},
  ) {
    this.tagKey = verpTagKey(services);
    this.maxBytes = opts.maxBytes ?? MAX_BOUNCE_BYTES;
    const config = services.config;
    this.server = new SMTPServer({
      name: config.mailerHost,
      banner: 'Posthorn bounce processor',
      size: this.maxBytes,
      authOptional: true,
      disabledCommands: ['AUTH', 'STARTTLS'],
      hideSTARTTLS: true,
      logger: false,
      maxClients: MAX_CLIENTS,
      socketTimeout: 60_000,
      closeTimeout: 5_000,
      onRcptTo: (address, session, callback) => callback(this.checkRecipient(address.address, session) ?? undefined),
      onData: (stream, session, callback) => {
        this.receive(stream, session).then(
          () => callback(),
          (error: unknown) => callback(error instanceof SmtpReply ? error : this.temporaryFailure(error)),
        );
      },
    });
    // Idle, slow and crowding clients are cut (src/listener-limits.ts).
    limitSmtpServer(this.server, { ...smtpLimitsFrom(config, MAX_CLIENTS), closeTimeoutMs: 5_000 });
    this.server.on('error', (error) => services.log.warn({ err: error }, 'bounce listener connection error'));
  }

  /** The bound address (port 0 picks one): for tests and the startup log. */
  address(): { host: string; port: number } {
    const a = this.server.server.address() as AddressInfo | null;
    return { host: this.host, port: a?.port ?? this.port };
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.server.server.once('error', onError);
      this.server.listen(this.port, this.host, () => {
        this.server.server.off('error', onError);
        this.listening = true;
        this.services.log.info({ ...this.address(), bounceDomain: this.services.config.bounceDomain }, 'bounce listener started');
        resolve();
      });
    });
  }

  stop(): Promise<void> {
    if (!this.listening) return Promise.resolve();
    this.listening = false;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private checkRecipient(address: string, session: SMTPServerSession): SmtpReply | null {
    if (transmissionIdFromReturnPath(address, this.services.config.bounceDomain, this.tagKey) === null) {
      return new SmtpReply(550, '5.1.1 No such bounce address here');
    }
    if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) return new SmtpReply(452, '4.5.3 Too many recipients');
    return null;
  }

  private async receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<void> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      // Keep draining past the limit (the client must reach the end of DATA), but stop storing.
      if (bytes + chunk.length <= this.maxBytes) chunks.push(chunk);
      bytes += chunk.length;
    }
    if (stream.sizeExceeded || bytes > this.maxBytes) throw new SmtpReply(552, `5.3.4 Message exceeds the ${this.maxBytes} byte limit`);
    const transmissionIds = session.envelope.rcptTo
      .map((r) => transmissionIdFromReturnPath(r.address, this.services.config.bounceDomain, this.tagKey))
      .filter((id): id is number => id !== null);
    await processBounceMail(this.services, { transmissionIds, raw: Buffer.concat(chunks) });
  }

  private temporaryFailure(error: unknown): SmtpReply {
    this.services.log.error({ err: error }, 'bounce processing failed; the sender will retry');
    return new SmtpReply(451, '4.3.0 Temporary failure processing the bounce, try again later');
  }
}
