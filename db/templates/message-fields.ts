/** The message fields a template and a campaign both have: API field → column. */
export const MESSAGE_FIELD_COLUMNS = {
  name: 'name',
  description: 'description',
  subject: 'subject',
  body: 'body',
  from: 'from_email',
  fromName: 'from_name',
  replyTo: 'reply_to',
  type: 'type',
} as const;

interface MessageRow<From, Type> {
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from_email: From;
  from_name: string | null;
  reply_to: string | null;
  type: Type;
}

/** Those fields of a row, as the API names them. */
export function messageFields<From extends string | null, Type extends string>(row: MessageRow<From, Type>) {
  return {
    name: row.name,
    description: row.description,
    subject: row.subject,
    body: row.body,
    from: row.from_email,
    fromName: row.from_name,
    replyTo: row.reply_to,
    type: row.type,
  };
}
