// The bytes of a MIME tree compiled by Nodemailer's MailComposer, written in one synchronous pass.
//
// Nodemailer's own build() streams the tree: a PassThrough per part, a Transform per encoder, a
// setImmediate between parts and between a part's headers and its body. For a message whose parts
// are all in memory (every message Posthorn composes: content is text, HTML and base64
// attachments decoded from the stored payload) that plumbing was most of the cost of composing it
// (docs/decisions/0003-performance.md). buildMimeNow writes the same bytes directly: the header
// blocks are Nodemailer's (MimeNode.buildHeaders), the bodies are encoded as Nodemailer's encoders
// (its base64 encoder itself; quoted-printable by quotedPrintable and wrapQuotedPrintable below,
// the same text at native speed) with the framing its stream transforms give a body written in
// one chunk, and the parts are joined as its stream() joins them. Anything else (a stream or file as content, raw
// content, user transforms, a newline conversion) answers null and the caller runs build().
// test/domain/mime-build.test.ts holds the two byte for byte equal over many shapes of message.
//
// compileMail gives the tree itself, as MailComposer's compile() would, for the shapes of every
// message without attachments (a text part, an HTML part, or both as multipart/alternative): the
// nodes, their options, headers and order are compile()'s, without the regular expressions it runs
// over eleven header names and over each part for every message (composing the bench's message:
// 26.8 instead of 29.9 µs, docs/decisions/0003-performance.md). Any other shape is compiled by
// MailComposer itself.
//
// Also here, as it is the other thing this module knows of Nodemailer's insides: MimeNode's header
// name normalisation ("content-type" -> "Content-Type"), a pure function of the name that
// Nodemailer runs through a regular expression with a callback on every setHeader and getHeader,
// ~33 times per message composed, was a third of the cost of composing one (58 -> 38 µs per
// message measured alone). It is memoised (bounded; the result for each name is unchanged), and so
// is its normalisation of each address (punycode for the domain). And mimeFuncs.hasLongerLines,
// which MimeNode asks of every text body to choose its encoding, builds a RegExp (`^.{77,}`
// multiline) per call (1.5% of a delivering worker): hasLongerLines below gives the same answer
// from native searches for LF. One change of what it writes: address headers' display names are
// written by formatDisplayName (below).
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import MimeNode from 'nodemailer/lib/mime-node/index.js';
import mimeFuncs from 'nodemailer/lib/mime-funcs/index.js';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import base64 from 'nodemailer/lib/base64/index.js';

/** What of Nodemailer's MimeNode (7.x) the direct build reads beyond its typed surface. */
interface NodeInternals {
  _raw?: unknown;
  _transforms?: unknown[];
  _processFuncs?: unknown[];
  newline?: unknown;
}

const LINE_LENGTH = 76;

/** A method of MimeNode's that is a pure function of one string. */
type StringMethod = (this: MimeNode, value: unknown) => string;
/**
 * Only short strings are memoised (names and addresses are short; content is attacker-controlled,
 * and 10,000 long ones would hold their size many times over).
 */
const MAX_MEMOISED_LENGTH = 256;
/** Distinct strings a memo holds at most; values come from stored messages, and a flood of distinct ones empties it. */
const MAX_MEMOISED_VALUES = 10_000;

/** `original` memoised for short strings (bounded); any other value goes to it each time. */
function memoisedStringMethod(original: StringMethod): StringMethod {
  const memo = new Map<string, string>();
  return function memoised(this: MimeNode, value: unknown): string {
    if (typeof value !== 'string' || value.length > MAX_MEMOISED_LENGTH) return original.call(this, value);
    let result = memo.get(value);
    if (result === undefined) {
      result = original.call(this, value);
      if (memo.size >= MAX_MEMOISED_VALUES) memo.clear();
      memo.set(value, result);
    }
    return result;
  };
}

const prototype = MimeNode.prototype as unknown as { _normalizeHeaderKey?: StringMethod; _normalizeAddress?: StringMethod };
/** Nodemailer's own normalisation, unmemoised (undefined if a future version drops the method). */
export const nodemailerNormalizeHeaderKey = prototype._normalizeHeaderKey;
if (nodemailerNormalizeHeaderKey) prototype._normalizeHeaderKey = memoisedStringMethod(nodemailerNormalizeHeaderKey);

