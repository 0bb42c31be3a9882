export default async function globalTeardown(): Promise<void> {
  const teardown = (globalThis as Record<string, unknown>).__tidingsTeardown as (() => Promise<void>) | undefined;
  await teardown?.();
}
