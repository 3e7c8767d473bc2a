package member

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/attempt"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/queue"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/roster"
)

// noPeers fails every request: the calls below are refused before one is sent.
type noPeers struct{ t *testing.T }

func (p noPeers) Send(context.Context, string, *a2a.Message) (*a2a.Task, error) {
	p.t.Fatal("a request was sent")
	return nil, nil
}
func (p noPeers) Get(context.Context, string, a2a.TaskID) (*a2a.Task, error) {
	p.t.Fatal("a request was sent")
	return nil, nil
}
func (p noPeers) Cancel(context.Context, string, a2a.TaskID) error {
	p.t.Fatal("a request was sent")
	return nil
}

// The session answers call-member and end-without-answer only for the running task, and
// end-without-answer only for a member that may call another (member/calls tests the rest).
func TestCallToolsNeedTheRunningTask(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lead", "worker"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte("name: "+n+"\n"), 0o644)
	}
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: lead, capsule: ./lead}\n  - {name: worker, capsule: ./worker}\nreach:\n  - {from: lead, to: [worker]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.Open(filepath.Join(dir, "records"), "ses_test", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	m, _ := metrics.New(prometheus.NewRegistry())
	c := &capsule.Capsule{Name: "lead"}
	c.Capabilities.Network.Allow = []string{"localhost"}
	s := &Session{cfg: Config{Member: "lead", Capsule: c, Roster: r, Metrics: m, Getenv: func(string) string { return "" }},
		records: rec, peers: noPeers{t}, tasks: queue.New()}
	ctx, cancel := context.WithCancel(context.Background())
	task := &a2a.Task{ID: "tsk_caller", Metadata: map[string]any{}}
	s.tasks.Add(task.ID, false, true)
	_, running, _ := s.tasks.Next(ctx)
	running.Attempt = attempt.Start(ctx, s.attemptConfig(task), string(task.ID))
	defer running.Attempt.End()
	defer cancel()

	if _, err := s.CallMember(ctx, "tsk_other", "worker", "x"); err == nil || err.Error() != "'call-member' is answered only while a task runs; this session is running none" {
		t.Errorf("no task: %v", err)
	}
	if _, err := s.EndWithoutAnswer("tsk_other", "x"); err == nil || err.Error() != "'end-without-answer' is answered only while a task runs; this session is running none" {
		t.Errorf("no task: %v", err)
	}
	s.cfg.Roster = nil
	if _, err := s.EndWithoutAnswer("tsk_caller", "no luck"); err == nil || err.Error() != "'end-without-answer' is answered only for a formation member that roster.yaml lets call another; this session is not one" {
		t.Errorf("not a caller: %v", err)
	}
}
