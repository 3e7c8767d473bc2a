// Package store is a member's durable task store: every A2A task the member took, as JSON in one
// SQLite file (WAL), with its context, state, caller and times in columns for ListTasks' filters and
// pages; a bounded in-memory cache of task bodies; the batch writer that stores rejections without
// making a flood wait for fsync (CreateBatched); Recover, which ends the tasks a crash left running; and
// retention (Sweep), which removes ended tasks by age and count.
//
// Concurrency: a *Store is safe for concurrent use. Writes go through one connection in call order; reads
// use a pool of their own beside it. A state change is acknowledged only after it is committed. Two
// background goroutines (the batch writer and the sweeper) end with Close.
//
// Imports: a2a, roster (the retention type) and internal/ids; never member or another member/...
// package.
package store
