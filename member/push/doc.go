// Package push delivers A2A push notifications (A2A 1.0 §3.1.7–3.1.10, §13.2): a member's webhooks
// (TaskPushNotificationConfig), kept in the task store's SQLite file, and their delivery.
//
// Configs live in the table push_configs of the task store's file, beside the tasks they belong to (a
// foreign key: a task the store's retention deletes takes its configs with it), and their outbox in
// push_outbox (deleted with its config). The package owns those two tables and creates them itself; it
// reads the store's tasks table (id, task) and writes nothing else.
//
// The outbox: each stored change of a task's status (Changed, an events.Hub observer, given the task
// as stored) is queued in memory, and a goroutine writes it, in batches of one transaction, as one row
// per config of the task: the body to post ({"task": …} as the task stood, without its history) and
// the change's status key (state, timestamp, message id), which the config remembers as queued, so a
// change is never queued twice and nothing is queued after a task's end. A new config gets the task's
// current status first, in the transaction that stores it. Open, an overflow of the in-memory queue
// and a sweep each minute (ended tasks only) compare every config with its task's stored status and
// queue the difference: a change stored while the member was down, or just before it died, is
// delivered too.
//
// Bounds: a task has at most Config.ConfigsPerTask configs, and one caller at most
// Config.ConfigsPerCaller on tasks that have not ended or with changes waiting: Create past either fails
// (ErrTooMany, ErrTooManyOfCaller), and CheckRoom tells the second beforehand. The in-memory queue holds
// Config.Queue changes; a change finding it full is dropped and the next round compares every config
// instead (the latest status is queued, the ones between merged). A config's outbox holds Config.Outbox
// changes; a change finding it full takes the newest waiting one's place, so the oldest waiting and the
// latest are delivered. Either drop is logged and reported to Config.Dropped.
//
// Delivery: each config's oldest waiting change is posted, one at a time per config (its changes in
// order), with the config's token in A2A-Notification-Token and its authentication in Authorization.
// It is fair per caller: a config keeps who made it (the operator, or a peer member), one caller's
// configs are posted to 8 at once at most, 4 of them to one webhook host, and a config whose caller or
// host has no slot free keeps its place, oldest first. So webhooks that hang hold their own caller's
// slots (half of them when on one host) and never another caller's. The callers are the operator and
// the members the roster lets reach this one, so the posts in flight are bounded by the roster. A 2xx
// deletes the row (deletes are batched: a crash in between delivers again, at least once); a failure
// (no answer, another status) is tried again after a backoff that doubles up to MaxBackoff, up to
// MaxAttempts times, then given up (the row deleted, the next change tried).
//
// Webhook URLs are checked against the allowlist (push.allow of murmur.yaml) when a config is created,
// and every address they resolve to is checked again when the notifier connects: loopback, private and
// link-local addresses only when an entry names them.
//
// Each POST is made in the trace of the request that sent its task (Deliver, DESIGN §17): the task
// store keeps that request's traceparent with the task (its tasks.traceparent), each outbox row copies
// it, and the POST is a CLIENT span, its child, whose traceparent the webhook receives.
//
// A Notifier is safe for concurrent use; Close writes the changes it was told of, waits for the
// deliveries in flight and stops its goroutine. The package imports a2a, member/events' types and
// internal/telemetry/conv only, never member.
package push
