import { z } from 'zod';
import { ROLES } from '../../db/accounts/members';

const role = z.enum(ROLES);

export const projectIdParam = z.object({ id: z.string().min(1) });
export const memberParams = z.object({ id: z.string().min(1), userId: z.string().min(1) });

export const projectNameBody = z.object({ name: z.string().trim().min(1).max(100) });

export const resetProjectBody = z.object({
  confirm: z.string().describe("The project's exact name: the reset is irreversible"),
});

export const addMemberBody = z.object({
  email: z.string().trim().toLowerCase().pipe(z.email().max(254)),
  role: role.default('MEMBER').describe('ADMIN or MEMBER; OWNER is refused (403 OWNER_IMMUTABLE)'),
});

export const changeRoleBody = z.object({
  role: role.describe(
    "ADMIN or MEMBER; OWNER hands ownership over, and only the owner's session may ask it (403 OWNER_IMMUTABLE otherwise)",
  ),
});

export const meSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    emailVerified: z.boolean(),
    createdAt: z.string(),
    memberships: z.array(z.object({ projectId: z.string(), projectName: z.string(), role })),
  })
  .meta({ id: 'Me' });

export const userProjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    role,
    secretKeyPreview: z.string(),
    publicKeyPreview: z.string(),
    disabled: z.boolean(),
    disabledReason: z.string().nullable(),
    disabledAt: z.string().nullable(),
    createdAt: z.string(),
  })
  .meta({ id: 'UserProject' });

export const projectKeysSchema = z.object({
  id: z.string(),
  name: z.string(),
  secretKey: z.string().describe('Shown here only; store it now'),
  publicKey: z.string().describe('Shown here only; store it now'),
});

export const createdProjectSchema = userProjectSchema.extend(projectKeysSchema.shape);

export const deletedSchema = z.object({ id: z.string(), deleted: z.literal(true) });

const sendingFigures = z.object({
  sent: z.number().int(),
  bounced: z.number().int(),
  complained: z.number().int(),
  bounceRate: z.number(),
  complaintRate: z.number(),
});

export const securitySchema = z
  .object({
    projectId: z.string(),
    disabled: z.boolean(),
    disabledReason: z.string().nullable(),
    disabledAt: z.string().nullable(),
    last7Days: sendingFigures,
    allTime: sendingFigures,
    evaluated: sendingFigures.extend({ since: z.string() }),
    rules: z.object({ windowDays: z.number(), minEmails: z.number(), maxBounceRate: z.number(), maxComplaintRate: z.number() }),
    suspensions: z.array(
      z.object({ id: z.string(), reason: z.string(), details: z.record(z.string(), z.unknown()), createdAt: z.string(), liftedAt: z.string().nullable() }),
    ),
  })
  .meta({ id: 'ProjectSecurity' });

export const resetSummarySchema = z.object({
  cancelled: z.object({ executions: z.number().int(), campaigns: z.number().int() }),
  deleted: z.record(z.string(), z.number().int()),
});

export const setupStateSchema = z.object({
  hasVerifiedDomain: z.boolean(),
  hasTemplate: z.boolean(),
  hasContact: z.boolean(),
  hasSentEmail: z.boolean(),
  hasEnabledWorkflow: z.boolean(),
  complete: z.boolean(),
});

export const memberSchema = z
  .object({ userId: z.string(), email: z.string(), name: z.string().nullable(), role, joinedAt: z.string() })
  .meta({ id: 'Member' });
