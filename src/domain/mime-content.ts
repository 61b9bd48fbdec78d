// What a finished MIME message says, read back for the message views (docs/dashboard.md, "One
// message"): a message submitted over SMTP is stored as its MIME (payload.raw,
// domain/message-payload.ts), and its subject, From, header fields, text and HTML parts and
// attachment list are read from those bytes with mailparser when a view asks for them.
//
// One pass of mailparser's stream parser, nothing derived: no text made from the HTML or HTML from
// the text, no links or cid: images rewritten, and each attachment's bytes counted as they stream
// past, never held (a message may carry up to --submission-max-bytes of them). Pure: bytes in,
// values out.
//
// An attached message (message/rfc822, as Nodemailer and mail clients forward one: often with
// `Content-Disposition: inline`) is an attachment, not more of this message's text: mailparser by
// default opens an inline one and merges its parts into the text and HTML (its header as a table);
// `ignoreEmbedded` (mailsplit's option, passed through) keeps it whole. It is named by its part
// (filename or name), else by its own Subject + ".eml", read from its header section.
import { MailParser, simpleParser, type AddressObject, type AttachmentStream, type HeaderLines, type Headers, type MessageText } from 'mailparser';

export interface MimeAttachment {
  /** as the part names it; '' when it names none */
  filename: string;
  /** without parameters ("application/pdf") */
  contentType: string;
  /** decoded size */
  sizeBytes: number;
}

export interface MimeContent {
  /** RFC 2047 words decoded; null without a Subject field */
  subject: string | null;
  /** the From field as text, RFC 2047 words decoded; null without one */
  from: string | null;
  /**
   * The header fields of the message but From and Subject, names as written, values unfolded as
   * written; a name that occurs more than once has its values joined by a line break.
   */
  headers: Record<string, string>;
  /** the text/plain parts (joined as mailparser joins them), or null */
  text: string | null;
  /** the text/html parts, or null */
  html: string | null;
  attachments: MimeAttachment[];
}

/** Fields with a value of their own in MimeContent. */
const OWN_FIELDS = new Set(['from', 'subject']);

/** How much of an unnamed attached message is kept to read its Subject from: its header section, at most this. */
const ATTACHED_HEADER_MAX_BYTES = 64 * 1024;
const HEADER_END = Buffer.from('\r\n\r\n');
const HEADER_END_LF = Buffer.from('\n\n');

/** Reads a MIME message; rejects only when mailparser itself fails on it. */
export function readMimeContent(mime: Buffer): Promise<MimeContent> {
  return new Promise((resolve, reject) => {
    // ignoreEmbedded is mailsplit's (MailParser hands its options to the splitter); not in mailparser's types.
    const parser = new MailParser({ skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true, ignoreEmbedded: true } as ConstructorParameters<typeof MailParser>[0]);
    let headers: Headers = new Map();
    let headerLines: HeaderLines = [];
    let text: string | null = null;
    let html: string | null = null;
    const attachments: MimeAttachment[] = [];
    /** unnamed attached messages and the start of their bytes, named at the end */
    const unnamed: Array<{ attachment: MimeAttachment; head: Buffer[]; headBytes: number }> = [];
    parser.on('headers', (h: Headers) => {
      headers = h;
    });
    parser.on('headerLines', (lines: HeaderLines) => {
      headerLines = lines;
    });
    parser.on('data', (data: AttachmentStream | MessageText) => {
      if (data.type === 'text') {
        // With skipHtmlToText an HTML-only message has an empty text: no text part.
        text = data.text || null;
        html = typeof data.html === 'string' ? data.html : null;
        return;
      }
      const attachment: MimeAttachment = { filename: data.filename ?? '', contentType: data.contentType, sizeBytes: 0 };
      attachments.push(attachment);
      const pending = attachment.filename === '' && attachment.contentType === 'message/rfc822' ? { attachment, head: [] as Buffer[], headBytes: 0 } : null;
      if (pending) unnamed.push(pending);
      data.content.on('data', (chunk: Buffer) => {
        attachment.sizeBytes += chunk.length;
        if (pending && pending.headBytes < ATTACHED_HEADER_MAX_BYTES) {
          pending.head.push(chunk);
          pending.headBytes += chunk.length;
        }
      });
      data.content.on('end', () => data.release());
      // A part whose decoding fails would otherwise never end, and the parser would wait for it.
      data.content.on('error', reject);
    });
    parser.on('error', reject);
    parser.on('end', () => {
      const subject = headers.get('subject');
      const from = headers.get('from') as AddressObject | undefined;
      Promise.all(unnamed.map(async ({ attachment, head }) => (attachment.filename = `${(await attachedSubject(Buffer.concat(head))) || 'message'}.eml`))).then(
        () =>
          resolve({
            subject: typeof subject === 'string' ? subject : null,
            from: from?.text || null,
            headers: fieldsOf(headerLines),
            text,
            html,
            attachments,
          }),
        reject,
      );
    });
    parser.end(mime);
  });
}

function fieldsOf(lines: HeaderLines): Record<string, string> {
  const fields = new Map<string, { name: string; values: string[] }>();
  for (const { key, line } of lines) {
    const colon = line.indexOf(':');
    // A line that is no field (mailparser keeps it) is not shown as one.
    if (colon <= 0 || OWN_FIELDS.has(key)) continue;
    // RFC 5322 2.2.3: unfolding removes the line breaks of folded lines, nothing else.
    const value = utf8Text(line.slice(colon + 1).replace(/\r?\n/g, '').trim());
    const field = fields.get(key);
    if (field) field.values.push(value);
    else fields.set(key, { name: line.slice(0, colon).trim(), values: [value] });
  }
  const out: Record<string, string> = {};
  for (const { name, values } of fields.values()) out[name] = values.join('\n');
  return out;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A raw header value as text: mailparser gives a header line one character per byte (latin1), so
 * raw UTF-8 (SMTPUTF8 mail, RFC 6532) reads as mojibake ("Ã±" for "ñ"). Bytes that are valid
 * UTF-8 are read as UTF-8; others stay as mailparser read them (one character per byte).
 */
export function utf8Text(binary: string): string {
  if (!/[\x80-\xff]/.test(binary) || /[^\x00-\xff]/.test(binary)) return binary;
  try {
    return STRICT_UTF8.decode(Buffer.from(binary, 'latin1'));
  } catch {
    return binary;
  }
}

/**
 * The Subject of an attached message (RFC 2047 words decoded, white space collapsed), read from
 * the start of its bytes: its header section alone goes through mailparser. '' without one, or
 * when mailparser fails on it.
 */
async function attachedSubject(start: Buffer): Promise<string> {
  let end = start.indexOf(HEADER_END);
  if (end === -1) end = start.indexOf(HEADER_END_LF);
  const header = end === -1 ? start : start.subarray(0, end);
  try {
    const parsed = await simpleParser(Buffer.concat([header, HEADER_END]), { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true });
    return (parsed.subject ?? '').replace(/\s+/g, ' ').trim();
  } catch {
    // What an attached message holds is not this message's to fail on: it is then just unnamed.
    return '';
  }
}
