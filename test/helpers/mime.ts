// Reading what a test received as a mail reader would.
import { MailParser } from 'mailparser';

/**
 * A header value with its RFC 2047 encoded-words decoded, by mailparser's decoder (it decodes the
 * Subject and addresses itself, and leaves other headers as they came).
 */
export function decodeWords(value: string): string {
  const parser = new MailParser();
  try {
    return (parser as unknown as { libmime: { decodeWords(text: string): string } }).libmime.decodeWords(value);
  } finally {
    parser.destroy();
  }
}
