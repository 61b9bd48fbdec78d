// The sandbox adapter: stands in for the SMTP step for a message accepted in sandbox mode (its
// project's `sandbox` setting when it was accepted, messages.sandbox; docs/sandbox.md). Nothing leaves the machine: no DNS, no connection. Everything else of a
// delivery happens as for a real send (suppression check, composition, the attempt row, the state,
// bounces, events, webhooks), because the adapter answers with the same SmtpExchange the SMTP
// client reduces a session to, classified by the same policy (domain/classify-smtp-reply.ts).
//
// Simulator addresses (at SIMULATOR_DOMAIN; `local+tag@` works the same, so tests and demos can use
// as many distinct addresses as they need, since a hard bounce suppresses its address):
//   bounce@        550 5.1.1 on RCPT: failed, a hard bounce (the address is suppressed)
//   soft-bounce@   452 4.2.2 (mailbox full) on the first attempt: deferred as a soft bounce, then
//                  delivered on the retry
//   complaint@     delivered, then the recipient reports it as spam: a `spammed` event
//   delay@         421 4.4.7 at the greeting on the first two attempts (deferred, no bounce), then
//                  delivered on the third
// Every other address, at any domain, is delivered (250).

import type { SmtpExchange } from '../domain/classify-smtp-reply.ts';

export const SIMULATOR_DOMAIN = 'simulator.posthorn.test';
/** The host name attempts record for a sandbox delivery. */
export const SANDBOX_HOST = 'sandbox';

export type SimulatorBehaviour = 'deliver' | 'bounce' | 'soft-bounce' | 'complaint' | 'delay';

export interface SandboxReply extends SmtpExchange {
  host: string;
  /** the recipient complains after delivery (a `spammed` event goes with the outcome) */
  complaint: boolean;
}

/** What a simulator address does; 'deliver' for every other address. */
export function simulatorBehaviour(address: string): SimulatorBehaviour {
  const at = address.lastIndexOf('@');
  if (at <= 0 || address.slice(at + 1).toLowerCase() !== SIMULATOR_DOMAIN) return 'deliver';
  const local = address.slice(0, at).toLowerCase().replace(/\+.*$/, '');
  switch (local) {
    case 'bounce':
    case 'soft-bounce':
    case 'complaint':
    case 'delay':
      return local;
    default:
      return 'deliver';
  }
}

const ACCEPTED = '2.0.0 Ok: accepted by the sandbox; nothing was sent';

/**
 * The reply the sandbox gives to one delivery attempt of `address` (the envelope recipient, after
 * recipient_override), `attemptsBefore` being the attempts the transmission already had.
 */
export function sandboxReply(address: string, attemptsBefore: number): SandboxReply {
  const reply = (code: number, text: string, stage: SmtpExchange['stage'], complaint = false): SandboxReply => ({ code, text, stage, host: SANDBOX_HOST, complaint });
  switch (simulatorBehaviour(address)) {
    case 'bounce':
      return reply(550, `5.1.1 <${address}>: Recipient address rejected: user unknown (sandbox simulator)`, 'rcpt');
    case 'soft-bounce':
      return attemptsBefore === 0 ? reply(452, `4.2.2 <${address}>: mailbox full (sandbox simulator)`, 'rcpt') : reply(250, ACCEPTED, 'message');
    case 'delay':
      return attemptsBefore < 2 ? reply(421, '4.4.7 Service busy, try again later (sandbox simulator)', 'greeting') : reply(250, ACCEPTED, 'message');
    case 'complaint':
      return reply(250, ACCEPTED, 'message', true);
    default:
      return reply(250, ACCEPTED, 'message');
  }
}
