// The accepted content of a message (messages.payload, JSON): everything delivery needs to compose
// the MIME for any recipient, resolved once at acceptance. Templates and layouts are already merged
// in; only {{variables}} remain, rendered per recipient at composition (domain/variables.ts).
// This is the contract between operations/send-message.ts and operations/submit-message.ts
// (writers) and delivery/ (reader).
//
// Versions: 1 is composed content (send_message). 2 adds `raw`: a message submitted over SMTP
// (docs/smtp-submission.md), delivered as those bytes, not recomposed (with tracking, each copy's
// text/html parts rewritten: domain/rewrite-html-parts.ts); its from/subject are the
// decoded header values for reports, and text/html/headers/attachments stay empty (the message
// views read them from raw: domain/mime-content.ts). A version 1 row reads as before (no raw).
import type { TemplateSyntax, VariableValue } from './variables.ts';

export interface PayloadAttachment {
  filename: string;
  /** with parameters, as given ("text/plain; charset=utf-8") */
  contentType: string;
  /** base64, whitespace removed */
  content: string;
}

export const PAYLOAD_VERSION = 2;

export interface MessagePayload {
  v: 1 | 2;
  /** the Message-ID header value with its brackets, fixed at acceptance so resends de-duplicate */
  messageId: string;
  /** From header value (may contain {{variables}}) */
  from: string | null;
  /** Subject (may contain {{variables}}) */
  subject: string | null;
  /** text/plain part (may contain {{variables}}) */
  text: string | null;
  /** text/html part (may contain {{variables}}), CSS already applied or inlined as a <style> */
  html: string | null;
  /**
   * Other headers, exact names as they go on the wire (Reply-To, Cc, X-Custom...). Values are
   * already checked for line breaks. From and Subject are not here.
   */
  headers: Record<string, string>;
  /** global variables (JSON values, domain/variable-values.ts); a recipient's own override them */
  variables: Record<string, VariableValue>;
  attachments: PayloadAttachment[];
  /** when set, every copy goes to this address instead of the recorded recipient */
  recipientOverride: string | null;
  /**
   * per-message tracking opt-in (null: the project's setting decides); a submitted message's
   * X-Posthorn-Tracking header (docs/smtp-submission.md)
   */
  tracking?: boolean | null;
  /**
   * v2, SMTP submission: the whole message (base64) as it goes to every recipient, Bcc removed
   * and Message-ID/Date added at acceptance. Absent for composed messages.
   */
  raw?: string;
  /**
   * The template language the parts are rendered with (docs/templates.md): 'handlebars' for
   * messages accepted since it exists; absent on older rows, which keep the plain {{name}}
   * substitution they were accepted under.
   */
  syntax?: TemplateSyntax;
  /**
   * send_at (ms), when the message was scheduled: the Date header and the retry deadline count
   * from it instead of from acceptance (docs/api/send-message.md).
   */
  sendAt?: number;
}

/** Where a copy to `recipient` really goes: recipient_override replaces every recipient (docs/api/send-message.md). */
export function deliveredAddressOf(payload: Pick<MessagePayload, 'recipientOverride'>, recipient: string): string {
  return payload.recipientOverride ?? recipient;
}

/**
 * The send_at of a message scheduled for later than its acceptance (`createdAt`), or null: a
 * send_at in the past was accepted as now (docs/api/send-message.md, "Scheduled sends").
 */
export function scheduledSendAt(payload: Pick<MessagePayload, 'sendAt'>, createdAt: number): number | null {
  return payload.sendAt !== undefined && payload.sendAt > createdAt ? payload.sendAt : null;
}

export function parsePayload(json: string): MessagePayload {
  const payload = JSON.parse(json) as MessagePayload;
  // A row written by a newer release than this one: refuse rather than send something partial.
  if (!(payload.v >= 1 && payload.v <= PAYLOAD_VERSION)) throw new Error(`message payload version ${String(payload.v)} is not known to this release`);
  return payload;
}
