// What a message asks of the receiving server's SMTP extensions (docs/delivery.md, "SMTP"):
//
// - SMTPUTF8 (RFC 6531, 6532): a UTF-8 address in the envelope, or 8-bit octets in the header
//   section (a UTF-8 address in From or To, raw UTF-8 in a submitted message's headers);
// - 8BITMIME (RFC 6152): 8-bit octets in the body (a submitted message's `8bit` part). A message
//   Posthorn composes needs it only for an attached message (message/rfc822, written as it is,
//   domain/attachments.ts) holding 8-bit octets: its other parts are quoted-printable or base64
//   (compose-mime.ts).
//
// Delivery announces them on MAIL FROM where the server offers them, and fails the transmission
// before MAIL FROM where it does not (delivery/smtp-pipelining.ts). The common all-ASCII message
// costs one native scan of its bytes per composition, and a regex test per address.
import { isAscii } from 'node:buffer';

export interface ExtensionNeeds {
  smtpUtf8: boolean;
  eightBitMime: boolean;
}

const NONE: ExtensionNeeds = Object.freeze({ smtpUtf8: false, eightBitMime: false });
const NON_ASCII = /[^\x00-\x7f]/;
const HEADER_END = Buffer.from('\r\n\r\n');

/** True when the text is ASCII only (an address that needs no SMTPUTF8). */
export function isAsciiText(text: string): boolean {
  return !NON_ASCII.test(text);
}

/** What a message's bytes need: SMTPUTF8 for 8-bit octets in its header section, 8BITMIME in its body. */
export function messageExtensionNeeds(mime: Buffer): ExtensionNeeds {
  if (isAscii(mime)) return NONE;
  // The header section ends with the CRLF of its last line; without a blank line it is all header.
  const blank = mime.length >= 2 && mime[0] === 0x0d && mime[1] === 0x0a ? -2 : mime.indexOf(HEADER_END);
  const end = blank === -1 ? mime.length : blank + 2;
  return { smtpUtf8: !isAscii(mime.subarray(0, end)), eightBitMime: !isAscii(mime.subarray(end)) };
}

/**
 * What one transmission needs: its message's needs, and SMTPUTF8 for a UTF-8 envelope sender or
 * recipient or a UTF-8 address in the To line written for it (null when none is written).
 */
export function transmissionExtensionNeeds(message: ExtensionNeeds, from: string, to: string, toHeader: string | null): ExtensionNeeds {
  if (message.smtpUtf8 || (isAsciiText(from) && isAsciiText(to) && (toHeader === null || isAsciiText(toHeader)))) return message;
  return { smtpUtf8: true, eightBitMime: message.eightBitMime };
}
