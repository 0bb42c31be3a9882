import { EntitySchema } from '@mikro-orm/core';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface Contact {
  id: string;
  projectId: string;
  /** Stored lower-cased: emails are unique per project case-insensitively. */
  email: string;
  subscribed: boolean;
  data: Record<string, JsonValue>;
  createdAt: Date;
  updatedAt: Date;
}

/** Writes go through db/contacts/contacts.ts (set-based SQL); the schema is here for reads and migrations. */
export const ContactSchema = new EntitySchema<Contact>({
  name: 'Contact',
  tableName: 'contacts',
  properties: {
    id: { type: 'string', primary: true },
    projectId: { type: 'string' },
    email: { type: 'string' },
    subscribed: { type: 'boolean' },
    data: { type: 'json' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
  },
});
