import { normalizeEmail } from './contacts';

/**
 * Runs a batch of items that each write one contact, in statements that write each contact at
 * most once (a statement cannot upsert the same row twice): the k-th item for a contact goes in
 * the k-th statement, one after another, so a contact's items apply in order. When a statement
 * of several items fails for its content (a value PostgreSQL refuses), its items run again one at
 * a time, so only the item at fault gets the error. `run` answers its items in order.
 */
export async function inContactRounds<I, O>(
  items: readonly I[],
  contactOf: (item: I) => { projectId: string; email: string },
  run: (items: I[]) => Promise<O[]>,
): Promise<(O | Error)[]> {
  const results: (O | Error)[] = new Array(items.length);
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const { projectId, email } = contactOf(item);
    const contact = `${projectId}\n${normalizeEmail(email)}`;
    const round = seen.get(contact) ?? 0;
    seen.set(contact, round + 1);
    (rounds[round] ??= []).push(i);
  });
  for (const round of rounds) {
    try {
      const done = await run(round.map((i) => items[i]!));
      round.forEach((i, k) => (results[i] = done[k]!));
    } catch (err) {
      if (round.length === 1 || !isStatementError(err)) {
        for (const i of round) results[i] = err as Error;
        continue;
      }
      for (const i of round) {
        results[i] = await run([items[i]!]).then(
          (done) => done[0]!,
          (single: unknown) => single as Error,
        );
      }
    }
  }
  return results;
}

/** An error PostgreSQL raised for the statement (SQLSTATE), as opposed to a lost connection. */
const isStatementError = (err: unknown) => {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !code.startsWith('57');
};
