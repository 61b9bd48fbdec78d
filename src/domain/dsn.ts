// Delivery status notifications (RFC 3464) and what a bounce means for a transmission. Pure: the
// SMTP edge extracts the message/delivery-status part with mailparser; this file reads its fields
// and decides. Rules (docs/domains-and-bounces.md, "Bounce handling"):
//   Action: failed,  Status 5.x.x        -> the transmission failed; hard bounce (suppress)
//   Action: failed,  Status 4.x.x/none   -> the transmission failed (the MTA gave up); soft bounce
//   Action: delayed                      -> still being tried by the remote MTA; soft bounce
//   Action: delivered | relayed | expanded -> nothing to do
// Mail without a delivery-status part goes through conservative heuristics (bounceFromText).

export interface DsnRecipient {
  finalRecipient: string | null;
  originalRecipient: string | null;
  /** lower-cased: failed | delayed | delivered | relayed | expanded */
  action: string | null;
  /** the enhanced status code, like 5.1.1 */
  status: string | null;
  /** the Diagnostic-Code text without its type ("smtp; ") */
  diagnosticCode: string | null;
  remoteMta: string | null;
}

export interface DeliveryStatus {
  reportingMta: string | null;
  recipients: DsnRecipient[];
}

export interface BounceVerdict {
  /** failed: the transmission failed; delayed: the remote MTA still tries; ignore: nothing to do */
  outcome: 'failed' | 'delayed' | 'ignore';
  /** hard bounces suppress the address; soft ones count towards a warning */
  severity: 'hard' | 'soft';
  /** like SMTP_550 (from the diagnostic) or DSN_5.1.1 */
  resultCode: string;
  resultMessage: string;
  /** the recipient the report names (informational: VERP already names the transmission) */
  reportedRecipient: string | null;
  source: 'dsn' | 'heuristic';
}

const MAX_MESSAGE = 1000;

/** Reads the fields of a message/delivery-status body: one per-message group, then one per recipient. */
export function parseDeliveryStatus(text: string): DeliveryStatus {
  const groups: Array<Map<string, string>> = [];
  let current: Map<string, string> | null = null;
  let lastField: string | null = null;
  for (const line of text.replace(/\r\n?/g, '\n').split('\n')) {
    if (line.trim() === '') {
      current = null;
      lastField = null;
      continue;
    }
    if (/^[ \t]/.test(line) && current && lastField) {
      current.set(lastField, `${current.get(lastField)} ${line.trim()}`);
      continue;
    }
    const m = /^([A-Za-z0-9-]+)\s*:\s*(.*)$/.exec(line);
    if (!m) continue;
    if (!current) {
      current = new Map();
      groups.push(current);
    }
    lastField = m[1].toLowerCase();
    if (!current.has(lastField)) current.set(lastField, m[2].trim());
  }
  const [perMessage, ...perRecipient] = groups;
  return {
    reportingMta: stripType(perMessage?.get('reporting-mta')),
    recipients: perRecipient
      .filter((g) => g.has('final-recipient') || g.has('action') || g.has('status'))
      // A Status that is no RFC 3463 code (its class 2, 4 or 5) makes the group unreadable: not acted on.
      .filter((g) => !g.has('status') || VALID_STATUS.test(g.get('status')!))
      .map((g) => ({
        finalRecipient: stripType(g.get('final-recipient')),
        originalRecipient: stripType(g.get('original-recipient')),
        action: g.get('action')?.toLowerCase().split(/\s/)[0] ?? null,
        status: VALID_STATUS.exec(g.get('status') ?? '')?.[0] ?? null,
        diagnosticCode: stripType(g.get('diagnostic-code')),
        remoteMta: stripType(g.get('remote-mta')),
      })),
  };
}

/** RFC 3463: class.subject.detail, the class 2 (success), 4 (persistent transient) or 5 (permanent). */
const VALID_STATUS = /^[245]\.\d{1,3}\.\d{1,3}/;

/** "rfc822; a@b.c" -> "a@b.c" */
function stripType(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  const semi = value.indexOf(';');
  const out = (semi >= 0 ? value.slice(semi + 1) : value).trim();
  return out === '' ? null : out;
}

