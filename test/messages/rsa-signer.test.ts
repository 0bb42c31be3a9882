import { generateKeyPairSync, type KeyObject, sign, verify } from 'node:crypto';
import { rsaSha256 } from '../../mail/rsa-signer';

/** mail/rsa-signer.ts: DKIM's RSA-SHA256 signatures made on threads of their own, each key sent to a thread once. */
const keyPair = () => generateKeyPairSync('rsa', { modulusLength: 2048 });

test("each signature is the one crypto.sign makes with that message's own key, however many are in flight", async () => {
  const keys = [keyPair(), keyPair()];
  const jobs = Array.from({ length: 60 }, (_, i) => ({ data: Buffer.from(`header block ${i}\r\n`), pair: keys[i % 2]! }));
  const signatures = await Promise.all(jobs.map((j) => rsaSha256(j.data, j.pair.privateKey)));
  jobs.forEach((j, i) => {
    // PKCS #1 v1.5 is deterministic: the same bytes as signing here, and only the right public key verifies them.
    expect(signatures[i]!.equals(sign('sha256', j.data, j.pair.privateKey))).toBe(true);
    expect(verify('sha256', j.data, j.pair.publicKey, signatures[i]!)).toBe(true);
    const other = keys[(i + 1) % 2]!;
    expect(verify('sha256', j.data, other.publicKey, signatures[i]!)).toBe(false);
  });
});

test('a key that cannot sign fails its own signature and no other', async () => {
  const good = keyPair();
  const publicOnly: KeyObject = good.publicKey;
  const data = Buffer.from('h');
  const [bad, ok] = await Promise.allSettled([rsaSha256(data, publicOnly), rsaSha256(data, good.privateKey)]);
  expect(bad.status).toBe('rejected');
  expect(ok.status === 'fulfilled' && verify('sha256', data, good.publicKey, ok.value)).toBe(true);
});
