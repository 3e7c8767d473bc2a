// Package push delivers A2A push notifications (A2A 1.0 §3.1.7–3.1.10, §13.2): a member's webhooks
// (TaskPushNotificationConfig), kept in the task store's SQLite file, and their delivery.
//
// Configs live in the table push_configs of the task store's file, beside the tasks they belong to (a
// foreign key: a task the store's retention deletes takes its configs with it). Each config remembers
// the task status it last delivered. A config whose task's stored status differs from it has a
// delivery pending, so a delivery survives a restart of the member: Open looks for pending deliveries
// before anything else (at least once: a delivery the webhook took just before a crash may come
// again).
//
// Delivery: each change of a task (Changed, an events.Hub observer) puts the task on a bounded queue; a
// full queue makes the next round look at every config instead, so nothing is lost, only merged. One
// goroutine takes the queue in rounds, and delivers the task as it then stands ({"task": …}, without its
// history) to each of its configs, a few at a time, with the config's token in A2A-Notification-Token
// and its authentication in Authorization. A failed delivery (no answer, or an HTTP status outside
// 2xx) is tried again after a backoff that doubles up to a bound, up to MaxAttempts times for the same
// status; a later status starts afresh. Deliveries of one config never overlap, and never go back to
// an older status.
//
// Webhook URLs are checked against the allowlist (push.allow of murmur.yaml) when a config is created,
// and every address they resolve to is checked again when the notifier connects: loopback, private and
// link-local addresses only when an entry names them.
//
// A Notifier is safe for concurrent use; Close stops its goroutine and waits for it. The package
// imports a2a and member/events' types only, never member.
package push