/** The verdict of a delivery-status report: the most severe of its recipients. */
export function classifyDeliveryStatus(report: DeliveryStatus): BounceVerdict {
  const rank = (r: DsnRecipient) => (r.action === 'failed' ? (statusClass(r) === 5 ? 3 : 2) : r.action === 'delayed' ? 1 : 0);
  const worst = [...report.recipients].sort((a, b) => rank(b) - rank(a))[0];
  if (!worst || rank(worst) === 0) return ignore(`report says ${worst?.action ?? 'nothing'}`, 'dsn');
  const smtpCode = smtpCodeOf(worst.diagnosticCode);
  const resultCode = smtpCode ? `SMTP_${smtpCode}` : worst.status ? `DSN_${worst.status}` : 'DSN_FAILED';
  const resultMessage = (worst.diagnosticCode ?? `Bounced with status ${worst.status ?? 'unknown'} (action ${worst.action})`).slice(0, MAX_MESSAGE);
  const base = { resultCode, resultMessage, reportedRecipient: worst.finalRecipient ?? worst.originalRecipient, source: 'dsn' as const };
  if (worst.action === 'delayed') return { ...base, outcome: 'delayed', severity: 'soft' };
  return { ...base, outcome: 'failed', severity: statusClass(worst) === 5 ? 'hard' : 'soft' };
}

/** 5, 4 or 2 from the Status field, else from the SMTP code of the diagnostic, else null. */
function statusClass(r: DsnRecipient): number | null {
  if (r.status) return Number(r.status[0]);
  const code = smtpCodeOf(r.diagnosticCode);
  return code ? Math.floor(code / 100) : null;
}

function smtpCodeOf(diagnostic: string | null): number | null {
  const m = /^\s*([245]\d\d)(?:[\s-]|$)/.exec(diagnostic ?? '');
  return m ? Number(m[1]) : null;
}

function ignore(why: string, source: 'dsn' | 'heuristic'): BounceVerdict {
  return { outcome: 'ignore', severity: 'soft', resultCode: '', resultMessage: why, reportedRecipient: null, source };
}

export interface PlainMail {
  subject: string;
  from: string;
  /** the Auto-Submitted header, if any (informational: bounces carry it as well as vacation replies) */
  autoSubmitted: string | null;
  text: string;
}

const BOUNCE_SUBJECT = /undeliver|delivery (status notification|failure|has failed|failed)|returned (mail|to sender)|mail delivery (failed|failure|system)|failure notice|non.?delivery|could not be delivered/i;
const BOUNCE_SENDER = /mailer-daemon|postmaster/i;
const AUTO_REPLY_SUBJECT = /out of (the )?office|auto.?reply|automatic reply|vacation|abwesen/i;

/**
 * Bounces without a delivery-status part (qmail, old Exim, some gateways). Conservative: only mail
 * that looks like a bounce (subject or sender) AND quotes a permanent SMTP failure (a 5xx reply or
 * a 5.x.x status) fails the transmission; a bounce-looking mail that says "delay" counts soft;
 * everything else (auto-replies, replies by people, unrecognised formats) is ignored.
 */
export function bounceFromText(mail: PlainMail): BounceVerdict {
  // Auto-Submitted alone proves nothing: MTAs mark their bounces "auto-replied" too (Postfix does).
  if (AUTO_REPLY_SUBJECT.test(mail.subject)) return ignore('auto-reply', 'heuristic');
  if (!BOUNCE_SUBJECT.test(mail.subject) && !BOUNCE_SENDER.test(mail.from)) return ignore('not a bounce', 'heuristic');
  const text = mail.text.slice(0, 64 * 1024);
  const permanent = /^.*\b(5\d\d)[ -](5\.\d{1,3}\.\d{1,3})\b.*$|^.*\b(5\d\d)\b.*(user unknown|no such user|does not exist|unknown user|mailbox unavailable|recipient rejected|address rejected).*$/im.exec(text);
  if (permanent) {
    const code = permanent[1] ?? permanent[3];
    return {
      outcome: 'failed',
      severity: 'hard',
      resultCode: `SMTP_${code}`,
      resultMessage: permanent[0].trim().slice(0, MAX_MESSAGE),
      reportedRecipient: null,
      source: 'heuristic',
    };
  }
  if (/\bdelay(ed)?\b/i.test(mail.subject)) {
    const transient = /^.*\b(4\d\d)[ -](4\.\d{1,3}\.\d{1,3})\b.*$/m.exec(text);
    return {
      outcome: 'delayed',
      severity: 'soft',
      resultCode: transient ? `SMTP_${transient[1]}` : 'DSN_DELAYED',
      resultMessage: (transient?.[0].trim() ?? mail.subject).slice(0, MAX_MESSAGE),
      reportedRecipient: null,
      source: 'heuristic',
    };
  }
  return ignore('bounce without a recognisable permanent failure', 'heuristic');
}
