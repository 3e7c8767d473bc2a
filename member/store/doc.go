// Package store is a member's durable task store. Its contract is api.go: Tasks, the interface the
// session and the door use, with the guarantees every store keeps and its one "not found"
// (ErrNotFound); Replicated and EventLog (replicas.go) add what a store shared by replicas does. Two
// stores implement it, checked by one suite (storetest): Store here, and PostgreSQL in
// member/store/postgres.
//
// Store keeps every A2A task the member took, as JSON in one SQLite file (WAL), with its context,
// state, caller and times in columns for ListTasks' filters and pages; a bounded in-memory cache of task
// bodies; the batch writer that stores rejections without making a flood wait for fsync
// (CreateBatched); Recover, which ends the tasks a crash left running; and retention (Sweep), which
// removes ended tasks by age and count.
//
// Concurrency: a *Store is safe for concurrent use. Writes go through one connection in call order; reads
// use a pool of their own beside it. A state change is acknowledged only after it is committed. Two
// background goroutines (the batch writer and the sweeper) end with Close.
//
// Imports: a2a, roster (the retention type), internal/ids and its own internal/notfound; never member
// or another member/... package.
package store
