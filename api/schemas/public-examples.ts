import type { z } from 'zod';
import type { RouteExample } from '../routing';
import type { trackBody, trackResponse } from './events';
import type { sendBody, sendResponse } from './send';
import type { verifyBody, verifyResponse } from './verify';

/** Named request and response examples, typed by the schemas they illustrate. */
type Examples<B extends z.ZodType, R extends z.ZodType> = {
  request: Record<string, RouteExample<z.input<B>>>;
  response: Record<string, RouteExample<z.output<R>>>;
};

/**
 * Examples of the public API (`/v1/…`) for the reference. test/api/openapi.test.ts parses each one
 * with the schema of the route it illustrates, so they cannot drift from what the API accepts.
 */

const CONTACT = 'cnt_019ac2f1e4b07a3c9d5e8f1a2b3c4d5e';
const TIMESTAMP = '2026-01-15T10:00:00.000Z';

export const sendExamples: Examples<typeof sendBody, typeof sendResponse> = {
  request: {
    html: {
      summary: 'One recipient, subject and HTML body given here',
      value: {
        to: 'ada@example.org',
        from: { name: 'Acme', email: 'hello@example.com' },
        subject: 'Welcome, {{name ?? "friend"}}',
        body: '<p>Thanks for joining the {{plan}} plan.</p><p><a href="{{manageUrl}}">Email preferences</a></p>',
        data: { name: 'Ada', plan: 'pro' },
      },
    },
    markdown: {
      summary: 'A body written in Markdown',
      value: {
        to: 'ada@example.org',
        from: 'hello@example.com',
        subject: 'Your weekly summary',
        type: 'markdown',
        data: { name: 'Ada', unread: 3 },
        body: '# Hello {{name}}\n\nYou have **{{unread}} new messages**. [Read them](https://example.com/inbox).',
      },
    },
    template: {
      summary: 'From a template (its subject, body and sender), to two recipients',
      value: {
        to: ['ada@example.org', { name: 'Grace Hopper', email: 'grace@example.org' }],
        template: 'tpl_019ac2f1e4b07a3c9d5e8f1a2b3c4d60',
        data: { orderId: 'A-1042', resetCode: { value: '931 442', persistent: false } },
      },
    },
    attachment: {
      summary: 'With an attachment, a reply-to address and a custom header',
      value: {
        to: 'billing@example.org',
        from: 'invoices@example.com',
        reply: 'support@example.com',
        subject: 'Your invoice',
        body: '<p>Your invoice is attached.</p>',
        headers: { 'X-Invoice-Id': 'INV-2026-001' },
        attachments: [{ filename: 'invoice.pdf', content: 'JVBERi0xLjQKJcfsj6IK', contentType: 'application/pdf' }],
      },
    },
  },
  response: {
    queued: {
      summary: 'Queued: one email id per recipient',
      value: {
        success: true,
        data: {
          emails: [{ contact: { id: CONTACT, email: 'ada@example.org' }, email: '6f1f2a4e-8c1d-4b7a-9e3f-2d5c8a7b9e10' }],
          timestamp: TIMESTAMP,
        },
      },
    },
  },
};

export const trackExamples: Examples<typeof trackBody, typeof trackResponse> = {
  request: {
    event: {
      summary: 'An event with data stored on the contact',
      value: { event: 'signed-up', email: 'ada@example.org', data: { plan: 'pro', company: 'Analytical Engines' } },
    },
    unsubscribed: {
      summary: 'An event that also records the contact as unsubscribed',
      value: { event: 'cancelled-plan', email: 'ada@example.org', subscribed: false },
    },
  },
  response: {
    tracked: {
      summary: 'The contact (created if new) and the stored event',
      value: { success: true, data: { contact: CONTACT, event: 'evt_019ac2f1e4b17a3c9d5e8f1a2b3c4d61', timestamp: TIMESTAMP } },
    },
  },
};

export const verifyExamples: Examples<typeof verifyBody, typeof verifyResponse> = {
  request: {
    typo: { summary: 'An address with a misspelt provider', value: { email: 'jane.doe@gmial.com' } },
  },
  response: {
    typo: {
      summary: 'Deliverable, but probably a typo',
      value: {
        success: true,
        data: {
          email: 'jane.doe@gmial.com',
          valid: true,
          isDisposable: false,
          isAlias: false,
          isTypo: true,
          isPlusAddressed: false,
          isPersonalEmail: true,
          domainExists: true,
          hasWebsite: true,
          hasMxRecords: true,
          reasons: ['Did you mean jane.doe@gmail.com?'],
          suggestion: 'jane.doe@gmail.com',
        },
      },
    },
  },
};
