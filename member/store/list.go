package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// maxPageBytes bounds the stored JSON of the tasks of one ListTasks page: a page that reaches it ends
// early, with a next page token.
const maxPageBytes = 4 << 20

// ListQuery selects the tasks of ListTasks. Zero fields do not filter.
type ListQuery struct {
	// Caller, when set, keeps only the tasks that member sent (a peer's ListTasks).
	Caller    string
	ContextID string
	State     a2a.TaskState
	After     time.Time // status timestamp strictly after; zero: any
	PageSize  int       // 1..a2a.MaxPageSize, validated by the caller
	PageToken string    // "" for the first page
}

// ListPage is one page of tasks, newest first.
type ListPage struct {
	Tasks         []*a2a.Task
	NextPageToken string // "" on the last page
	Total         int    // the tasks matching the query, on all pages
}

// list returns one page of the tasks that match q, newest first. A page token that is not one of the
// store's, or that was issued for a different filter, is refused with an error wrapping
// a2a.ErrInvalidParams.
func (s *Store) list(ctx context.Context, q ListQuery) (ListPage, error) {
	digest := q.digest()
	var where []string
	var args []any
	if q.Caller != "" {
		where, args = append(where, "caller = ?"), append(args, q.Caller)
	}
	if q.ContextID != "" {
		where, args = append(where, "context_id = ?"), append(args, q.ContextID)
	}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if !q.After.IsZero() {
		// Stored timestamps are whole milliseconds, so "after q.After" is "after its millisecond".
		where, args = append(where, "status_ts > ?"), append(args, q.After.UnixMilli())
	}
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	pageWhere, pageArgs := where, args
	if q.PageToken != "" {
		cursor, err := decodePageToken(q.PageToken, digest)
		if err != nil {
			return ListPage{}, err
		}
		pageWhere, pageArgs = append(slices.Clip(where), "seq < ?"), append(slices.Clip(args), cursor)
	}
	pageFilter := ""
	if len(pageWhere) > 0 {
		pageFilter = " WHERE " + strings.Join(pageWhere, " AND ")
	}

	// One read transaction, so the total and the page come from the same snapshot.
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	defer tx.Rollback()
	var page ListPage
	count := `SELECT count(*) FROM tasks` + filter
	switch {
	case q.ContextID == "" && q.After.IsZero():
		// Filtered by state and caller at most: task_counts holds the answer.
		count = `SELECT coalesce(sum(n), 0) FROM task_counts` + filter
	case q.ContextID == "" && q.State == "":
		// After a time, in any state: counted in tasks_ended (state, status_ts), a range of it for each
		// state there is, rather than the whole table. (A context is counted in its own index.)
		count += ` AND state IN (SELECT state FROM task_counts)`
	}
	if err := tx.QueryRowContext(ctx, count, args...).Scan(&page.Total); err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	// One row beyond the page tells whether there is a next page.
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, task FROM tasks`+pageFilter+` ORDER BY seq DESC LIMIT ?`,
		append(pageArgs, q.PageSize+1)...)
	if err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	defer rows.Close()
	tasks, last, more, err := ReadPage(rows, q.PageSize, func(err error) error { return fmt.Errorf("member: listing tasks: %w", err) })
	if err != nil {
		return ListPage{}, err
	}
	page.Tasks = tasks
	if more {
		page.NextPageToken = encodePageToken(last, digest)
	}
	return page, nil
}

// A page token is base64url of a version byte, the seq of the last task of its page and a digest of
// the filter it was issued for: opaque to clients, and refused with any other filter.
const (
	pageTokenVersion = 1
	pageTokenLen     = 1 + 8 + 8
)

// digest identifies q's filter (not its page size, which a client may change between pages).
func (q ListQuery) digest() [8]byte {
	after := ""
	if !q.After.IsZero() {
		after = strconv.FormatInt(q.After.UnixMilli(), 10)
	}
	sum := sha256.Sum256([]byte(q.ContextID + "\x00" + string(q.State) + "\x00" + after + "\x00" + q.Caller))
	return [8]byte(sum[:8])
}

func encodePageToken(seq int64, digest [8]byte) string {
	b := make([]byte, 0, pageTokenLen)
	b = append(b, pageTokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = append(b, digest[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(token string, digest [8]byte) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != pageTokenLen || b[0] != pageTokenVersion {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "not a page token this member issued",
		}))
	}
	if [8]byte(b[9:]) != digest {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "issued for a different filter; keep contextId, status and statusTimestampAfter",
		}))
	}
	seq := binary.BigEndian.Uint64(b[1:9])
	if seq == 0 || seq > 1<<63-1 {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "not a page token this member issued",
		}))
	}
	return int64(seq), nil
}
