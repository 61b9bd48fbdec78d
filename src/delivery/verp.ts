// VERP return paths (issue 3, "Bounces"). STUB: owned by the bounces/domains engineer.

/** The envelope sender of one transmission: bounces to it identify the transmission. */
export function returnPathFor(bounceDomain: string, transmissionId: number): string {
  return `bounce-${transmissionId}@${bounceDomain}`;
}

/** The transmission id a bounce recipient address names, or null when it is not one of ours. */
export function transmissionIdFromReturnPath(_address: string, _bounceDomain: string): number | null {
  return null;
}