// Address headers: MimeNode parses each address header with addressparser every time it builds
// the headers or the envelope (From two or three times per message composed). addressparser walks
// the string a character at a time into token objects: ~1 µs and ~4 KB of garbage per call, for a
// From that is the same in every message of a project. Parsed strings are memoised (bounded), and
// every caller gets its own copy of the result, which MimeNode then mutates (normalised addresses).
type ParsedAddress = { name: string; address?: string; group?: ParsedAddress[] };
type ParseAddresses = (this: MimeNode, addresses: unknown) => ParsedAddress[];
const parsePrototype = MimeNode.prototype as unknown as { _parseAddresses?: ParseAddresses };
/** Nodemailer's own (undefined if a future version drops the method). */
export const nodemailerParseAddresses = parsePrototype._parseAddresses;
const parsedAddresses = new Map<string, ParsedAddress[]>();

function copyAddresses(list: readonly ParsedAddress[]): ParsedAddress[] {
  return list.map((a) => (a.group ? { ...a, group: copyAddresses(a.group) } : { ...a }));
}

/** addressparser's answer for one header value, from the memo: a fresh copy the caller may change. */
export function parseAddressHeader(value: string): ParsedAddress[] {
  if (value.length > MAX_MEMOISED_LENGTH) return addressparser(value) as ParsedAddress[];
  let parsed = parsedAddresses.get(value);
  if (parsed === undefined) {
    parsed = addressparser(value) as ParsedAddress[];
    if (parsedAddresses.size >= MAX_MEMOISED_VALUES) parsedAddresses.clear();
    parsedAddresses.set(value, parsed);
  }
  return copyAddresses(parsed);
}

if (nodemailerParseAddresses) {
  const original = nodemailerParseAddresses;
  parsePrototype._parseAddresses = function memoisedParseAddresses(this: MimeNode, addresses: unknown): ParsedAddress[] {
    return typeof addresses === 'string' ? parseAddressHeader(addresses) : original.call(this, addresses);
  };
}

/** RFC 5322 2.1.1: a line of a message is at most 998 octets, its CRLF not counted. */
const MAX_LINE_OCTETS = 998;

/**
 * Whether `text`, after `prefix` characters on its first line and folded at its white space (as
 * Nodemailer's foldLines folds every header line), could still leave a line over
 * MAX_LINE_OCTETS: a run without white space is too long. Counts characters: a value Nodemailer
 * leaves unencoded is ASCII. A text shorter than the limit, every usual one, costs no pass.
 */
export function outgrowsLine(prefix: number, text: string): boolean {
  if (prefix + text.length <= MAX_LINE_OCTETS) return false;
  let line = prefix;
  let inWord = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const space = c === 0x20 || c === 0x09;
    // A fold goes before white space: a line is at most the white space and the word after it.
    if (space && inWord) line = 0;
    inWord = !space;
    if (++line > MAX_LINE_OCTETS) return true;
  }
  return false;
}

// Addresses: MimeNode normalises every address it writes (control characters out, the domain through
// punycode's toASCII: ~1 µs, a twentieth of composing a message), the From of every message of a
// project alike. A pure function of the string: memoised like the header names.
/** Nodemailer's own (undefined if a future version drops the method). */
export const nodemailerNormalizeAddress = prototype._normalizeAddress;
if (nodemailerNormalizeAddress) prototype._normalizeAddress = memoisedStringMethod(nodemailerNormalizeAddress);

// Display names of the address headers MimeNode formats itself (From, Sender, Cc, Bcc, Reply-To)
// are written by formatDisplayName below, the To line's too (compose-mime.ts formatAddressHeader):
// one way for every address header, which any RFC 5322 reader (mailparser, Python's email, a mail
// client) reads back as exactly the name (test/delivery/composition.test.ts). Nodemailer's own
// writes a name outside ASCII as encoded-words of at most 52 characters, adjacent when the name is
// longer: readers that keep the white space between adjacent encoded-words (Python's email with
// its default policy, CPython issue 128110) read a space into the name at each, mid-word.
type EncodeAddressName = (this: MimeNode, name: string) => string;
const namePrototype = MimeNode.prototype as unknown as { _encodeAddressName?: EncodeAddressName };
/** Nodemailer's own (undefined if a future version drops the method). */
export const nodemailerEncodeAddressName = namePrototype._encodeAddressName;
/** What precedes a name on its line at most: the longest of those headers' names and ": ". */
const ADDRESS_NAME_PREFIX = 'Reply-To: '.length;
if (nodemailerEncodeAddressName) {
  namePrototype._encodeAddressName = function encodeAddressName(this: MimeNode, name: string): string {
    return formatDisplayName(name, ADDRESS_NAME_PREFIX);
  };
}

