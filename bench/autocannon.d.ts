// autocannon ships no types; the bench uses a small part of its programmatic API.
declare module 'autocannon' {
  const autocannon: (opts: Record<string, unknown>) => Promise<Record<string, any>> & { stop?: () => void };
  export default autocannon;
}
