// A bounded wait for something a test cannot be told of directly: `probe` is asked every `everyMs`
// until it answers a truthy value, which is returned; after `timeoutMs` the test fails naming
// `what`. The bound is a limit on waiting, not an assertion on speed.
export async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 15_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
