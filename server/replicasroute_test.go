package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/member/store"
)

// replicasBody is GET /replicas's answer as a client decodes it.
type replicasBody struct {
	Replica  string            `json:"replica"`
	Replicas []replicaItem     `json:"replicas"`
	Owners   map[string]string `json:"owners"`
	Error    string            `json:"error"`
}

// replicaItem is one replica in GET /replicas's answer.
type replicaItem struct {
	Name       string    `json:"name"`
	Started    time.Time `json:"started"`
	LeaseUntil time.Time `json:"leaseUntil"`
	Free       int       `json:"free"`
	Live       bool      `json:"live"`
}

// getReplicas is GET base/replicas with token ("" for none): its status, WWW-Authenticate header and
// decoded body (a body that is not JSON fails the test).
func getReplicas(t *testing.T, base, token string) (int, string, replicasBody) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/replicas", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var b replicasBody
	if err := json.Unmarshal(raw, &b); err != nil || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /replicas: %d %q, Content-Type %q: want JSON (%v)", res.StatusCode, raw, res.Header.Get("Content-Type"), err)
	}
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), b
}

// GET /replicas on each of three replicas of one member: the answering replica's name, the three
// replicas live with their leases, and which replica runs each unended task, the same as the store
// says, whichever replica is asked; a task that ended leaves the owners. Without a token it is 401, and
// a peer's credential gets 403: the replicas are the operator's to see.
func TestReplicasRouteListsReplicasAndOwners(t *testing.T) {
	rs := startReplicas(t, 3, 2*time.Second)
	var sent []*a2ago.Task
	for i := range 2 {
		sent = append(sent, sendTask(t, rs.clients[0], "task "+string(rune('a'+i)), true))
	}
	for _, task := range sent {
		waitState(t, rs.clients[0], task.ID, a2ago.TaskStateWorking)
	}
	want := map[string]string{}
	for id, o := range rs.owners() {
		want[string(id)] = o
	}
	if len(want) != 2 || want[string(sent[0].ID)] == "" || want[string(sent[1].ID)] == "" {
		t.Fatalf("the store's owners: %v; want the two tasks claimed", want)
	}
	for i, f := range rs.fs {
		base := f.Members[0].URL
		var b replicasBody
		var code int
		waitFor(t, func() bool { // each replica writes its lease as it starts; wait for the three
			code, _, b = getReplicas(t, base, testOperatorToken)
			return code == http.StatusOK && len(b.Replicas) == 3 && !slices.ContainsFunc(b.Replicas, func(e replicaItem) bool { return !e.Live })
		})
		if me := "r" + string(rune('1'+i)); b.Replica != me {
			t.Errorf("replica %s answers replica %q", me, b.Replica)
		}
		var names []string
		for _, e := range b.Replicas {
			names = append(names, e.Name)
			if e.Started.IsZero() || !e.LeaseUntil.After(e.Started) || e.Free < 0 {
				t.Errorf("replica %s's entry: %+v; want a start, a lease after it and free places", e.Name, e)
			}
		}
		if !slices.Equal(names, []string{"r1", "r2", "r3"}) {
			t.Errorf("GET /replicas at %s lists %v; want r1, r2, r3", b.Replica, names)
		}
		if !maps.Equal(b.Owners, want) {
			t.Errorf("GET /replicas at %s: owners %v; want the store's %v", b.Replica, b.Owners, want)
		}
	}

	base := rs.fs[1].Members[0].URL
	if code, challenge, b := getReplicas(t, base, ""); code != http.StatusUnauthorized || challenge == "" || b.Error == "" || b.Replicas != nil {
		t.Errorf("GET /replicas without a token: %d %q %+v; want 401 with a challenge, an error and no replica", code, challenge, b)
	}
	if code, _, b := getReplicas(t, base, "wrong"); code != http.StatusUnauthorized || b.Replicas != nil {
		t.Errorf("GET /replicas with a wrong token: %d %+v; want 401", code, b)
	}
	peer := peercred.NewKey(testFormationToken, "reps").Credential("solo", peercred.Trusted)
	if code, _, b := getReplicas(t, base, peer); code != http.StatusForbidden || !strings.Contains(b.Error, "operator") || b.Replicas != nil {
		t.Errorf("GET /replicas with a peer's credential: %d %+v; want 403 naming the operator token", code, b)
	}

	// Once the tasks end, no replica runs them.
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	for _, task := range sent {
		waitState(t, rs.clients[2], task.ID, a2ago.TaskStateCompleted)
	}
	if code, _, b := getReplicas(t, base, testOperatorToken); code != http.StatusOK || len(b.Owners) != 0 {
		t.Errorf("GET /replicas once every task ended: %d owners %v; want none", code, b.Owners)
	}
}