/** RFC 2047 2: an encoded-word is at most 75 characters long. */
const MAX_ENCODED_WORD = 75;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
/**
 * RFC 5322 atoms parted by single spaces: written as they are. (A name given as encoded-words is
 * such a phrase: it goes on as the client wrote it, for readers to decode.)
 */
const ATOM = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+";
const PLAIN_PHRASE = new RegExp(`^${ATOM}(?: ${ATOM})*$`);

/**
 * A display name as an address header writes it (RFC 5322 3.4, RFC 2047 5):
 * - printable ASCII: as it is when atoms, else one quoted-string (`"` and `\` escaped), so
 *   that `,` `;` `:` `(` `<` `@` and runs of spaces are read as part of the name;
 * - otherwise one encoded-word for the whole name (Q or B, the shorter), when it is within RFC
 *   2047's 75 characters;
 * - a longer name: its words parted at single spaces, each run of words outside printable ASCII
 *   one encoded-word, the runs between them written as above. Encoded-words are then never
 *   adjacent unless one run is itself longer than an encoded-word may be, so readers that keep the
 *   white space between adjacent ones read the name as it is too.
 * A run without white space that no fold could bring within a line's 998 octets (after `prefix`
 * characters) goes as encoded-words, which fold between them.
 */
export function formatDisplayName(name: string, prefix: number): string {
  if (name === '') return '';
  if (PRINTABLE_ASCII.test(name)) return asciiDisplayName(name, prefix);
  const whole = shorterEncodedWord(name);
  if (whole.word.length <= MAX_ENCODED_WORD) return whole.word;
  const pieces: Array<{ encoded: boolean; text: string }> = [];
  for (const word of name.split(' ')) {
    const last = pieces.length > 0 ? pieces[pieces.length - 1] : undefined;
    // An empty word (two spaces in a row) stays with the piece before it: its space is kept there.
    const encoded = word === '' && last ? last.encoded : !PRINTABLE_ASCII.test(word) || outgrowsLine(prefix + 2, word);
    if (last && last.encoded === encoded) last.text += ` ${word}`;
    else pieces.push({ encoded, text: word });
  }
  return pieces.map((piece) => (piece.encoded ? encodedWords(piece.text) : asciiDisplayName(piece.text, prefix))).join(' ');
}

function asciiDisplayName(name: string, prefix: number): string {
  const written = PLAIN_PHRASE.test(name) ? name : `"${name.replace(/(["\\])/g, '\\$1')}"`;
  return outgrowsLine(prefix, written) ? encodedWords(name) : written;
}

/** The text as one encoded-word, in the shorter of Q and B. */
function shorterEncodedWord(text: string): { word: string; encoding: 'Q' | 'B' } {
  const q = mimeFuncs.encodeWord(text, 'Q');
  const b = mimeFuncs.encodeWord(text, 'B');
  return q.length <= b.length ? { word: q, encoding: 'Q' } : { word: b, encoding: 'B' };
}

/**
 * The text as encoded-words of at most MAX_ENCODED_WORD characters, each holding whole
 * characters (RFC 2047 5), parted by spaces (which readers drop between encoded-words, RFC 2047
 * 6.2, and where folds go).
 */
function encodedWords(text: string): string {
  const { word, encoding } = shorterEncodedWord(text);
  if (word.length <= MAX_ENCODED_WORD) return word;
  const words: string[] = [];
  let chunk = '';
  for (const character of text) {
    if (chunk !== '' && mimeFuncs.encodeWord(chunk + character, encoding).length > MAX_ENCODED_WORD) {
      words.push(mimeFuncs.encodeWord(chunk, encoding));
      chunk = '';
    }
    chunk += character;
  }
  if (chunk !== '') words.push(mimeFuncs.encodeWord(chunk, encoding));
  return words.join(' ');
}

type HasLongerLines = (str: string, lineLength: number) => boolean;
const funcs = mimeFuncs as unknown as { hasLongerLines?: HasLongerLines };
/** Nodemailer's own test (undefined if a future version drops it). */
export const nodemailerHasLongerLines = funcs.hasLongerLines;
if (nodemailerHasLongerLines) funcs.hasLongerLines = hasLongerLines;

/**
 * Whether some line of `str` is longer than `lineLength`, lines ending where a RegExp's `.` stops
 * (\n, \r, U+2028, U+2029) and lengths counted in UTF-16 units, as Nodemailer's RegExp does; a
 * string over 128 KiB counts as having one, as there. The text is walked from LF to LF with
 * indexOf (a native search, over ten times quicker than reading it a character at a time): a stretch
 * between two LFs no longer than `lineLength` holds no longer line whatever else ends lines in it,
 * and only a longer stretch is read character by character.
 */
