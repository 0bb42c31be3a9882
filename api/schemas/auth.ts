import { z } from 'zod';

/** Stored lower-cased and trimmed, like contact emails: `Ada@X.io` and `ada@x.io` are one account. */
const email = z.string().trim().toLowerCase().pipe(z.email().max(254));
const newPassword = z.string().min(8, 'At least 8 characters').max(200, 'At most 200 characters');
/** 32 random bytes in base64url are 43 characters; anything far off is not a token. */
const token = z.string().min(16).max(200);

export const userSchema = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  emailVerified: z.boolean(),
  createdAt: z.string(),
});

export const userResponse = z.object({ user: userSchema });

export const signupBody = z.object({
  email,
  password: newPassword,
  name: z.string().trim().min(1).max(200).optional(),
});

export const loginBody = z.object({
  email,
  // Any length is checked (and refused) the same way; the cap only bounds the hashing work.
  password: z.string().min(1).max(200),
});

export const tokenBody = z.object({ token });
export const tokenQuery = z.object({ token });

export const resetPasswordBody = z.object({ token, password: newPassword });

export const requestResetBody = z.object({ email });

export const acceptedResponse = z.object({ success: z.literal(true), message: z.string() });

export const oauthConfigResponse = z.object({
  providers: z.array(z.enum(['github', 'google'])).describe('Providers users can sign in with: the ones whose OAUTH_* client is configured'),
  github: z.boolean(),
  google: z.boolean(),
});
