// Free text a peer wrote (an SMTP reply, an IMAP server's error, a TLS failure's reason) as a log
// line may hold it: every email address in it reduced to its domain, so that by default a log names
// domains, not people (docs/operations.md, "Logs"; --log-addresses keeps them).

/**
 * An address as replies write it: a local part (no spaces, brackets, quotes or separators) and a
 * domain of dotted labels or an address literal.
 */
const ADDRESS = /[^\s<>()[\]{}"',;:@]+@((?:[\p{L}\p{N}_-]+\.)+[\p{L}\p{N}_-]+|\[[^\]\s]*\])/gu;

/** The text with each address's local part replaced by `***`: `<***@fail.test>`. */
export function maskAddresses(text: string): string {
  return text.replace(ADDRESS, '***@$1');
}