export function hasLongerLines(str: string, lineLength: number): boolean {
  if (str.length > 128 * 1024) return true;
  let start = 0;
  for (;;) {
    const lf = str.indexOf('\n', start);
    const end = lf === -1 ? str.length : lf;
    if (end - start > lineLength && longerLineWithin(str, start, end, lineLength)) return true;
    if (lf === -1) return false;
    start = lf + 1;
  }
}

/** hasLongerLines within str[from, to), a stretch without LF that ends a line. */
function longerLineWithin(str: string, from: number, to: number, lineLength: number): boolean {
  let start = from;
  for (let i = from; i < to; i++) {
    const c = str.charCodeAt(i);
    if (c === 13 || c === 0x2028 || c === 0x2029) {
      if (i - start > lineLength) return true;
      start = i + 1;
    }
  }
  return to - start > lineLength;
}

/**
 * A header value MimeNode writes as it is, folded at white space (buildHeaders' `prepared` and
 * `foldLines` options), where it would otherwise encode or format it itself. Taken for the Subject
 * as for any header that is not an address, a message id, a date or a MIME header.
 */
export interface PreparedHeader {
  prepared: true;
  foldLines: true;
  value: string;
}

/** MailComposer's options, with the ones it reads beyond its typed surface. */
export type MailOptions = Omit<ConstructorParameters<typeof MailComposer>[0], 'subject'> & { subject?: string | PreparedHeader; baseBoundary?: string };

/** The options compileMail builds a tree for itself; any other that is set goes to MailComposer. */
const DIRECT_OPTIONS = new Set(['from', 'cc', 'replyTo', 'subject', 'text', 'html', 'headers', 'messageId', 'date', 'attachments', 'textEncoding', 'disableFileAccess', 'disableUrlAccess', 'baseBoundary']);

/** The tree MailComposer's compile() gives for `mail` (see above). */
export function compileMail(mail: MailOptions): MimeNode {
  const options = mail as Record<string, unknown>;
  const direct =
    (typeof mail.text === 'string' || mail.text === undefined || mail.text === null) &&
    (typeof mail.html === 'string' || mail.html === undefined || mail.html === null) &&
    (mail.text || mail.html) &&
    (!Array.isArray(mail.attachments) || mail.attachments.length === 0) &&
    Object.keys(options).every((key) => DIRECT_OPTIONS.has(key) || !options[key]);
  if (!direct) return new MailComposer(mail as ConstructorParameters<typeof MailComposer>[0]).compile();
  // getAlternatives: the text part, then the HTML part, each only when not empty.
  const parts: Array<[string, string]> = [];
  if (mail.text) parts.push(['text/plain; charset=utf-8', mail.text as string]);
  if (mail.html) parts.push(['text/html; charset=utf-8', mail.html as string]);
  // _createContentNode and _createAlternative's node options. A leaf's own baseBoundary is never
  // written (only a multipart node's boundary is): given, it spares MimeNode a random draw.
  // textEncoding as MailComposer passes it ('quoted-printable', 'base64'): MimeNode reads its first letter.
  const nodeOptions = { baseBoundary: mail.baseBoundary, textEncoding: mail.textEncoding, disableUrlAccess: mail.disableUrlAccess, disableFileAccess: mail.disableFileAccess } as ConstructorParameters<typeof MimeNode>[1];
  let root: MimeNode;
  if (parts.length === 1) {
    root = new MimeNode(parts[0][0], nodeOptions);
    root.setContent(parts[0][1]);
  } else {
    root = new MimeNode('multipart/alternative', nodeOptions);
    for (const [contentType, content] of parts) root.createChild(contentType, nodeOptions).setContent(content);
  }
  // compile(): the custom headers, then the root's own in its order (from, sender, to, cc, bcc,
  // reply-to, in-reply-to, references, subject, message-id, date), each when set.
  if (mail.headers) root.addHeader(mail.headers as Record<string, string>);
  // The values as compile() passes them: MimeNode takes strings, dates and address objects alike.
  const set = (name: string, value: unknown) => value && root.setHeader(name, value as string);
  set('from', mail.from);
  set('cc', mail.cc);
  set('reply-to', mail.replyTo);
  set('subject', mail.subject);
  set('message-id', mail.messageId);
  set('date', mail.date);
  root.messageId();
  return root;
}

