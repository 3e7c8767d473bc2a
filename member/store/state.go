package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
)

// StateOf reads the state of the stored task id from its JSON. It reads no further than the task's
// status, which a stored task has before its history and artifacts: the rest is not decoded, nor even
// scanned.
func StateOf(id a2a.TaskID, body []byte) (a2a.TaskState, error) {
	fail := func(err error) (a2a.TaskState, error) {
		return "", fmt.Errorf("member: task store: reading the state of stored task %s: %w", id, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the task's {
		return fail(err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		if key == "status" {
			var st struct {
				State a2a.TaskState `json:"state"`
			}
			if err := dec.Decode(&st); err != nil {
				return fail(err)
			}
			return st.State, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fail(err)
		}
	}
	return fail(errors.New("it has no status"))
}