// A member of one process has no replicas: GET /replicas answers 404 with a JSON error that says so,
// to the operator; a peer still gets 403.
func TestReplicasRouteOfOneProcess(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	code, _, b := getReplicas(t, f.url, testOperatorToken)
	if code != http.StatusNotFound || !strings.Contains(b.Error, "runs as one process") || b.Replicas != nil {
		t.Errorf("GET /replicas of a member of one process: %d %+v; want 404 saying it runs as one process", code, b)
	}
	t.Log(b.Error)
	if code, _, _ := getReplicas(t, f.url, peerToken("caller", peercred.Trusted)); code != http.StatusForbidden {
		t.Errorf("GET /replicas of a member of one process with a peer's credential: %d; want 403", code)
	}
}

// fakeReplicas is a ReplicaSet of fixed answers.
type fakeReplicas struct {
	infos  []store.ReplicaInfo
	owners map[a2a.TaskID]string
	err    error
}

func (f fakeReplicas) Replica() string { return "r1" }
func (f fakeReplicas) Replicas(context.Context) ([]store.ReplicaInfo, error) {
	return f.infos, f.err
}
func (f fakeReplicas) Owners(context.Context) (map[a2a.TaskID]string, error) { return f.owners, nil }

// GET /replicas says a replica is live by the door's clock: a lease until now is live, one that lapsed
// a millisecond ago is not (it is listed until a replica reaps it); a store that cannot be read is 503.
func TestReplicasRouteLiveByTheClock(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	door := func(rs ReplicaSet) string {
		reg := prometheus.NewRegistry()
		d, err := NewDoor(DoorConfig{Member: "solo", Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken},
			Card: NewCard("solo", "", "test", "http://127.0.0.1:1", "test"), Gatherer: reg, Registerer: reg,
			Now: func() time.Time { return now }, Replicas: rs})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(d)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	base := door(fakeReplicas{infos: []store.ReplicaInfo{
		{Name: "r1", Started: now.Add(-time.Hour), LeaseUntil: now, Free: 2},
		{Name: "r2", Started: now.Add(-time.Hour), LeaseUntil: now.Add(-time.Millisecond), Free: 1},
	}, owners: map[a2a.TaskID]string{"tsk_1": "r2"}})
	code, _, b := getReplicas(t, base, testOperatorToken)
	if code != http.StatusOK || b.Replica != "r1" || len(b.Replicas) != 2 || !b.Replicas[0].Live || b.Replicas[1].Live ||
		b.Replicas[0].Free != 2 || !b.Replicas[1].LeaseUntil.Equal(now.Add(-time.Millisecond)) || b.Owners["tsk_1"] != "r2" {
		t.Errorf("GET /replicas: %d %+v; want r1 live (its lease ends now), r2 lapsed, tsk_1 on r2", code, b)
	}
	base = door(fakeReplicas{err: errors.New("member: reading the replicas: the database is unreachable")})
	if code, _, b := getReplicas(t, base, testOperatorToken); code != http.StatusServiceUnavailable || !strings.Contains(b.Error, "unreachable") {
		t.Errorf("GET /replicas on a store that fails: %d %+v; want 503 with the store's error", code, b)
	}
	// No replica set at all (a door built without one): 404.
	base = door(nil)
	if code, _, b := getReplicas(t, base, testOperatorToken); code != http.StatusNotFound || !strings.Contains(b.Error, "one process") {
		t.Errorf("GET /replicas of a door without replicas: %d %+v; want 404", code, b)
	}
}