/** The message as MimeNode.build() would produce it, or null when only build() can (see above). */
export function buildMimeNow(root: MimeNode): Buffer | null {
  const internals = root as unknown as NodeInternals;
  if (internals._transforms?.length || internals._processFuncs?.length || internals.newline) return null;
  const chunks: Buffer[] = [];
  if (!writeNode(root, chunks)) return null;
  // LastNewline: the message ends with a line break.
  const last = chunks.length > 0 ? chunks[chunks.length - 1] : undefined;
  const lastByte = last && last.length > 0 ? last[last.length - 1] : undefined;
  if (lastByte === 0x0d) chunks.push(Buffer.from('\n'));
  else if (lastByte !== 0x0a) chunks.push(Buffer.from('\r\n'));
  return Buffer.concat(chunks);
}

function writeNode(node: MimeNode, out: Buffer[]): boolean {
  if ((node as unknown as NodeInternals)._raw) return false;
  const content = node.content;
  if (content && typeof content !== 'string' && !Buffer.isBuffer(content)) return false;
  out.push(Buffer.from(`${node.buildHeaders()}\r\n\r\n`, 'utf8'));
  if (content) out.push(encodeBody(content, node.getTransferEncoding()));
  if (!node.multipart) return true;
  for (let i = 0; i < node.childNodes.length; i++) {
    out.push(Buffer.from(`${i > 0 ? '\r\n' : ''}--${node.boundary}\r\n`, 'utf8'));
    if (!writeNode(node.childNodes[i], out)) return false;
  }
  out.push(Buffer.from(`\r\n--${node.boundary}--\r\n`, 'utf8'));
  return true;
}

/** A body as Nodemailer's encoder streams write it when it arrives in one chunk. */
function encodeBody(content: string | Buffer, transferEncoding: string | false): Buffer {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  if (transferEncoding === 'quoted-printable') return Buffer.from(wrapQuotedPrintable(quotedPrintable(bytes), LINE_LENGTH), 'ascii');
  if (transferEncoding === 'base64') {
    // The base64 stream wraps whole 3-byte groups and appends the encoded rest to the last line.
    const whole = bytes.length - (bytes.length % 3);
    const wrapped = whole > 0 ? base64.wrap(base64.encode(bytes.subarray(0, whole)), LINE_LENGTH) : '';
    const rest = whole < bytes.length ? base64.encode(bytes.subarray(whole)) : '';
    return Buffer.from(wrapped + rest, 'ascii');
  }
  return bytes;
}

/** Every byte's escape as Nodemailer's quoted-printable encoder writes it: "=" and two upper-case hex digits. */
const QP_ESCAPES = Array.from({ length: 256 }, (_, byte) => `=${byte.toString(16).toUpperCase().padStart(2, '0')}`);
/** What the encoder escapes besides "=": every byte outside printable ASCII but tab, CR and LF. */
const QP_UNPRINTABLE = /[^\t\n\r\x20-\x7e]/g;
/** A tab or space before a CR or LF, which the encoder escapes (with the line break after it). */
const QP_SPACE_BEFORE_BREAK = /[\t ][\r\n]/g;

/**
 * The same text as Nodemailer's quoted-printable encoder (nodemailer/lib/qp encode, before its
 * wrap): each byte escaped unless it is printable ASCII other than "=", a tab, CR or LF, and a tab
 * or space escaped when a line break or the end follows it. Nodemailer's tests each byte against
 * a list of ranges and adds the result to a string one character at a time: 165 µs for a 16 KB
 * HTML part here, most of what composing such a message cost. This is done by native string
 * searches over the bytes read as Latin-1 (one character per byte): ~50 µs for the same part.
 * test/domain/mime-build.test.ts holds the two equal over random bytes.
 */
export function quotedPrintable(bytes: Buffer): string {
  let text = bytes.toString('latin1');
  // "=" first: its escape brings no byte the next two passes change.
  if (text.includes('=')) text = text.replaceAll('=', '=3D');
  text = text.replace(QP_UNPRINTABLE, (byte) => QP_ESCAPES[byte.charCodeAt(0)]);
  text = text.replace(QP_SPACE_BEFORE_BREAK, (pair) => QP_ESCAPES[pair.charCodeAt(0)] + pair[1]);
  const last = text.charCodeAt(text.length - 1);
  return last === 0x20 || last === 0x09 ? text.slice(0, -1) + QP_ESCAPES[last] : text;
}

