package store

import "github.com/murmur-run/murmur/a2a"

// Rows is a query's result as both stores read it: database/sql's *Rows and pgx's Rows are one.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadPage reads the rows (seq, id, task JSON) of a ListTasks query, newest first and one beyond the page
// asked for, into a page of at most pageSize tasks and maxPageBytes of them: a response stays bounded
// however large the tasks are, and the next page starts after last, the seq of the last task read. more
// says a next page follows. An error of the rows goes through rowsErr, which says what it means in its
// store; a task that cannot be decoded is returned as Decode says it.
func ReadPage(rows Rows, pageSize int, rowsErr func(error) error) (tasks []*a2a.Task, last int64, more bool, err error) {
	size := 0
	for rows.Next() {
		if len(tasks) == pageSize || size >= maxPageBytes {
			return tasks, last, true, nil
		}
		var id string
		var body []byte
		if err := rows.Scan(&last, &id, &body); err != nil {
			return nil, 0, false, rowsErr(err)
		}
		t, err := Decode(a2a.TaskID(id), body)
		if err != nil {
			return nil, 0, false, err
		}
		size += len(body)
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, false, rowsErr(err)
	}
	return tasks, last, false, nil
}

// ReadMessages reads rows of (caller, message id) into add: what a MessageFilter is loaded with.
func ReadMessages(rows Rows, add func(caller, messageID string)) error {
	for rows.Next() {
		var caller, id string
		if err := rows.Scan(&caller, &id); err != nil {
			return err
		}
		add(caller, id)
	}
	return rows.Err()
}
