package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// A member run as replicas (DESIGN §16) answers GET /replicas with its replicas and which one runs each
// task that has not ended; a member of one process answers 404. The console reads it beside ListTasks:
// a member's page lists its replicas, and a task's row and page name the replica that runs it.

// ReplicaView is one replica of a member as the pages show it.
type ReplicaView struct {
	Name       string
	Started    time.Time
	LeaseUntil time.Time
	Free       int  // the tasks it could take at its last renewal
	Live       bool // its lease had not lapsed when its door answered
	Running    int  // the unended tasks it runs (claimed, queued at it or running)
}

// Lease is "live" or "lapsed".
func (r ReplicaView) Lease() string {
	if r.Live {
		return "live"
	}
	return "lapsed"
}

// replicasEvery is how often a replicated member's replicas are read again, at most; a member that
// answered that it runs as one process is asked again every replicasOfOneEvery (it may be restarted
// as replicas).
const (
	replicasEvery      = time.Second
	replicasOfOneEvery = 30 * time.Second
)

// maxReplicasBody bounds the answer of GET /replicas.
const maxReplicasBody = 4 << 20

// replicasAnswer is the body of a door's GET /replicas.
type replicasAnswer struct {
	Replica  string `json:"replica"`
	Replicas []struct {
		Name       string    `json:"name"`
		Started    time.Time `json:"started"`
		LeaseUntil time.Time `json:"leaseUntil"`
		Free       int       `json:"free"`
		Live       bool      `json:"live"`
	} `json:"replicas"`
	Owners map[string]string `json:"owners"`
	Error  string            `json:"error"`
}

// readReplicas reads m's GET /replicas when it is due. It returns the tasks whose replica changed, and
// whether what the member's pages show of its replicas changed.
func (m *memberWatch) readReplicas(ctx context.Context, hc *http.Client) ([]string, bool) {
	m.mu.Lock()
	every := replicasEvery
	if m.replicasRead && !m.replicated && m.replicasErr == "" {
		every = replicasOfOneEvery
	}
	due := !m.replicasRead || time.Since(m.replicasAt) >= every
	m.mu.Unlock()
	if !due {
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	answer, status, err := m.getReplicas(rctx, hc)
	if err != nil && ctx.Err() != nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replicasRead, m.replicasAt = true, time.Now()
	wasReplicated, wasErr, oldReplicas, oldOwners := m.replicated, m.replicasErr, m.replicas, m.owners
	switch {
	case err != nil:
		// The door could not be read: the poll says so; what was read before stays.
		return nil, false
	case status == http.StatusNotFound:
		m.replicated, m.replicasErr, m.replicas, m.owners = false, "", nil, nil
	case status != http.StatusOK:
		m.replicasErr = fmt.Sprintf("the door answered GET /replicas with HTTP %d: %s", status, answer.Error)
	default:
		m.replicated, m.replicasErr = true, ""
		m.replicas = m.replicas[:0:0]
		for _, r := range answer.Replicas {
			m.replicas = append(m.replicas, ReplicaView{Name: r.Name, Started: r.Started, LeaseUntil: r.LeaseUntil, Free: r.Free, Live: r.Live})
		}
		m.owners = answer.Owners
		if m.owners == nil {
			m.owners = map[string]string{}
		}
	}
	var moved []string
	for id, o := range m.owners {
		if oldOwners[id] != o {
			moved = append(moved, id)
		}
	}
	for id := range oldOwners {
		if _, ok := m.owners[id]; !ok {
			moved = append(moved, id)
		}
	}
	slices.Sort(moved)
	// A lease renewed is no change worth a page's redraw; a replica that came, went, lapsed or whose
	// free places changed is.
	same := slices.EqualFunc(oldReplicas, m.replicas, func(a, b ReplicaView) bool {
		return a.Name == b.Name && a.Live == b.Live && a.Free == b.Free
	})
	return moved, len(moved) > 0 || !same || wasReplicated != m.replicated || wasErr != m.replicasErr
}

// getReplicas is GET /replicas on m's door with the operator token: its answer and HTTP status.
func (m *memberWatch) getReplicas(ctx context.Context, hc *http.Client) (replicasAnswer, int, error) {
	var a replicasAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/replicas", nil)
	if err != nil {
		return a, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Accept", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return a, 0, fmt.Errorf("door %s unreachable: %w", m.URL, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxReplicasBody))
	if err != nil {
		return a, 0, err
	}
	if res.StatusCode == http.StatusNotFound {
		return a, res.StatusCode, nil // one process (or a door older than the route)
	}
	err = json.Unmarshal(raw, &a)
	if res.StatusCode == http.StatusOK && (err != nil || a.Replica == "") {
		return a, 0, fmt.Errorf("door %s answered GET /replicas with what is not a list of replicas: %s", m.URL, snippet(raw))
	}
	if err != nil {
		a.Error = snippet(raw)
	}
	return a, res.StatusCode, nil
}

// replicaOfLocked is the replica that runs task id of m, "" when none does or m runs as one process.
func (m *memberWatch) replicaOfLocked(id string) string { return m.owners[id] }

// replicaOf is replicaOfLocked under m's lock, with whether m runs as replicas.
func (m *memberWatch) replicaOf(id string) (replica string, replicated bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owners[id], m.replicated
}

// replicasViewLocked fills v's replicas from what GET /replicas said.
func (m *memberWatch) replicasViewLocked(v *MemberView) {
	v.Replicated, v.ReplicasErr = m.replicated, m.replicasErr
	if !m.replicated {
		return
	}
	running := map[string]int{}
	for _, o := range m.owners {
		running[o]++
	}
	for _, r := range m.replicas {
		r.Running = running[r.Name]
		if r.Live {
			v.LiveReplicas++
		}
		v.Replicas = append(v.Replicas, r)
	}
}
