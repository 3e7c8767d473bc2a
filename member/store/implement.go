package store

import "github.com/murmur-run/murmur/a2a"

// What every implementation of Tasks reads the same way: a task's caller and its first message (the
// keys of scopes and of safe retries, which the callers of a store use too) and the page tokens of
// ListInScope; member/store/postgres takes them from here so that its answers are Store's.

// FirstMessageID is the id of the message that created t (its first history message); "" when it has
// none. GetByMessage finds a task by it.
func FirstMessageID(t *a2a.Task) string {
	if len(t.History) == 0 {
		return ""
	}
	return string(t.History[0].MessageID)
}

// TaskCaller is the member that sent t, from its metadata (murmur.caller); "" for the operator's tasks.
func TaskCaller(t *a2a.Task) string { return taskCaller(t) }

// PageToken is the token of the page after the task numbered seq (its order of creation, which a store
// keeps) for the filter of q.
func PageToken(seq int64, q ListQuery) string { return encodePageToken(seq, q.digest()) }

// PageCursor is the seq a page token of q's filter continues after; an error wrapping
// a2a.ErrInvalidParams for a token this store did not issue or issued for another filter.
func PageCursor(token string, q ListQuery) (int64, error) { return decodePageToken(token, q.digest()) }
