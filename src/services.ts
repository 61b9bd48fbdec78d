// The whole composition, described once: what the composition root (src/app.ts, openServices)
// builds and hands to every operation, edge and worker. A leaf: it imports types only, so any
// layer may name it without pulling in another (docs/architecture.md, "Boundaries").
//
// Operations reach adapters only through the ports below, never by importing an adapter module:
// the composition root plugs in the real ones (src/webhooks/url-policy.ts, src/delivery/dkim.ts).
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Clock } from './domain/clock.ts';
import type { SecretBox } from './domain/secret-box.ts';
import type { Store } from './storage/store.ts';

export interface Services {
  readonly store: Store;
  readonly config: Readonly<Config>;
  readonly clock: Clock;
  readonly secrets: SecretBox;
  readonly log: Logger;
  readonly ports: Ports;
}

/** Syntax of an outbound URL: the normalised URL, or why it is refused. */
export type OutboundUrlParse = { ok: true; url: URL } | { ok: false; reason: string };
/** Where a host may be reached: the first checked address, or why it is refused. */
export type OutboundAddressCheck = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

/**
 * The address policy for everything Posthorn connects out to on a user's behalf (webhook endpoints,
 * mailbox postbacks, mailbox IMAP hosts): public addresses only, unless the operator sets
 * --allow-private-addresses (formerly --allow-private-webhooks). Uses the deployment's --dns-server.
 */
export interface OutboundAddressPolicy {
  /** scheme (http, https), no credentials, bounded length */
  parseUrl(raw: string): OutboundUrlParse;
  /** resolves the host (a name or an IP literal, IPv6 with or without brackets) and checks every address */
  checkHost(host: string): Promise<OutboundAddressCheck>;
}

/** What operations may ask of adapters. */
export interface Ports {
  readonly outboundAddresses: OutboundAddressPolicy;
  /** forgets this process's cached DKIM keys of an account, after its domains changed */
  forgetDkimKeys(accountId: number): void;
}

/** A long-running part of a process (a job, a listener): started with the process, stopped with it. */
export interface BackgroundService {
  readonly name: string;
  start(): Promise<void>;
  /** Stops taking work, lets work in flight finish (bounded), releases resources. */
  stop(): Promise<void>;
}

/** What the jobs of one process share: the registry id every claim of this process is locked_by. */
export interface WorkerProcessContext {
  readonly workerId: string;
  /** this process's standing in the registry (workers/process-registry.ts): the lease runner's fence */
  readonly liveness?: ProcessLiveness;
}

/**
 * Whether other processes may have presumed this one dead and released its claims
 * (docs/reliability.md, "When a process is dead"): asked before an irreversible step.
 */
export interface ProcessLiveness {
  /** true while no other process can have presumed this one dead (a heartbeat recorded recently) */
  fresh(): boolean;
  /** records a heartbeat now; false when this process had been presumed dead meanwhile */
  confirm(): Promise<boolean>;
  /**
   * How many times this process has found itself presumed dead so far: a claim made before the
   * count last changed may have been released since, and is confirmed before it is trusted.
   */
  lives(): number;
}

/** Each feature contributes one (src/background.ts lists them); null where it is not configured. */
export type BackgroundFactory = (services: Services, process?: WorkerProcessContext) => BackgroundService | null;