const isHex = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
/** [ \t.,!?]: where Nodemailer's wrap prefers to break a line that has no line break near its end. */
const isBreakAfter = (c: number) => c === 0x20 || c === 0x09 || c === 0x2e || c === 0x2c || c === 0x21 || c === 0x3f;

/**
 * The same lines as Nodemailer's quoted-printable wrap (nodemailer/lib/qp wrap) of `str`, the
 * output of quotedPrintable: soft line breaks ("=" CRLF) so that no line is longer than
 * `lineLength`, put after a line break, a space or a punctuation mark near the end of each
 * stretch where there is one, never inside an escape or a UTF-8 sequence's escapes. Nodemailer's
 * takes each stretch as a substring and tests it with four or five regular expressions; this reads
 * the same characters by their index (test/domain/mime-build.test.ts holds the two equal).
 */
export function wrapQuotedPrintable(str: string, lineLength: number): string {
  const len = str.length;
  if (len <= lineLength) return str;
  const margin = Math.floor(lineLength / 3);
  const lines: string[] = [];
  let pos = 0;
  // The next CRLF at or after pos (found again only once passed: one search over the string in all).
  let crlf = str.indexOf('\r\n');
  while (pos < len) {
    let end = Math.min(pos + lineLength, len);
    if (crlf !== -1 && crlf < pos) crlf = str.indexOf('\r\n', pos);
    // A CRLF within the stretch: the line ends after the first one.
    if (crlf !== -1 && crlf + 2 <= end) {
      lines.push(str.slice(pos, crlf + 2));
      pos = crlf + 2;
      continue;
    }
    // Ending in LF: as it is.
    if (str.charCodeAt(end - 1) === 0x0a) {
      lines.push(str.slice(pos, end));
      pos = end;
      continue;
    }
    // The last third (or less) of the stretch: its last CR or LF, if an LF, ends the line.
    const tail = Math.max(pos, end - margin);
    let lastBreak = -1;
    for (let i = end - 1; i >= tail; i--) {
      const c = str.charCodeAt(i);
      if (c === 0x0a || c === 0x0d) {
        lastBreak = c === 0x0a ? i : -2;
        break;
      }
    }
    if (lastBreak >= 0) {
      lines.push(str.slice(pos, lastBreak + 1));
      pos = lastBreak + 1;
      continue;
    }
    let cut = -1;
    if (end - pos > lineLength - margin) {
      for (let i = end - 1; i >= tail; i--) {
        if (isBreakAfter(str.charCodeAt(i))) {
          cut = i + 1;
          break;
        }
      }
    }
    if (cut !== -1) end = cut;
    else {
      // An escape cut short at the end ("=" or "=X") goes to the next line; so do the escapes of
      // a UTF-8 sequence that would be split (its continuation bytes, then its first byte).
      const c1 = str.charCodeAt(end - 1);
      const c2 = end - 2 >= pos ? str.charCodeAt(end - 2) : -1;
      const cutShort = c1 === 0x3d ? 1 : c2 === 0x3d && isHex(c1) ? 2 : 0;
      if (cutShort > 0 || endsInEscape(str, pos, end)) {
        end -= cutShort;
        while (end - pos > 3 && end < len && !onlyEscapes(str, pos, end) && endsInEscape(str, pos, end)) {
          const code = parseInt(str.slice(end - 2, end), 16);
          if (code < 128) break;
          end -= 3;
          if (code >= 0xc0) break;
        }
      }
    }
    // A soft line break unless the line is the last or ends in LF; a full-length line gives up its
    // last escape or character to make room for it.
    if (end < len && str.charCodeAt(end - 1) !== 0x0a) {
      if (end - pos === lineLength) end -= endsInEscape(str, pos, end) ? 3 : 1;
      lines.push(`${str.slice(pos, end)}=\r\n`);
    } else lines.push(str.slice(pos, end));
    pos = end;
  }
  return lines.join('');
}

/** str[from, to) ends in an escape ("=" and two hex digits). */
function endsInEscape(str: string, from: number, to: number): boolean {
  return to - from >= 3 && str.charCodeAt(to - 3) === 0x3d && isHex(str.charCodeAt(to - 2)) && isHex(str.charCodeAt(to - 1));
}

/** str[from, to) is one to four escapes and nothing else. */
function onlyEscapes(str: string, from: number, to: number): boolean {
  const n = to - from;
  if (n < 3 || n > 12 || n % 3 !== 0) return false;
  for (let i = from; i < to; i += 3) if (!endsInEscape(str, i, i + 3)) return false;
  return true;
}
