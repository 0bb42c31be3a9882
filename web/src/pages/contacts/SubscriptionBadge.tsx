/** Whether a contact receives marketing mail, as a badge (the list and the contact page). */
export function SubscriptionBadge({ subscribed }: { subscribed: boolean }) {
  return <span className={subscribed ? 'badge badge-ok' : 'badge'}>{subscribed ? 'Subscribed' : 'Unsubscribed'}</span>;
}
