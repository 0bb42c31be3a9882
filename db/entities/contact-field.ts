import { EntitySchema } from '@mikro-orm/core';

export type FieldType = 'string' | 'number' | 'boolean' | 'date';

/** The project's type registry: the first non-null value seen for a key fixes its type. */
export interface ContactField {
  projectId: string;
  key: string;
  type: FieldType;
  createdAt: Date;
}

export const ContactFieldSchema = new EntitySchema<ContactField>({
  name: 'ContactField',
  tableName: 'contact_fields',
  properties: {
    projectId: { type: 'string', primary: true },
    key: { type: 'string', primary: true },
    type: { type: 'string' },
    createdAt: { type: 'Date' },
  },
});
