import { ContactSchema } from './contact';
import { ContactFieldSchema } from './contact-field';
import { ProjectSchema } from './project';

export const entities = [ProjectSchema, ContactSchema, ContactFieldSchema];
